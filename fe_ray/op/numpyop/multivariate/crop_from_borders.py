"""RandomCropFromBorders: cut a random amount, within set fractions, off each border of an image and its masks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.randomness import get_rng

Region = tuple[int, int, int, int]  # (top, bottom, left, right): rows [top, bottom), columns [left, right)


class RandomCropFromBorders(MultiVariateOp):
    """Cut a random number of rows and columns off each border of the image and its masks (no resize).

    With a ``height`` x ``width`` input, the first kept column ``left`` is drawn uniformly from ``[0,
    int(crop_left * width)]`` and the end ``right`` (exclusive) from ``[max(left + 1, int((1 - crop_right) *
    width)), width]``; rows likewise with ``crop_top`` and ``crop_bottom``. So at most ``int(crop_left * width)``
    columns go from the left and at least one column stays. Random: the draws come from the sample's generator (exact
    across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Differences from FastEstimator 1.7 (albumentations 1.4.1): albumentations clamps the region's end to ``size - 1``,
    so it always drops the last row and column (one past the stated limit when a fraction is 0); fe_ray keeps them
    when drawn. With ``crop_left = 1`` (or ``crop_top = 1``), where albumentations can fail, the first kept
    column (row) is at most the last one.

    Args:
        crop_left: The largest fraction of the width to cut from the left, in [0, 1].
        crop_right: The largest fraction of the width to cut from the right, in [0, 1]; ``crop_left + crop_right``
            must be at most 1.
        crop_top: The largest fraction of the height to cut from the top, in [0, 1].
        crop_bottom: The largest fraction of the height to cut from the bottom, in [0, 1]; ``crop_top +
            crop_bottom`` must be at most 1.
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (bounding boxes and keypoints are
            not supported).

    Raises:
        ValueError: If a fraction is not a number in [0, 1], or opposite fractions add up to more than 1.
    """

    is_random = True

    def __init__(self, crop_left: float = 0.1, crop_right: float = 0.1, crop_top: float = 0.1,
                 crop_bottom: float = 0.1, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, bbox_in: str | None = None, keypoints_in: str | None = None,
                 image_out: str | None = None, mask_out: str | None = None, masks_out: str | None = None,
                 bbox_out: str | None = None, keypoints_out: str | None = None, bbox_params: Any = None,
                 keypoint_params: Any = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        fractions = {"crop_left": crop_left, "crop_right": crop_right, "crop_top": crop_top,
                     "crop_bottom": crop_bottom}
        for name, value in fractions.items():
            if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool) or \
                    not 0 <= value <= 1:
                raise ValueError(f"RandomCropFromBorders {name} must be a fraction in [0, 1], got {value!r}.")
        for first, second in (("crop_left", "crop_right"), ("crop_top", "crop_bottom")):
            if fractions[first] + fractions[second] > 1:
                raise ValueError(f"RandomCropFromBorders {first} + {second} must be at most 1 (the whole side), got "
                                 f"{fractions[first]!r} + {fractions[second]!r}.")
        self.crop_left, self.crop_right = float(crop_left), float(crop_right)
        self.crop_top, self.crop_bottom = float(crop_top), float(crop_bottom)

    @staticmethod
    def _span(size: int, cut_start: float, cut_end: float, rng: np.random.Generator) -> tuple[int, int]:
        start = int(rng.integers(0, min(int(cut_start * size), size - 1) + 1))
        end = int(rng.integers(max(start + 1, int((1 - cut_end) * size)), size + 1))
        return start, end

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Region:
        rng = get_rng(state)
        left, right = self._span(width, self.crop_left, self.crop_right, rng)  # columns first, as albumentations
        top, bottom = self._span(height, self.crop_top, self.crop_bottom, rng)
        return top, bottom, left, right

    def apply(self, image: np.ndarray, params: Region) -> np.ndarray:
        top, bottom, left, right = params
        return image[top:bottom, left:right].copy()
