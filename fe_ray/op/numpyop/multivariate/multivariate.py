"""The base of spatial ops that move an image and its masks together (FastEstimator's ``image_in``/``mask_in`` API)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp

# The kinds of data FastEstimator's multivariate ops take, in the order their keys become the op's inputs.
TARGETS = ("image", "mask", "masks")
UNSUPPORTED = ("bbox_in", "keypoints_in", "bbox_out", "keypoints_out", "bbox_params", "keypoint_params")


def check_size(size: Any, name: str, op: str) -> int:
    """Return the size argument ``name`` of ``op`` as an int, or raise ValueError unless it is a positive int."""
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
        raise ValueError(f"{op} {name} must be a positive int, got {size!r}.")
    return int(size)


def check_range(limit: Any, name: str, op: str, bias: float = 0.0) -> tuple[float, float]:
    """Return the range argument ``name`` of ``op`` as ``(low, high)`` floats, offset by ``bias``.

    As in albumentations, a number ``a`` means ``(-a, a)`` and a pair ``(low, high)`` is taken as is; ``bias`` is then
    added to both ends (1 turns a scale limit ``0.1`` into the factors ``(0.9, 1.1)``).

    Raises:
        ValueError: Unless ``limit`` is a number or a pair of numbers (in either order).
    """
    def number(value: Any) -> bool:
        return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)

    bounds: tuple[float, float] | None = None
    if number(limit):
        bounds = -float(limit), float(limit)
    elif isinstance(limit, (list, tuple)) and len(limit) == 2 and all(number(v) for v in limit):
        # Either order, as albumentations' to_tuple (which FastEstimator's ops go through) sorts the pair.
        bounds = float(min(limit)), float(max(limit))
    if bounds is None:
        raise ValueError(f"{op} {name} must be a number a (for the range [-a, a]) or a pair of numbers (the range's "
                         f"ends), got {limit!r}.")
    return bounds[0] + bias, bounds[1] + bias


class MultiVariateOp(NumpyOp):
    """A spatial transform applied with the same parameters to an image, a mask and/or a list of masks.

    Images are ``(height, width)`` or ``(height, width, channels)``; a mask is ``(height, width)`` or ``(height,
    width, channels)``; ``masks`` is a sequence of such masks (a list, or an array with the masks on axis 0). The
    transform acts on the first two axes. Random subclasses draw their parameters once per sample in
    :meth:`get_params`, so image and masks stay aligned. As in FastEstimator, ``forward`` takes and returns a list
    in the order image, mask, masks (those given); a direct call with one bare array returns one array.

    Subclasses implement :meth:`apply` (and :meth:`apply_to_mask` when masks need other settings, e.g. another fill
    value) and, if random, set ``is_random = True`` and override :meth:`get_params`.

    Args:
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        image_in: Key of the image.
        mask_in: Key of a mask, transformed like the image.
        masks_in: Key of a sequence of masks, each transformed like the image.
        bbox_in: Not supported by fe_ray (FastEstimator: key of bounding boxes); must be None.
        keypoints_in: Not supported by fe_ray (FastEstimator: key of keypoints); must be None.
        image_out: Key to write the image to (default ``image_in``).
        mask_out: Key to write the mask to (default ``mask_in``).
        masks_out: Key to write the masks to (default ``masks_in``).
        bbox_out: Not supported; must be None.
        keypoints_out: Not supported; must be None.
        bbox_params: Not supported; must be None.
        keypoint_params: Not supported; must be None.

    Raises:
        ValueError: If no input key is given, or a bounding-box / keypoint argument is.
    """

    def __init__(self, mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        name = type(self).__name__
        given = {arg: value for arg, value in zip(UNSUPPORTED, (bbox_in, keypoints_in, bbox_out, keypoints_out,
                                                                bbox_params, keypoint_params)) if value is not None}
        if given:
            raise ValueError(f"{name} got {', '.join(f'{k}={v!r}' for k, v in given.items())}, but fe_ray's "
                             "multivariate ops transform images and masks only (image_in, mask_in, masks_in); "
                             "bounding boxes and keypoints are not supported. Transform them with a custom NumpyOp.")
        keys_in = (image_in, mask_in, masks_in)
        if all(key is None for key in keys_in):
            raise ValueError(f"{name} needs at least one of image_in, mask_in or masks_in (the key(s) to transform).")
        keys_out = (image_out or image_in, mask_out or mask_in, masks_out or masks_in)
        self.targets = [target for target, key in zip(TARGETS, keys_in) if key is not None]
        super().__init__(inputs=[key for key in keys_in if key is not None],
                         outputs=[key for key in keys_out if key is not None], mode=mode, ds_id=ds_id)

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Any:
        """The parameters of one sample's transform (random ones drawn from ``get_rng(state)``)."""
        return None

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        """Transform an image with the sample's ``params``."""
        raise NotImplementedError

    def apply_to_mask(self, mask: np.ndarray, params: Any) -> np.ndarray:
        """Transform a mask with the sample's ``params``; like the image by default."""
        return self.apply(mask, params)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        # The Pipeline hands a list (one value per input key); a direct call with a bare array gets one back.
        single = not isinstance(data, (list, tuple))
        items = [data] if single else list(data)
        arrays = [self._checked(target, value) for target, value in zip(self.targets, items)]
        height, width = self._spatial_size(arrays)
        params = self.get_params(height, width, state)
        results: list[Any] = []
        for target, value in zip(self.targets, arrays):
            if target == "image":
                results.append(self.apply(value, params))
            elif target == "mask":
                results.append(self.apply_to_mask(value, params))
            else:
                masks = [self.apply_to_mask(np.asarray(mask), params) for mask in value]
                results.append(np.stack(masks) if isinstance(value, np.ndarray) else masks)
        return results[0] if single and len(results) == 1 else results

    def _checked(self, target: str, value: Any) -> Any:
        shapes = [np.shape(mask) for mask in value] if target == "masks" else [np.shape(value)]
        for shape in shapes:
            if len(shape) not in (2, 3):
                key = self.inputs[self.targets.index(target)]
                raise ValueError(f"{type(self).__name__} needs {target} {key!r} of shape (height, width) or (height, "
                                 f"width, channels){' for each mask' if target == 'masks' else ''}, got {shape}.")
        return value if target == "masks" and not isinstance(value, np.ndarray) else np.asarray(value)

    def _spatial_size(self, arrays: list[Any]) -> tuple[int, int]:
        sizes = {}
        for key, target, value in zip(self.inputs, self.targets, arrays):
            for mask in (value if target == "masks" else [value]):
                sizes.setdefault(tuple(np.shape(mask)[:2]), key)
        if len(sizes) != 1:
            raise ValueError(f"{type(self).__name__} transforms its inputs together, so they must share height and "
                             f"width; got {', '.join(f'{key!r}: {size}' for size, key in sizes.items())}.")
        height, width = next(iter(sizes))
        return int(height), int(width)
