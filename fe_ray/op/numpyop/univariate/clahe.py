"""CLAHE: contrast limited adaptive histogram equalization of uint8 images, as albumentations (1.3) applies it.

FastEstimator wraps albumentations' CLAHE, which runs OpenCV's ``cv2.createCLAHE(clip_limit, tile_grid_size)`` on
gray images, and on the L channel of OpenCV's 8-bit CIE L*a*b* for RGB images. The numpy code here repeats OpenCV's
CLAHE exactly: the image (mirrored at the bottom and right when the grid does not divide it) is cut into tiles;
each tile's 256-bin histogram is clipped at ``max(1, int(clip_limit * tile_area / 256))``, the clipped counts are
spread evenly (their remainder one by one at a regular stride), and the cumulative histogram times ``255 /
tile_area``, rounded, is the tile's lookup table; each pixel then blends the tables of its four nearest tile
centres bilinearly. Gray images therefore equal OpenCV's.

For RGB images fe_ray converts to L*a*b* and back with OpenCV's floating-point formulas (sRGB gamma, D65 white)
and stores L, a and b as OpenCV's 8-bit L*a*b* does (``L * 255 / 100``, ``a + 128``, ``b + 128``, rounded).
OpenCV's uint8 conversions use fixed-point tables instead, so on photographs 10-30% of an RGB result's pixels
differ from albumentations' by more than one level, by up to about 12 (gray images are exact).

The clip limit is drawn per sample from the sample's generator (exact across resumes and worker threads in a
Pipeline; the numbers differ from albumentations' Python ``random`` draws); several inputs of one op share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, is_number, to_range
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

_BINS = 256
# OpenCV's sRGB -> XYZ matrix and D65 white point; X and Z are divided by the white point for L*a*b*.
_RGB_TO_XYZ = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169],
                        [0.019334, 0.119193, 0.950227]])
_WHITE = np.array([0.950456, 1.0, 1.088754])
_XYZ_TO_RGB = np.array([[3.240479, -1.53715, -0.498535], [-0.969256, 1.875991, 0.041556],
                        [0.055648, -0.204043, 1.057311]])


def clahe_gray(image: np.ndarray, clip_limit: float, grid: tuple[int, int]) -> np.ndarray:
    """``cv2.createCLAHE(clip_limit, grid).apply(image)`` for a 2-D uint8 ``image``; ``grid`` is (columns, rows)."""
    tiles_x, tiles_y = grid
    height, width = image.shape
    source = image
    if height % tiles_y or width % tiles_x:
        # OpenCV pads both axes by "tiles - remainder" (a whole tile on an axis that divides evenly).
        source = np.pad(image, [(0, tiles_y - height % tiles_y), (0, tiles_x - width % tiles_x)], mode="reflect")
    tile_h, tile_w = source.shape[0] // tiles_y, source.shape[1] // tiles_x
    area = tile_h * tile_w
    tiles = source[:tile_h * tiles_y, :tile_w * tiles_x].reshape(tiles_y, tile_h, tiles_x, tile_w)
    tiles = tiles.transpose(0, 2, 1, 3).reshape(tiles_y * tiles_x, area).astype(np.int64)
    offsets = np.arange(tiles_y * tiles_x)[:, None] * _BINS
    hist = np.bincount((tiles + offsets).ravel(), minlength=tiles_y * tiles_x * _BINS).reshape(-1, _BINS)
    if clip_limit > 0:
        limit = max(int(clip_limit * area / _BINS), 1)
        clipped = np.maximum(hist - limit, 0).sum(axis=1)
        hist = np.minimum(hist, limit) + (clipped // _BINS)[:, None]
        for tile, residual in enumerate(clipped % _BINS):
            if residual:
                stride = max(_BINS // int(residual), 1)
                hist[tile, np.arange(0, _BINS, stride)[:residual]] += 1
    scale = np.float32((_BINS - 1) / area)
    luts = np.clip(np.rint(np.cumsum(hist, axis=1).astype(np.float32) * scale), 0, 255).reshape(tiles_y, tiles_x,
                                                                                                  _BINS)

    def axis_weights(size: int, tile: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        position = np.arange(size, dtype=np.float32) * np.float32(1 / tile) - np.float32(0.5)
        first = np.floor(position).astype(np.int64)
        weight = (position - first).astype(np.float32)
        return np.maximum(first, 0), np.minimum(first + 1, count - 1), weight

    y1, y2, wy = axis_weights(height, tile_h, tiles_y)
    x1, x2, wx = axis_weights(width, tile_w, tiles_x)
    values = image.astype(np.int64)
    one = np.float32(1)

    def blend(rows: np.ndarray) -> np.ndarray:
        left = luts[rows[:, None], x1[None, :], values]
        right = luts[rows[:, None], x2[None, :], values]
        return left * (one - wx)[None, :] + right * wx[None, :]

    result = blend(y1) * (one - wy)[:, None] + blend(y2) * wy[:, None]
    return np.clip(np.rint(result), 0, 255).astype(np.uint8)


def _srgb_to_linear(values: np.ndarray) -> np.ndarray:
    return np.where(values <= 0.04045, values / 12.92, ((values + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(values: np.ndarray) -> np.ndarray:
    return np.where(values <= 0.0031308, values * 12.92, 1.055 * np.power(np.maximum(values, 0), 1 / 2.4) - 0.055)


def rgb_to_lab8(image: np.ndarray) -> np.ndarray:
    """RGB uint8 -> OpenCV's 8-bit L*a*b* (``L * 255 / 100``, ``a + 128``, ``b + 128``), by the float formulas."""
    xyz = _srgb_to_linear(image / 255.0) @ (_RGB_TO_XYZ / _WHITE[:, None]).T
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    lightness = np.where(xyz[..., 1] > 0.008856, 116 * f[..., 1] - 16, 903.3 * xyz[..., 1])
    lab = np.stack([lightness * 255 / 100, 500 * (f[..., 0] - f[..., 1]) + 128, 200 * (f[..., 1] - f[..., 2]) + 128],
                   axis=-1)
    return np.clip(np.rint(lab), 0, 255).astype(np.uint8)


def lab8_to_rgb(lab: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit L*a*b* -> RGB uint8 by the float formulas (inverse of :func:`rgb_to_lab8`), rounded."""
    lightness = lab[..., 0] * (100 / 255)
    a, b = lab[..., 1] - 128.0, lab[..., 2] - 128.0
    low = lightness <= 7.9996248  # 903.3 * 0.008856: below it L* is linear in Y
    fy = np.where(low, 7.787 * (lightness / 903.3) + 16 / 116, (lightness + 16) / 116)
    y = np.where(low, lightness / 903.3, fy ** 3)
    fxz = np.stack([a / 500 + fy, fy - b / 200], axis=-1)
    xz = np.where(fxz <= 6 / 29, (fxz - 16 / 116) / 7.787, fxz ** 3)
    xyz = np.stack([xz[..., 0], y, xz[..., 1]], axis=-1)
    linear = np.clip(xyz @ (_XYZ_TO_RGB * _WHITE[None, :]).T, 0, 1)
    return np.clip(np.rint(_linear_to_srgb(linear) * 255), 0, 255).astype(np.uint8)


class CLAHE(UnivariateOp):
    """Equalize uint8 images locally: contrast limited adaptive histogram equalization with a random clip limit.

    Per sample ``clip_limit = uniform(clip_limit)``, applied on a grid of ``tile_grid_size`` tiles. Gray images
    (``(height, width)`` or one channel) are equalized directly (exactly OpenCV's result); RGB images on the
    lightness of L*a*b*, color kept (see the module doc for how that conversion may differ from OpenCV's). A
    constant image stays constant (at the level its tables give).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the equalized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        clip_limit: The clip limit's range: a number ``v`` means ``(1, v)``, or a pair; non-negative (0 means
            no clipping).
        tile_grid_size: The grid, ``(columns, rows)`` as OpenCV reads it, positive ints.

    Raises:
        ValueError: If ``clip_limit`` is not a non-negative number or pair, or ``tile_grid_size`` is not two
            positive ints; when running, if an image is neither gray nor RGB.
        TypeError: When running, if an image is not uint8 (float32 images are refused, as albumentations does).
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 clip_limit: float | Sequence[float] = 4.0, tile_grid_size: Sequence[int] = (8, 8)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.clip_limit = to_range(clip_limit, "clip_limit", "CLAHE", low=1)
        if not 0 <= self.clip_limit[0] <= self.clip_limit[1]:
            raise ValueError(f"CLAHE clip_limit must be a number or a pair (low, high) with 0 <= low <= high, got "
                             f"{clip_limit!r}.")
        if not (isinstance(tile_grid_size, Sequence) and len(tile_grid_size) == 2 and all(
                is_number(v) and float(v).is_integer() and v >= 1 for v in tile_grid_size)):
            raise ValueError(f"CLAHE tile_grid_size must be two positive ints (columns, rows), got "
                             f"{tile_grid_size!r}.")
        self.tile_grid_size = (int(tile_grid_size[0]), int(tile_grid_size[1]))

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return float(get_rng(state).uniform(*self.clip_limit))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        check_dtype(data, (np.uint8,), "CLAHE", self.inputs)
        if data.ndim == 2 or (data.ndim == 3 and data.shape[-1] == 1):
            return clahe_gray(data.reshape(data.shape[:2]), params, self.tile_grid_size).reshape(data.shape)
        if not (data.ndim == 3 and data.shape[-1] == 3):
            raise ValueError(f"CLAHE needs RGB images (height, width, 3) or gray ones (height, width[, 1]); "
                             f"{self.inputs} has shape {data.shape}.")
        lab = rgb_to_lab8(data)
        lab[..., 0] = clahe_gray(lab[..., 0], params, self.tile_grid_size)
        return lab8_to_rgb(lab)
