"""OpenCV's interpolation flags, and the two of them fe_ray implements in numpy: nearest and bilinear.

Two samplers share them: :func:`warp` reads an image at arbitrary source coordinates (rotations, affine maps) with
an OpenCV border (:func:`sample` at OpenCV's precision of those coordinates), and :func:`resize_array` reproduces
``cv2.resize``'s pixel mapping. Both keep the input's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.border import BORDER_CONSTANT, FillValue, border_index, fill_array

INTER_NEAREST, INTER_LINEAR = 0, 1  # cv2.INTER_* flags; cv2.INTER_CUBIC (2), INTER_AREA (3), INTER_LANCZOS4 (4) aren't

Coords = tuple[np.ndarray, np.ndarray]  # source (row, column) of every output pixel


def check_interpolation(interpolation: Any, op: str) -> int:
    """Return ``interpolation`` as an int flag, or raise ValueError unless it is nearest or linear."""
    if isinstance(interpolation, bool) or interpolation not in (INTER_NEAREST, INTER_LINEAR):
        raise ValueError(f"{op} interpolation must be 0 (cv2.INTER_NEAREST) or 1 (cv2.INTER_LINEAR), got "
                         f"{interpolation!r}; fe_ray does not implement OpenCV's cubic, area or Lanczos modes.")
    return int(interpolation)


def cast_like(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Interpolated float ``values`` as ``dtype``: integers are rounded half up and clipped to their range.

    Half up, not half to even: OpenCV interpolates integer images in fixed point and rounds by adding half a unit
    before shifting, so an exact 2.5 becomes 3 there too.
    """
    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return np.clip(np.floor(values + 0.5), limits.min, limits.max).astype(dtype)
    return values.astype(dtype)


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
    return cast_like(out, data.dtype)


# OpenCV's warps resolve bilinear source coordinates to 1/32 pixel (INTER_BITS = 5), nearest ones to 1/1024
# (AB_BITS = 10, close enough to exact): doing the same keeps results close to its own.
SUBPIXELS = 32


def sample(data: np.ndarray, coords: Coords, interpolation: int, border_mode: int, value: FillValue) -> np.ndarray:
    """:func:`warp` as OpenCV's warps sample: bilinear reads 1/32-pixel coordinates, nearest rounds the exact ones."""
    if interpolation == INTER_LINEAR:
        coords = (np.round(coords[0] * SUBPIXELS) / SUBPIXELS, np.round(coords[1] * SUBPIXELS) / SUBPIXELS)
    return warp(data, coords, interpolation, border_mode, value)


def nearest_indices(size_in: int, size_out: int) -> np.ndarray:
    """The input index each of ``size_out`` outputs copies under ``cv2.resize(..., cv2.INTER_NEAREST)``.

    OpenCV's nearest resize is not centre-aligned: output ``i`` reads input ``floor(i * size_in / size_out)``. The
    factor is formed as OpenCV forms it (the inverse of the output-to-input ratio) so ties round the same way.
    """
    step = 1.0 / (size_out / size_in)
    return np.minimum(np.floor(np.arange(size_out) * step).astype(np.int64), size_in - 1)


def _linear_axis(data: np.ndarray, axis: int, size_out: int) -> np.ndarray:
    """Resample float ``data`` along ``axis`` to ``size_out`` samples as ``cv2.INTER_LINEAR`` does.

    Pixel centres are aligned (output ``i`` reads input ``(i + 0.5) * size_in / size_out - 0.5``), and a source
    position past the first or last centre takes that edge pixel.
    """
    size_in = data.shape[axis]
    src = (np.arange(size_out) + 0.5) * (1.0 / (size_out / size_in)) - 0.5
    low = np.floor(src)
    frac = src - low
    low_i = low.astype(np.int64)
    outside = (low_i < 0) | (low_i >= size_in - 1)
    frac[outside] = 0.0
    low_i = np.clip(low_i, 0, size_in - 1)
    high_i = np.minimum(low_i + 1, size_in - 1)
    shape = [1] * data.ndim
    shape[axis] = size_out
    weight = frac.reshape(shape)
    return np.take(data, low_i, axis=axis) * (1.0 - weight) + np.take(data, high_i, axis=axis) * weight


def resize_array(data: np.ndarray, height: int, width: int, interpolation: int) -> np.ndarray:
    """Resize the first two axes of ``data`` to ``height`` x ``width`` with ``cv2.resize``'s pixel mapping.

    Keeps the dtype and any channel axis (a trailing axis of 1 included, which cv2 itself would drop). Bilinear
    results are computed in float64 and rounded once, so for integer images they may differ from OpenCV's
    fixed-point arithmetic by one grey level.
    """
    size_h, size_w = data.shape[:2]
    if (size_h, size_w) == (height, width):
        return data.copy()
    if interpolation == INTER_NEAREST:
        return data[nearest_indices(size_h, height)][:, nearest_indices(size_w, width)]
    # Linear interpolation is separable: rows first, then columns, gives the bilinear result.
    out = _linear_axis(_linear_axis(data.astype(np.float64), 0, height), 1, width)
    return cast_like(out, data.dtype)
