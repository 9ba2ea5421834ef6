"""Crop, CenterCrop and RandomCrop: cut a window out of an image and its masks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_size, translate_scale
from fe_ray.op.numpyop.randomness import get_rng

Window = tuple[int, int]  # (top, left)


class _Crop(MultiVariateOp):
    """A ``height`` x ``width`` window; subclasses choose where it starts."""

    def __init__(self, height: int, width: int, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, bbox_in: str | None = None, keypoints_in: str | None = None,
                 image_out: str | None = None, mask_out: str | None = None, masks_out: str | None = None,
                 bbox_out: str | None = None, keypoints_out: str | None = None, bbox_params: Any = None,
                 keypoint_params: Any = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        self.height = check_size(height, "height", type(self).__name__)
        self.width = check_size(width, "width", type(self).__name__)

    def _check_fits(self, height: int, width: int) -> None:
        if self.height > height or self.width > width:
            raise ValueError(f"{type(self).__name__} of {self.height}x{self.width} does not fit the {height}x{width} "
                             f"input {self.inputs}; put a PadIfNeeded(min_height={self.height}, "
                             f"min_width={self.width}, ...) before it, or crop smaller.")

    def apply(self, image: np.ndarray, params: Window) -> np.ndarray:
        top, left = params
        return image[top:top + self.height, left:left + self.width].copy()

    def box_map(self, params: Window, height: int, width: int) -> np.ndarray:
        return translate_scale(tx=-params[1], ty=-params[0])


class CenterCrop(_Crop):
    """Cut the central ``height`` x ``width`` window (an odd margin leaves its extra pixel after the window).

    Args:
        height: The height of the crop.
        width: The width of the crop.
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``height`` or ``width`` is not a positive int, or (when running) exceeds the input's.
    """

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Window:
        self._check_fits(height, width)
        return (height - self.height) // 2, (width - self.width) // 2


class RandomCrop(_Crop):
    """Cut a ``height`` x ``width`` window at a uniformly random position (the same for the image and its masks).

    Random: in a Pipeline the position comes from the sample's generator (exact across resumes and worker threads,
    see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        height: The height of the crop.
        width: The width of the crop.
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``height`` or ``width`` is not a positive int, or (when running) exceeds the input's.
    """

    is_random = True

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Window:
        self._check_fits(height, width)
        rng = get_rng(state)
        return int(rng.integers(0, height - self.height + 1)), int(rng.integers(0, width - self.width + 1))


class Crop(MultiVariateOp):
    """Cut the fixed region ``[y_min, y_max) x [x_min, x_max)`` (rows, columns) out of the image and its masks.

    Args:
        x_min: The first column of the region.
        y_min: The first row of the region.
        x_max: One past the last column of the region.
        y_max: One past the last row of the region.
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If a coordinate is not a non-negative int or the region is empty; when running, if the region
            reaches past the input (as albumentations refuses it too).
    """

    def __init__(self, x_min: int = 0, y_min: int = 0, x_max: int = 1024, y_max: int = 1024,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        corners = {"x_min": x_min, "y_min": y_min, "x_max": x_max, "y_max": y_max}
        for name, value in corners.items():
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Crop {name} must be a non-negative int, got {value!r}.")
        if x_max <= x_min or y_max <= y_min:
            raise ValueError(f"Crop needs x_min < x_max and y_min < y_max, got x_min={x_min}, x_max={x_max}, "
                             f"y_min={y_min}, y_max={y_max}.")
        self.x_min, self.y_min, self.x_max, self.y_max = (int(v) for v in corners.values())

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> None:
        if self.x_max > width or self.y_max > height:
            raise ValueError(f"Crop region x [{self.x_min}, {self.x_max}), y [{self.y_min}, {self.y_max}) reaches past "
                             f"the {height}x{width} input {self.inputs}; lower x_max / y_max, or put a "
                             f"PadIfNeeded(min_height={self.y_max}, min_width={self.x_max}, ...) before it.")

    def apply(self, image: np.ndarray, params: None) -> np.ndarray:
        return image[self.y_min:self.y_max, self.x_min:self.x_max].copy()

    def box_map(self, params: None, height: int, width: int) -> np.ndarray:
        return translate_scale(tx=-self.x_min, ty=-self.y_min)
