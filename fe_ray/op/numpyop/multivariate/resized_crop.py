"""RandomSizedCrop and RandomResizedCrop: cut a random window out of an image and its masks, then resize it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.interpolation import (
    INTER_LINEAR,
    INTER_NEAREST,
    check_interpolation,
    resize_array,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_size, translate_scale
from fe_ray.op.numpyop.randomness import get_rng

Window = tuple[int, int, int, int]  # (top, left, height, width) of the crop


class _ResizedCrop(MultiVariateOp):
    """Crop the window :meth:`get_params` draws and resize it to ``height`` x ``width`` (masks: nearest)."""

    is_random = True

    def __init__(self, height: int, width: int, interpolation: int, mode: None | str | Iterable[str],
                 ds_id: None | str | Iterable[str], image_in: str | None, mask_in: str | None, masks_in: str | None,
                 bbox_in: str | None, keypoints_in: str | None, image_out: str | None, mask_out: str | None,
                 masks_out: str | None, bbox_out: str | None, keypoints_out: str | None, bbox_params: Any,
                 keypoint_params: Any) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        name = type(self).__name__
        self.height = check_size(height, "height", name)
        self.width = check_size(width, "width", name)
        self.interpolation = check_interpolation(interpolation, name)

    def apply(self, image: np.ndarray, params: Window) -> np.ndarray:
        return self._crop_resize(image, params, self.interpolation)

    def apply_to_mask(self, mask: np.ndarray, params: Window) -> np.ndarray:
        return self._crop_resize(mask, params, INTER_NEAREST)

    def _crop_resize(self, data: np.ndarray, params: Window, interpolation: int) -> np.ndarray:
        top, left, crop_h, crop_w = params
        return resize_array(data[top:top + crop_h, left:left + crop_w], self.height, self.width, interpolation)

    def box_map(self, params: Window, height: int, width: int) -> np.ndarray:
        top, left, crop_h, crop_w = params
        scale_x, scale_y = self.width / crop_w, self.height / crop_h
        return translate_scale(sx=scale_x, sy=scale_y, tx=-left * scale_x, ty=-top * scale_y)


def _positive_pair(value: Any, name: str, op: str, integer: bool = False) -> tuple[Any, Any]:
    """A pair of positive numbers: ints in order (low, high), as FastEstimator's ``randint`` needs; floats in either
    order (a uniform draw between them, as in FastEstimator), returned sorted."""
    kinds = (int, np.integer) if integer else (int, float, np.number)
    pair = list(value) if isinstance(value, (list, tuple)) else []
    if len(pair) != 2 or any(not isinstance(v, kinds) or isinstance(v, bool) or not v > 0 for v in pair) or \
            (integer and pair[0] > pair[1]):
        kind = "ints (low, high) with low <= high" if integer else "numbers"
        raise ValueError(f"{op} {name} must be a pair of positive {kind}, got {value!r}.")
    return (int(pair[0]), int(pair[1])) if integer else (float(min(pair)), float(max(pair)))


class RandomSizedCrop(_ResizedCrop):
    """Crop a window of random height (and width ``int(height * w2h_ratio)``) at a random position, then resize it.

    The crop height is drawn uniformly from the ints ``min_max_height`` (both ends included), its position uniformly
    among those that fit; the window is then resized to ``height`` x ``width``. Masks take the same window and are
    resized with nearest neighbour. Random: the draws come from the sample's generator (exact across resumes and
    worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        min_max_height: The range ``(low, high)`` of the crop height, in pixels.
        height: The height of the output.
        width: The width of the output.
        w2h_ratio: The crop's width over its height.
        interpolation: The image's interpolation: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR`` (the default).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If an argument is out of range; when running, if the drawn crop does not fit the input.
    """

    def __init__(self, min_max_height: Sequence[int], height: int, width: int, w2h_ratio: float = 1.0,
                 interpolation: int = INTER_LINEAR, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, bbox_in: str | None = None, keypoints_in: str | None = None,
                 image_out: str | None = None, mask_out: str | None = None, masks_out: str | None = None,
                 bbox_out: str | None = None, keypoints_out: str | None = None, bbox_params: Any = None,
                 keypoint_params: Any = None) -> None:
        super().__init__(height, width, interpolation, mode, ds_id, image_in, mask_in, masks_in, bbox_in,
                         keypoints_in, image_out, mask_out, masks_out, bbox_out, keypoints_out, bbox_params,
                         keypoint_params)
        self.min_max_height = _positive_pair(min_max_height, "min_max_height", "RandomSizedCrop", integer=True)
        if not isinstance(w2h_ratio, (int, float, np.number)) or isinstance(w2h_ratio, bool) or not w2h_ratio > 0:
            raise ValueError(f"RandomSizedCrop w2h_ratio must be a positive number, got {w2h_ratio!r}.")
        self.w2h_ratio = float(w2h_ratio)

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Window:
        rng = get_rng(state)
        crop_h = int(rng.integers(self.min_max_height[0], self.min_max_height[1] + 1))
        crop_w = int(crop_h * self.w2h_ratio)
        if crop_h > height or not 1 <= crop_w <= width:
            raise ValueError(f"RandomSizedCrop drew a {crop_h}x{crop_w} crop (min_max_height={self.min_max_height}, "
                             f"w2h_ratio={self.w2h_ratio}), which does not fit the {height}x{width} input "
                             f"{self.inputs}; lower min_max_height or pad the input first (PadIfNeeded).")
        return int(rng.integers(0, height - crop_h + 1)), int(rng.integers(0, width - crop_w + 1)), crop_h, crop_w


class RandomResizedCrop(_ResizedCrop):
    """Crop a window of random area and aspect ratio at a random position, then resize it (torchvision's recipe).

    Up to ten tries draw an area fraction uniformly from ``scale`` and an aspect ratio (width / height)
    log-uniformly from ``ratio``, round the window's sides, and keep the first window that fits, at a uniform
    position. If none fits, the largest centred window whose ratio is clipped into ``ratio`` is used. The window is
    then resized to ``height`` x ``width``; masks take the same window and nearest neighbour. Random: the draws come
    from the sample's generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        height: The height of the output.
        width: The width of the output.
        scale: The range of the window's area, as fractions of the input's area.
        ratio: The range of the window's aspect ratio (width / height).
        interpolation: The image's interpolation: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR`` (the default).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``height`` / ``width`` is not a positive int, ``scale`` / ``ratio`` is not an ordered pair of
            positive numbers, or ``interpolation`` is not 0 or 1.
    """

    _TRIES = 10

    def __init__(self, height: int, width: int, scale: Sequence[float] = (0.08, 1.0),
                 ratio: Sequence[float] = (0.75, 4 / 3), interpolation: int = INTER_LINEAR,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(height, width, interpolation, mode, ds_id, image_in, mask_in, masks_in, bbox_in,
                         keypoints_in, image_out, mask_out, masks_out, bbox_out, keypoints_out, bbox_params,
                         keypoint_params)
        self.scale = _positive_pair(scale, "scale", "RandomResizedCrop")
        self.ratio = _positive_pair(ratio, "ratio", "RandomResizedCrop")

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Window:
        rng = get_rng(state)
        area = height * width
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(self._TRIES):
            target_area = float(rng.uniform(*self.scale)) * area
            aspect = math.exp(float(rng.uniform(*log_ratio)))
            # Python's round (half to even), as albumentations and torchvision round the sides.
            crop_w = int(round(math.sqrt(target_area * aspect)))
            crop_h = int(round(math.sqrt(target_area / aspect)))
            if 0 < crop_w <= width and 0 < crop_h <= height:
                return int(rng.integers(0, height - crop_h + 1)), int(rng.integers(0, width - crop_w + 1)), \
                    crop_h, crop_w
        in_ratio = width / height
        if in_ratio < self.ratio[0]:  # too tall: full width, the tallest window the ratio allows
            crop_w, crop_h = width, max(1, int(round(width / self.ratio[0])))
        elif in_ratio > self.ratio[1]:  # too wide: full height
            crop_w, crop_h = max(1, int(round(height * self.ratio[1]))), height
        else:
            crop_w, crop_h = width, height
        return (height - crop_h) // 2, (width - crop_w) // 2, crop_h, crop_w
