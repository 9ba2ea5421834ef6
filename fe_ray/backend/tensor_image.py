"""Image-batch helpers under FastEstimator's names: ``random_mix_patch`` (CutMix's patch box) and ``resize_3d``.

Framework code is imported inside the functions, only for a tensor of that framework (which can only exist once
the framework is loaded). Images follow each framework's layout: channels first for torch (``(N, C, H, W)``,
volumes ``(N, C, D, H, W)``), channels last for TF and numpy (``(N, H, W, C)``, volumes ``(N, D, H, W, C)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fe_ray.backend.tensor_ops import Tensor, _ops, _shape
from fe_ray.util.base import is_int

#: The interpolation modes :func:`resize_3d` offers (FastEstimator's two).
RESIZE_3D_MODES = ("nearest", "area")


def random_mix_patch(tensor: Tensor, x: Any, y: Any, lam: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Return the box ``(x1, x2, y1, y2, width, height)`` of the patch CutMix pastes into an image batch.

    The patch is centred at ``(x * width, y * height)`` and has the image's aspect ratio with sides scaled by
    ``sqrt(1 - lam)``, so it covers about ``1 - lam`` of the image before it is clipped at the borders. Corners are
    rounded to the nearest pixel (halves to even) as int32 tensors; the box spans rows ``y1 .. y2 - 1`` and columns
    ``x1 .. x2 - 1``. For a 32 x 32 batch, ``x = y = 0.25`` and ``lam = 0.5`` give ``(0, 19, 0, 19, 32, 32)``.

    Args:
        tensor: A batch of images (or one image): a torch tensor ``(N, C, H, W)``, or a TF tensor / numpy array
            ``(N, H, W, C)``.
        x: The patch centre's column as a fraction of the width, in [0, 1]: a number or a scalar tensor of
            ``tensor``'s framework.
        y: The patch centre's row as a fraction of the height, in [0, 1].
        lam: The share of the image to keep, in [0, 1].

    Returns:
        ``x1, x2, y1, y2`` (int32 tensors shaped like the arguments) and ``width, height`` (ints; int32 scalar
        tensors for sizes a traced TF graph does not know).

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``tensor`` has neither 3 nor 4 axes.
    """
    from fe_ray.backend.tensor_math import tensor_sqrt
    from fe_ray.backend.tensor_ops import cast, clip_by_value, tensor_round

    height, width = _image_size(tensor)
    x, y, lam = (_float_of(value, tensor) for value in (x, y, lam))
    fwidth, fheight = _float_size(width, tensor), _float_size(height, tensor)
    side = tensor_sqrt(1.0 - lam)
    half_w, half_h = fwidth * side / 2, fheight * side / 2
    centre_x, centre_y = fwidth * x, fheight * y
    x1 = cast(tensor_round(clip_by_value(centre_x - half_w, min_value=0.0)), "int32")
    x2 = cast(tensor_round(clip_by_value(centre_x + half_w, max_value=fwidth)), "int32")
    y1 = cast(tensor_round(clip_by_value(centre_y - half_h, min_value=0.0)), "int32")
    y2 = cast(tensor_round(clip_by_value(centre_y + half_h, max_value=fheight)), "int32")
    return x1, x2, y1, y2, width, height


def _image_size(tensor: Any) -> tuple[Any, Any]:
    """``(height, width)`` of an image (batch): ints, or int32 scalars for sizes unknown to a traced TF graph."""
    from fe_ray.backend import get_framework

    _ops(tensor, "random_mix_patch")
    shape = _shape(tensor)
    if shape is None or len(shape) not in (3, 4):
        raise ValueError(f"random_mix_patch: needs an image with 3 axes or a batch with 4, got shape "
                         f"{None if shape is None else list(shape)}.")
    axes = (-2, -1) if get_framework(tensor) == "torch" else (-3, -2)
    sizes = [shape[axis] for axis in axes]
    if any(size is None for size in sizes):
        import tensorflow as tf  # only a traced TF tensor has unknown sizes

        dynamic = tf.shape(tensor)
        sizes = [dynamic[axis] if size is None else size for axis, size in zip(axes, sizes)]
    return sizes[0], sizes[1]


def _float_of(value: Any, like: Any) -> Any:
    """``value`` (a number or a tensor) as a float32 tensor of ``like``'s framework."""
    import numpy as np

    from fe_ray.backend import get_framework, to_tensor
    from fe_ray.backend.tensor_ops import cast

    if get_framework(value) == "np":
        value = to_tensor(np.asarray(value, dtype=np.float32), get_framework(like))
    return cast(value, "float32")


def _float_size(size: Any, like: Any) -> Any:
    """An image size as a float: a Python float, or a float32 tensor for a dynamic TF size."""
    if isinstance(size, int):
        return float(size)
    from fe_ray.backend.tensor_ops import cast

    return cast(size, "float32")


def resize_3d(tensor: Tensor, output_shape: Sequence[int], resize_mode: str = "nearest") -> Tensor:
    """Return a batch of volumes resized to ``output_shape`` (depth, height, width), channels untouched.

    torch resizes with ``torch.nn.functional.interpolate``, TF with ``tf.image.resize`` along the height / width
    axes and then the depth axis, as FastEstimator does; each framework keeps its own sampling grid, so 'nearest'
    picks source voxel ``floor(i * in / out)`` in torch and ``floor((i + 0.5) * in / out)`` in TF (the same for
    integer up-scaling). 'area' averages the source voxels each output voxel covers (TF returns float32).

    FastEstimator 1.7's ``resize_3d`` takes torch tensors only; fe_ray also resizes TF tensors, as FastEstimator's
    earlier releases did.

    Args:
        tensor: A 5-d torch tensor ``(N, C, D, H, W)`` or TF tensor ``(N, D, H, W, C)``.
        output_shape: The new ``(depth, height, width)``.
        resize_mode: 'nearest' or 'area'.

    Raises:
        TypeError: If ``tensor`` is no torch or TF tensor.
        ValueError: If ``resize_mode`` is unknown, ``output_shape`` is not three positive ints, or ``tensor`` does not
            have 5 axes.
    """
    from fe_ray.backend import get_framework

    if resize_mode not in RESIZE_3D_MODES:
        raise ValueError(f"resize_3d: unknown resize_mode {resize_mode!r}; valid choices are {list(RESIZE_3D_MODES)}.")
    sizes = list(output_shape)
    if len(sizes) != 3 or not all(is_int(size) and size > 0 for size in sizes):
        raise ValueError(f"resize_3d: output_shape must be three positive ints (depth, height, width), got "
                         f"{output_shape!r}.")
    sizes = [int(size) for size in sizes]  # numpy ints too
    framework = get_framework(tensor)
    _ops(tensor, "resize_3d")
    if framework not in ("torch", "tf"):
        raise TypeError(f"resize_3d: needs a torch or TF tensor, got {type(tensor).__name__}; convert it first, e.g. "
                        "fe_ray.backend.to_tensor(array, 'torch').")
    shape = _shape(tensor)
    if shape is None or len(shape) != 5:
        layout = "(N, C, D, H, W)" if framework == "torch" else "(N, D, H, W, C)"
        raise ValueError(f"resize_3d: needs a batch of volumes {layout}, got shape "
                         f"{None if shape is None else list(shape)}.")
    if framework == "torch":
        import torch

        return torch.nn.functional.interpolate(tensor, size=sizes, mode=resize_mode)
    return _tf_resize_3d(tensor, sizes, resize_mode)


def _tf_resize_3d(tensor: Any, sizes: list[int], mode: str) -> Any:
    """TF ``resize_3d``: two 2-d resizes, the second one changing the depth only."""
    import tensorflow as tf

    depth, height, width = sizes
    static = _shape(tensor)
    dynamic = tf.shape(tensor)
    batch, old_depth, old_height, old_width, channels = (
        dynamic[axis] if size is None else size for axis, size in enumerate(static))
    # Every depth slice is an image: resize its height and width.
    planes = tf.reshape(tensor, [batch * old_depth, old_height, old_width, channels])
    planes = tf.image.resize(planes, [height, width], method=mode)
    # Each volume, read as a (depth x height*width) image, then needs its rows resized only; resizing the columns
    # to their own count is the identity for both modes (nearest and area are separable along the axes).
    columns = tf.reshape(planes, [batch, old_depth, height * width, channels])
    columns = tf.image.resize(columns, [depth, height * width], method=mode)
    return tf.reshape(columns, [batch, depth, height, width, channels])
