"""ShiftScaleRotate: a random similarity transform (rotation, zoom, then shift) of an image and its masks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.border import BORDER_REFLECT_101, FillValue, check_border_mode
from fe_ray.op.numpyop.multivariate.interpolation import (
    INTER_LINEAR,
    INTER_NEAREST,
    Coords,
    check_interpolation,
    sample,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_range
from fe_ray.op.numpyop.multivariate.resize import check_positive_factors
from fe_ray.op.numpyop.multivariate.rotate import rotation_sources
from fe_ray.op.numpyop.randomness import get_rng


class ShiftScaleRotate(MultiVariateOp):
    """Rotate, zoom and shift the image and masks by random amounts, keeping their size.

    Per sample it draws, in this order, an angle (degrees, counter-clockwise) from ``rotate_limit``, a zoom factor
    from ``1 + scale_limit``, and shifts ``dx`` and ``dy`` (fractions of the width and height) from ``shift_limit``.
    The map is OpenCV's ``getRotationMatrix2D(centre, angle, scale)`` with ``(dx * width, dy * height)`` added to its
    translation, applied as ``cv2.warpAffine`` does (1/32-pixel coordinates). Uncovered pixels are filled by
    ``border_mode``; masks are always sampled with nearest neighbour. Random: the draws come from the sample's
    generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Unlike albumentations 1.3, which FastEstimator wraps and which pivots about ``(width / 2, height / 2)``, fe_ray
    pivots about the centre of the pixel grid, ``((width - 1) / 2, (height - 1) / 2)``, as its ``Rotate`` does (so a
    half turn of any image moves whole pixels); results differ by that half-pixel offset.

    Args:
        shift_limit: The range of ``dx`` and ``dy``: a number ``a`` for ``[-a, a]``, or ``(low, high)``.
        scale_limit: The zoom range around 1: a number ``a`` for ``[1 - a, 1 + a]``, or ``(low, high)`` for
            ``[1 + low, 1 + high]``. The factors must be positive.
        rotate_limit: The angle range: a number ``a`` for ``[-a, a]``, or ``(low, high)``.
        interpolation: The image's interpolation, an OpenCV flag: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR``
            (the default). OpenCV's cubic, area and Lanczos modes are not available in fe_ray.
        border_mode: How to fill uncovered pixels, an OpenCV flag (0 ``BORDER_CONSTANT``, 1 ``BORDER_REPLICATE``, 2
            ``BORDER_REFLECT``, 3 ``BORDER_WRAP``, 4 ``BORDER_REFLECT_101``, the default).
        value: The image's fill for a constant border (None: 0); a number or one per channel.
        mask_value: The masks' fill for a constant border (None: 0).
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (bounding boxes and keypoints are
            not supported).

    Raises:
        ValueError: If a limit is not a number or an ordered pair (or gives a non-positive zoom), or
            ``interpolation`` / ``border_mode`` is not a supported flag.
    """

    is_random = True

    def __init__(self, shift_limit: float | Sequence[float] = 0.0625, scale_limit: float | Sequence[float] = 0.1,
                 rotate_limit: float | Sequence[float] = 45, interpolation: int = INTER_LINEAR,
                 border_mode: int = BORDER_REFLECT_101, value: FillValue = None, mask_value: FillValue = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        self.shift_limit = check_range(shift_limit, "shift_limit", "ShiftScaleRotate")
        self.scale_limit = check_positive_factors(scale_limit, "scale_limit", "ShiftScaleRotate")
        self.rotate_limit = check_range(rotate_limit, "rotate_limit", "ShiftScaleRotate")
        self.interpolation = check_interpolation(interpolation, "ShiftScaleRotate")
        self.border_mode = check_border_mode(border_mode, "ShiftScaleRotate")
        self.value, self.mask_value = value, mask_value

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords:
        rng = get_rng(state)
        angle = float(rng.uniform(*self.rotate_limit))
        scale = float(rng.uniform(*self.scale_limit))
        dx, dy = float(rng.uniform(*self.shift_limit)), float(rng.uniform(*self.shift_limit))
        return rotation_sources(height, width, angle, scale=scale, shift=(dx * width, dy * height))

    def apply(self, image: np.ndarray, params: Coords) -> np.ndarray:
        return sample(image, params, self.interpolation, self.border_mode, self.value)

    def apply_to_mask(self, mask: np.ndarray, params: Coords) -> np.ndarray:
        return sample(mask, params, INTER_NEAREST, self.border_mode, self.mask_value)
