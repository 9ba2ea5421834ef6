"""Rotate: turn an image and its masks by a random angle about the image centre (a random op)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.border import (
    BORDER_CONSTANT,
    BORDER_REFLECT_101,
    FillValue,
    border_index,
    check_border_mode,
    fill_array,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.randomness import get_rng

INTER_NEAREST, INTER_LINEAR = 0, 1  # cv2.INTER_* flags
# OpenCV resolves warp coordinates to 1/32 pixel (INTER_BITS = 5); doing the same keeps results close to its own.
_SUBPIXELS = 32

Coords = tuple[np.ndarray, np.ndarray]  # source (row, column) of every output pixel


def rotation_sources(height: int, width: int, angle: float) -> Coords:
    """Where each output pixel of a rotation by ``angle`` degrees (counter-clockwise, as OpenCV) samples the input.

    The centre is the middle of the pixel grid, ``((width - 1) / 2, (height - 1) / 2)``, so quarter turns of a
    square image move whole pixels.
    """
    theta = np.deg2rad(angle)
    cos, sin = np.cos(theta), np.sin(theta)
    rows, cols = np.mgrid[0:height, 0:width].astype(np.float64)
    dy, dx = rows - (height - 1) / 2.0, cols - (width - 1) / 2.0
    # The inverse of OpenCV's rotation matrix [[cos, sin], [-sin, cos]] (x right, y down) is its transpose.
    src_x = cos * dx - sin * dy + (width - 1) / 2.0
    src_y = sin * dx + cos * dy + (height - 1) / 2.0
    return np.round(src_y * _SUBPIXELS) / _SUBPIXELS, np.round(src_x * _SUBPIXELS) / _SUBPIXELS


def _gather(data: np.ndarray, rows: np.ndarray, cols: np.ndarray, border_mode: int, fill: np.ndarray) -> np.ndarray:
    r, inside_r = border_index(rows, data.shape[0], border_mode)
    c, inside_c = border_index(cols, data.shape[1], border_mode)
    values = data[r, c].astype(np.float64)
    if border_mode == BORDER_CONSTANT:
        inside = (inside_r & inside_c).reshape(rows.shape + (1,) * (data.ndim - 2))
        values = np.where(inside, values, fill)
    return values


def warp(data: np.ndarray, coords: Coords, interpolation: int, border_mode: int, value: FillValue) -> np.ndarray:
    """Sample ``data`` at ``coords`` (nearest or bilinear) with an OpenCV border; keeps the dtype (integers rounded
    and clipped to their range)."""
    src_y, src_x = coords
    fill = fill_array(value, np.float64)
    if interpolation == INTER_NEAREST:
        out = _gather(data, np.floor(src_y + 0.5).astype(np.int64), np.floor(src_x + 0.5).astype(np.int64),
                      border_mode, fill)
    else:
        y0, x0 = np.floor(src_y), np.floor(src_x)
        fy, fx = src_y - y0, src_x - x0
        y0i, x0i = y0.astype(np.int64), x0.astype(np.int64)
        expand = (1,) * (data.ndim - 2)  # weights broadcast over a channel axis
        out = np.zeros(src_y.shape + data.shape[2:], dtype=np.float64)
        for dy, wy in ((0, 1.0 - fy), (1, fy)):
            for dx, wx in ((0, 1.0 - fx), (1, fx)):
                weight = (wy * wx).reshape(src_y.shape + expand)
                out += weight * _gather(data, y0i + dy, x0i + dx, border_mode, fill)
    if np.issubdtype(data.dtype, np.integer):
        limits = np.iinfo(data.dtype)
        return np.clip(np.rint(out), limits.min, limits.max).astype(data.dtype)
    return out.astype(data.dtype)


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
        bounds = np.asarray([-limit, limit] if np.isscalar(limit) else limit, dtype=np.float64) \
            if _numeric(limit) else None
        if bounds is None or bounds.shape != (2,) or bounds[0] > bounds[1]:
            raise ValueError(f"Rotate limit must be a number a (angles in [-a, a]) or a pair (low, high) with low <= "
                             f"high, got {limit!r}.")
        self.limit = (float(bounds[0]), float(bounds[1]))
        if interpolation not in (INTER_NEAREST, INTER_LINEAR) or isinstance(interpolation, bool):
            raise ValueError(f"Rotate interpolation must be 0 (cv2.INTER_NEAREST) or 1 (cv2.INTER_LINEAR), got "
                             f"{interpolation!r}; fe_ray does not implement OpenCV's cubic, area or Lanczos modes.")
        self.interpolation = int(interpolation)
        self.border_mode = check_border_mode(border_mode, "Rotate")
        self.value, self.mask_value = value, mask_value

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords:
        angle = float(get_rng(state).uniform(*self.limit))
        return rotation_sources(height, width, angle)

    def apply(self, image: np.ndarray, params: Coords) -> np.ndarray:
        return warp(image, params, self.interpolation, self.border_mode, self.value)

    def apply_to_mask(self, mask: np.ndarray, params: Coords) -> np.ndarray:
        return warp(mask, params, INTER_NEAREST, self.border_mode, self.mask_value)


def _numeric(limit: Any) -> bool:
    values = [limit] if np.isscalar(limit) else list(limit) if isinstance(limit, (list, tuple)) else [None]
    return all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in values)
