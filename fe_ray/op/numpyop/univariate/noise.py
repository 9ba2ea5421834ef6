"""ISONoise: camera sensor noise (Poisson noise on lightness, gaussian noise on hue), as albumentations (1.3) adds it.

FastEstimator wraps albumentations' ISONoise, which works in OpenCV's single-precision HLS space (hue in degrees,
lightness and saturation in [0, 1]). The numpy helpers here repeat OpenCV's float RGB <-> HLS formulas. Per sample
the op draws a color shift, an intensity and a noise seed from the sample's generator (exact across resumes and
worker threads in a Pipeline; the numbers differ from albumentations' Python ``random`` and ``RandomState``
draws); every input of a sample gets noise from the same seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_channels, check_dtype, to_range
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

# OpenCV's HLS -> RGB: for each sector of the hue circle, which of (p2, p1, falling, rising) becomes R, G and B.
_SECTOR_RGB = np.array([[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2]])


def rgb_to_hls(rgb: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(rgb, cv2.COLOR_RGB2HLS)`` of a float32 ``(..., 3)`` image in [0, 1]: hue in degrees."""
    rgb = rgb.astype(np.float32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    vmax, vmin = rgb.max(axis=-1), rgb.min(axis=-1)
    diff = vmax - vmin
    light = (vmax + vmin) * np.float32(0.5)
    colored = diff > np.finfo(np.float32).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        sat = np.where(light < 0.5, diff / (vmax + vmin), diff / (np.float32(2) - vmax - vmin))
        scale = np.float32(60) / diff
        hue = np.where(vmax == r, (g - b) * scale,
                       np.where(vmax == g, (b - r) * scale + np.float32(120), (r - g) * scale + np.float32(240)))
    hue = np.where(hue < 0, hue + np.float32(360), hue)
    zero = np.float32(0)
    return np.stack([np.where(colored, hue, zero), light, np.where(colored, sat, zero)], axis=-1).astype(np.float32)


def hls_to_rgb(hls: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(hls, cv2.COLOR_HLS2RGB)`` of a float32 ``(..., 3)`` HLS image (hue in degrees)."""
    hls = hls.astype(np.float32)
    hue, light, sat = hls[..., 0], hls[..., 1], hls[..., 2]
    p2 = np.where(light <= 0.5, light * (np.float32(1) + sat), light + sat - light * sat)
    p1 = np.float32(2) * light - p2
    hue = np.mod(hue * np.float32(6 / 360), np.float32(6))  # OpenCV wraps the hue into [0, 6) sectors
    sector = np.minimum(np.floor(hue).astype(np.int64), 5)
    frac = hue - sector
    table = np.stack([p2, p1, p1 + (p2 - p1) * (np.float32(1) - frac), p1 + (p2 - p1) * frac], axis=-1)
    rgb = np.take_along_axis(table, _SECTOR_RGB[sector], axis=-1)
    return np.where((sat == 0)[..., None], light[..., None], rgb).astype(np.float32)


class ISONoise(UnivariateOp):
    """Add camera sensor noise to uint8 RGB images: Poisson noise on lightness, gaussian noise on hue.

    Per sample ``color_shift = uniform(color_shift)`` and ``intensity = uniform(intensity)``. In HLS space, each
    pixel's hue gets gaussian noise of standard deviation ``color_shift * 360 * intensity`` degrees (wrapped into
    [0, 360]), and its lightness ``l`` becomes ``l + n / 255 * (1 - l)`` with ``n`` Poisson-distributed of mean
    ``std(lightness) * intensity * 255``. The result is scaled to [0, 255] and truncated, as in albumentations
    (which casts without clipping first; fe_ray clips into [0, 255] before the cast).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the noisy images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        color_shift: Range of the hue noise scale, as a fraction of the 360 degree hue circle.
        intensity: Range of the factor scaling both noises.

    Raises:
        ValueError: If a range is not a pair (or number) of non-negative numbers; when running, if an image is not
            ``(height, width, 3)`` (albumentations raises TypeError for that).
        TypeError: When running, if an image is not uint8 (float32 images are refused, as albumentations does).
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 color_shift: float | Sequence[float] = (0.01, 0.05),
                 intensity: float | Sequence[float] = (0.1, 0.5)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.color_shift = to_range(color_shift, "color_shift", "ISONoise", low=0.0)
        self.intensity = to_range(intensity, "intensity", "ISONoise", low=0.0)
        for name, limits in (("color_shift", self.color_shift), ("intensity", self.intensity)):
            if not 0 <= limits[0] <= limits[1]:
                raise ValueError(f"ISONoise {name} must be a range (low, high) with 0 <= low <= high, got {limits}.")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[float, float, int]:
        rng = get_rng(state)
        color_shift = float(rng.uniform(*self.color_shift))
        intensity = float(rng.uniform(*self.intensity))
        return color_shift, intensity, int(rng.integers(0, 2**63 - 1))

    def apply(self, data: np.ndarray, params: tuple[float, float, int]) -> np.ndarray:
        check_dtype(data, (np.uint8,), "ISONoise", self.inputs)
        check_channels(data, 3, "ISONoise", self.inputs)
        color_shift, intensity, seed = params
        noise_rng = np.random.default_rng(seed)  # the same seed for every input of the sample
        hls = rgb_to_hls(np.multiply(data, np.float32(1 / 255), dtype=np.float32))
        light_std = float(hls[..., 1].astype(np.float64).std())
        light_noise = noise_rng.poisson(light_std * intensity * 255, size=data.shape[:2])
        hue_noise = noise_rng.normal(0, color_shift * 360 * intensity, size=data.shape[:2])
        # float32 channels plus float64 noise, stored back in float32, as albumentations' in-place updates do.
        hue = (hls[..., 0] + hue_noise).astype(np.float32)
        hue = np.where(hue < 0, hue + np.float32(360), hue)
        hls[..., 0] = np.where(hue > 360, hue - np.float32(360), hue)
        light = hls[..., 1]
        hls[..., 1] = light + light_noise / 255 * (1.0 - light)
        return np.clip(hls_to_rgb(hls) * np.float32(255), 0, 255).astype(np.uint8)
