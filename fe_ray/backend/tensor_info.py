"""Inspection helpers under FastEstimator's names: shapes, dtypes, NaN checks and the working float precision.

``to_shape`` and ``to_type`` walk nested dicts / lists / tuples / sets; the others take one tensor. None of them
imports torch or TensorFlow: a tensor of either can only exist once its framework is loaded.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from fe_ray.backend.tensor_ops import Tensor, _module, _ops, _shape


def to_shape(data: Any, add_batch: bool = False, exact_shape: bool = True) -> Any:
    """Return ``data`` with every tensor replaced by its shape, keeping the nesting.

    ``{"x": np.ones((10, 15)), "y": [np.ones(4)]}`` gives ``{"x": (10, 15), "y": [(4,)]}``. Leaves that are no
    tensor (numbers, lists of numbers inside a tuple...) get the shape numpy gives them: ``()`` for a number.

    Args:
        data: A tensor / array, or (nested) dicts, lists, tuples and sets of them.
        add_batch: Put a ``None`` batch axis in front of each shape.
        exact_shape: Keep the sizes; False replaces every size by ``None`` (only the rank is kept).

    Returns:
        The same structure with shapes: a tuple per tensor when ``exact_shape`` and not ``add_batch``, else a list
        (as FastEstimator). Unknown TF sizes are ``None``.
    """
    if isinstance(data, dict):
        return {key: to_shape(value, add_batch, exact_shape) for key, value in data.items()}
    if isinstance(data, (list, tuple, set)):
        return _rebuilt(data, [to_shape(value, add_batch, exact_shape) for value in data])
    shape = _leaf_shape(data)
    if not exact_shape:
        shape = (None,) * len(shape)
    if add_batch:
        return [None, *shape]
    return shape if exact_shape else list(shape)


def _rebuilt(container: list[Any] | tuple[Any, ...] | set[Any], values: list[Any]) -> Any:
    """``values`` in a container of ``container``'s type; a namedtuple takes them as its fields."""
    return type(container)(*values) if hasattr(container, "_fields") else type(container)(values)


def _leaf_shape(leaf: Any) -> tuple[int | None, ...]:
    if hasattr(leaf, "shape"):
        shape = _shape(leaf)
        if shape is None:
            raise ValueError(f"to_shape: the rank of {type(leaf).__name__} is unknown (a traced TF tensor without a "
                             f"static rank); give it a static rank with tf.ensure_shape first.")
        return tuple(None if size is None else int(size) for size in shape)
    return np.shape(np.asarray(leaf))


def to_type(data: Any) -> Any:
    """Return ``data`` with every tensor replaced by its dtype, keeping the nesting.

    Tensors give their framework's dtype object (``torch.float32``, ``tf.float32``, ``np.dtype('float32')``);
    other leaves give the numpy dtype numpy infers for them (``int64`` for a Python int).

    Args:
        data: A tensor / array, or (nested) dicts, lists, tuples and sets of them.
    """
    if isinstance(data, dict):
        return {key: to_type(value) for key, value in data.items()}
    if isinstance(data, (list, tuple, set)):
        return _rebuilt(data, [to_type(value) for value in data])
    if hasattr(data, "dtype"):
        return data.dtype
    return np.asarray(data).dtype


def get_shape(tensor: Tensor) -> tuple[Any, ...]:
    """Return the shape of ``tensor`` as a tuple: ``(3, 2, 2)`` for a 3 x 2 x 2 tensor.

    Inside a traced TF graph a size the graph does not know yet (an unknown batch size, say) is a scalar int32
    tensor holding the running size, as FastEstimator's ``tf.shape`` gives it, so the result can build a
    ``reshape``; known sizes stay Python ints.

    Args:
        tensor: A torch / TF tensor or numpy array.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If even the rank of a traced TF tensor is unknown.
    """
    _ops(tensor, "get_shape")
    return _sizes(tensor, _leaf_shape(tensor))


def _sizes(tensor: Any, shape: tuple[int | None, ...]) -> tuple[Any, ...]:
    """``shape`` (that of ``tensor``) with the unknown sizes of a traced TF graph read from the running graph."""
    if None in shape:  # only a traced TF tensor has unknown sizes, so TF is loaded
        return _module("tf").fill_unknown_sizes(tensor, shape)
    return shape


def get_image_dims(tensor: Tensor) -> tuple[Any, Any, Any]:
    """Return ``(channels, height, width)`` of an image or a batch of images.

    torch tensors are read channels first (``(C, H, W)`` / ``(N, C, H, W)``); TF tensors and numpy arrays
    channels last (``(H, W, C)`` / ``(N, H, W, C)``), as each framework lays images out. A size a traced TF graph
    does not know yet is a scalar tensor (see :func:`get_shape`).

    Args:
        tensor: A 3-d or 4-d torch / TF tensor or numpy array.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``tensor`` does not have 3 or 4 axes.
    """
    from fe_ray.backend import get_framework

    _ops(tensor, "get_image_dims")
    shape = _leaf_shape(tensor)
    if len(shape) not in (3, 4):
        raise ValueError(f"get_image_dims: needs an image with 3 axes or a batch with 4, got shape {list(shape)}; "
                         f"add or remove axes (e.g. fe_ray.backend.expand_dims for a missing channel axis).")
    shape = _sizes(tensor, shape)
    if get_framework(tensor) == "torch":
        return shape[-3], shape[-2], shape[-1]
    return shape[-1], shape[-3], shape[-2]


def check_nan(val: Any) -> Any:
    """Return True if ``val`` holds any NaN or infinite value (inf counts too, as in FastEstimator).

    Inside a traced TF graph, where the values are not known yet, a TF tensor gives a scalar bool tensor instead
    (as FastEstimator's does), to use in the graph (``tf.cond``, say).

    Args:
        val: A number, a torch / TF tensor or numpy array, or a (nested) list / tuple / dict of them.
            Integer and boolean data never hold NaN.

    Raises:
        TypeError: If a leaf is neither a number nor a tensor nor an array (a string, say).
    """
    if isinstance(val, dict):
        return _any_found([check_nan(value) for value in val.values()])
    if isinstance(val, (list, tuple, set)) and not _is_numeric_sequence(val):
        return _any_found([check_nan(value) for value in val])
    from fe_ray.backend import get_framework

    ops = _module(get_framework(val))
    if not ops.is_tensor(val):
        array = np.asarray(val)
        if array.dtype.kind not in "biufc":
            raise TypeError(f"check_nan: cannot look for NaN in {type(val).__name__} {val!r}; pass numbers, "
                            f"tensors or arrays (or containers of them).")
        return _module("np").has_nan_or_inf(array)
    return ops.has_nan_or_inf(val)


def _any_found(results: list[Any]) -> Any:
    """Whether any of the leaves' answers is True: a bool, or a bool tensor if a traced TF graph gave one."""
    if all(isinstance(found, bool) for found in results):
        return any(results)
    tf = sys.modules["tensorflow"]  # only a traced TF tensor answers with a tensor, so TF is loaded
    return tf.reduce_any(tf.stack([tf.convert_to_tensor(found) for found in results]))


def _is_numeric_sequence(values: Any) -> bool:
    return all(isinstance(value, (bool, int, float, complex)) for value in values)


def convert_tensor_precision(tensor: Tensor) -> Tensor:
    """Return ``tensor`` cast to the working float precision: float16 inside a mixed-precision run, else float32.

    A run counts as mixed precision when Keras' global policy computes in float16 (FastEstimator's test, for every
    framework) or, for a torch tensor, when torch autocast in float16 is on for its device.

    Args:
        tensor: A torch / TF tensor or numpy array.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
    """
    from fe_ray.backend.tensor_ops import cast

    _ops(tensor, "convert_tensor_precision")
    return cast(tensor, "float16" if _mixed_precision(tensor) else "float32")


def _mixed_precision(tensor: Any) -> bool:
    keras = sys.modules.get("keras")  # never imported here: without Keras loaded, no Keras policy can be set
    if keras is not None and keras.mixed_precision.global_policy().compute_dtype == "float16":
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(tensor, torch.Tensor):
        device = tensor.device.type
        return bool(torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.float16)
    return False
