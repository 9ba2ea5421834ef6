"""Rotate: turn an image and its masks by a random angle about the image centre (a random op)."""

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
    warp,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_range
from fe_ray.op.numpyop.randomness import get_rng

__all__ = ["Coords", "INTER_LINEAR", "INTER_NEAREST", "Rotate", "rotation_sources", "sample", "warp"]


def rotation_sources(height: int, width: int, angle: float, scale: float = 1.0,
                     shift: tuple[float, float] = (0.0, 0.0)) -> Coords:
    """Where each output pixel of a rotation by ``angle`` degrees (counter-clockwise, as OpenCV) samples the input.

    The centre is the middle of the pixel grid, ``((width - 1) / 2, (height - 1) / 2)``, so quarter turns of a
    square image move whole pixels. The map may also zoom by ``scale`` about that centre and then move the result by
    ``shift = (dx, dy)`` pixels (right, down): OpenCV's ``getRotationMatrix2D(centre, angle, scale)`` with ``(dx,
    dy)`` added to its translation.
    """
    theta = np.deg2rad(angle)
    cos, sin = np.cos(theta), np.sin(theta)
    rows, cols = np.mgrid[0:height, 0:width].astype(np.float64)
    dy = (rows - (height - 1) / 2.0 - shift[1]) / scale
    dx = (cols - (width - 1) / 2.0 - shift[0]) / scale
    # The inverse of OpenCV's rotation matrix [[cos, sin], [-sin, cos]] (x right, y down) is its transpose.
    src_x = cos * dx - sin * dy + (width - 1) / 2.0
    src_y = sin * dx + cos * dy + (height - 1) / 2.0
    return src_y, src_x  # exact: the sampler rounds them as OpenCV does for its interpolation


class Rotate(MultiVariateOp):
    """Rotate the image and masks by an angle drawn uniformly from ``limit`` (degrees, counter-clockwise).

    The output keeps the input's size; the corners the rotation uncovers are filled by ``border_mode``. Masks are
    always sampled with nearest-neighbour interpolation, so labels stay labels. Random: in a Pipeline the angle comes
    from the sample's generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        limit: The angle range: a number ``a`` for ``[-a, a]``, or ``(low, high)``.
        interpolation: The image's interpolation, an OpenCV flag: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR``
            (the default). OpenCV's cubic, area and Lanczos modes are not available.
        border_mode: How to fill uncovered pixels, an OpenCV flag (0 ``BORDER_CONSTANT``, 1 ``BORDER_REPLICATE``, 2
            ``BORDER_REFLECT``, 3 ``BORDER_WRAP``, 4 ``BORDER_REFLECT_101``, the default).
        value: The image's fill for a constant border (None: 0); a number or one per channel.
        mask_value: The masks' fill for a constant border (None: 0).
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (bounding boxes and keypoints are
            not supported).

    Raises:
        ValueError: If ``limit`` is not a number or an ordered pair, or ``interpolation`` / ``border_mode`` is not
            a supported flag.
    """

    is_random = True

    def __init__(self, limit: float | Sequence[float] = 90, interpolation: int = INTER_LINEAR,
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
        self.limit = check_range(limit, "limit", "Rotate")
        self.interpolation = check_interpolation(interpolation, "Rotate")
        self.border_mode = check_border_mode(border_mode, "Rotate")
        self.value, self.mask_value = value, mask_value

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords:
        angle = float(get_rng(state).uniform(*self.limit))
        return rotation_sources(height, width, angle)

    def apply(self, image: np.ndarray, params: Coords) -> np.ndarray:
        return sample(image, params, self.interpolation, self.border_mode, self.value)

    def apply_to_mask(self, mask: np.ndarray, params: Coords) -> np.ndarray:
        return sample(mask, params, INTER_NEAREST, self.border_mode, self.mask_value)

