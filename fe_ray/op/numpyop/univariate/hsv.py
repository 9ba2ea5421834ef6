"""HueSaturationValue and ColorJitter: random color changes in OpenCV's HSV space, as albumentations (1.3) makes them.

FastEstimator wraps albumentations for both; albumentations converts with ``cv2.cvtColor``. The numpy helpers here
repeat OpenCV's conversions: for uint8 images the integer RGB -> HSV formula (hue in [0, 180), saturation and value
in [0, 255], OpenCV's rounding tables) and the single-precision HSV -> RGB formula rounded to the nearest level; for
float32 images the single-precision formulas (hue in degrees [0, 360), saturation and value in [0, 1]). OpenCV's
vectorised code may differ from them in the last bit of a float result (so, rarely, by one uint8 level).

Random parameters come from the sample's generator with albumentations' distributions (exact across resumes and
worker threads in a Pipeline; the numbers differ from albumentations' Python ``random`` draws); several inputs of one
op share them.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._drawing import add_weighted
from fe_ray.op.numpyop.univariate._image import Range, check_dtype, clip_to, is_number, symmetric_range
from fe_ray.op.numpyop.univariate.color import _GRAY_FIXED, _GRAY_WEIGHTS
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

_SHIFT = 12  # OpenCV's fixed-point shift of its uint8 RGB -> HSV tables
_LEVELS = np.arange(1, 256, dtype=np.float64)
# sdiv[v] = round((255 << 12) / v) and hdiv[d] = round((180 << 12) / (6 d)), entry 0 being 0, as OpenCV builds them.
_SDIV = np.concatenate([[0], np.rint((255 << _SHIFT) / _LEVELS)]).astype(np.int64)
_HDIV = np.concatenate([[0], np.rint((180 << _SHIFT) / (6.0 * _LEVELS))]).astype(np.int64)
# OpenCV's HSV -> RGB: for each sector of the hue circle, which of (v, p, q, t) becomes R, G and B.
_SECTOR_RGB = np.array([[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2]])


def rgb_to_hsv(image: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_RGB2HSV)`` of a ``(..., 3)`` uint8 or float32 image (same dtype out)."""
    if image.dtype == np.uint8:
        rgb = image.astype(np.int64)
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        value = rgb.max(axis=-1)
        diff = value - rgb.min(axis=-1)
        sat = (diff * _SDIV[value] + (1 << (_SHIFT - 1))) >> _SHIFT
        hue = np.where(value == r, g - b, np.where(value == g, b - r + 2 * diff, r - g + 4 * diff))
        hue = (hue * _HDIV[diff] + (1 << (_SHIFT - 1))) >> _SHIFT  # arithmetic shift: floors negative hues
        hue = np.where(hue < 0, hue + 180, hue)
        return np.stack([hue, sat, value], axis=-1).astype(np.uint8)
    rgb = image.astype(np.float32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    value = rgb.max(axis=-1)
    diff = value - rgb.min(axis=-1)
    eps = np.float32(np.finfo(np.float32).eps)
    sat = diff / (np.abs(value) + eps)
    scale = (60.0 / (diff + eps).astype(np.float64)).astype(np.float32)  # OpenCV divides in double here
    hue = np.where(value == r, (g - b) * scale,
                   np.where(value == g, (b - r) * scale + np.float32(120), (r - g) * scale + np.float32(240)))
    hue = np.where(hue < 0, hue + np.float32(360), hue)
    return np.stack([hue, sat, value], axis=-1).astype(np.float32)


def hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)`` of a ``(..., 3)`` uint8 or float32 HSV image (same dtype out)."""
    wide = hsv.dtype == np.uint8
    values = hsv.astype(np.float32)
    hue, sat, value = values[..., 0], values[..., 1], values[..., 2]
    if wide:
        sat, value = sat * np.float32(1 / 255), value * np.float32(1 / 255)
    hue = np.fmod(hue * np.float32(6 / (180 if wide else 360)), np.float32(6))
    sector = np.floor(hue).astype(np.int64)
    frac = hue - sector
    outside = (sector < 0) | (sector >= 6)  # OpenCV's guard against a hue out of range
    sector, frac = np.where(outside, 0, sector), np.where(outside, np.float32(0), frac)
    one = np.float32(1)
    table = np.stack([value, value * (one - sat), value * (one - sat * frac), value * (one - sat * (one - frac))],
                     axis=-1)
    rgb = np.take_along_axis(table, _SECTOR_RGB[sector], axis=-1)
    rgb = np.where((sat == 0)[..., None], value[..., None], rgb)
    if wide:
        return np.clip(np.rint(rgb * np.float32(255)), 0, 255).astype(np.uint8)
    return rgb.astype(np.float32)


def rgb_to_gray(image: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)``: fixed-point weights with rounding for uint8 (14 bits) and uint16
    (15 bits), float32 otherwise."""
    if image.dtype in (np.uint8, np.uint16):
        bits = 15 if image.dtype == np.uint16 else 14
        return ((image.astype(np.int64) @ _GRAY_FIXED[bits] + (1 << (bits - 1))) >> bits).astype(image.dtype)
    return image.astype(np.float32) @ _GRAY_WEIGHTS


def _is_gray(image: np.ndarray) -> bool:
    return image.ndim == 2 or (image.ndim == 3 and image.shape[-1] == 1)


def _check_image(image: np.ndarray, op: str, inputs: list[str], dtypes: tuple[type, ...] = (np.uint8, np.float32)
                 ) -> None:
    check_dtype(image, dtypes, op, inputs)
    if not (_is_gray(image) or (image.ndim == 3 and image.shape[-1] == 3)):
        raise ValueError(f"{op} needs RGB images (height, width, 3) or gray ones (height, width[, 1]); {inputs} has "
                         f"shape {image.shape}.")


def _apply_hue(hsv: np.ndarray, hue: np.ndarray) -> np.ndarray:
    hsv = hsv.copy()
    hsv[..., 0] = hue
    return hsv


class HueSaturationValue(UnivariateOp):
    """Shift the hue, saturation and value of images by random amounts, in OpenCV's HSV space.

    Per sample each shift is ``uniform(limit)``. For uint8 images the units are OpenCV's: hue in [0, 180) (so 20 is
    40 degrees) shifted circularly, saturation and value in [0, 255] clipped; shifted levels are truncated to
    integers. For float32 images hue is in degrees [0, 360) and saturation and value in [0, 1], so the default
    limits (meant for uint8) push saturation to 0 or 1 (as in albumentations). Gray images (``(height, width)`` or
    one channel) only get the value shift (with a warning when a hue or saturation shift is drawn).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        hue_shift_limit: Range of the hue shift: a number ``v`` means ``(-v, v)``, or a pair.
        sat_shift_limit: Range of the saturation shift: a number ``v`` means ``(-v, v)``, or a pair.
        val_shift_limit: Range of the value shift: a number ``v`` means ``(-v, v)``, or a pair.

    Raises:
        ValueError: If a limit is not a number or a pair; when running, if an image is neither RGB nor gray.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 hue_shift_limit: float | Sequence[float] = 20, sat_shift_limit: float | Sequence[float] = 30,
                 val_shift_limit: float | Sequence[float] = 20) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.hue_shift_limit = symmetric_range(hue_shift_limit, "hue_shift_limit", "HueSaturationValue")
        self.sat_shift_limit = symmetric_range(sat_shift_limit, "sat_shift_limit", "HueSaturationValue")
        self.val_shift_limit = symmetric_range(val_shift_limit, "val_shift_limit", "HueSaturationValue")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[float, float, float]:
        rng = get_rng(state)
        return (float(rng.uniform(*self.hue_shift_limit)), float(rng.uniform(*self.sat_shift_limit)),
                float(rng.uniform(*self.val_shift_limit)))

    def apply(self, data: np.ndarray, params: tuple[float, float, float]) -> np.ndarray:
        _check_image(data, "HueSaturationValue", self.inputs)
        hue_shift, sat_shift, val_shift = params
        if hue_shift == 0 and sat_shift == 0 and val_shift == 0:
            return data
        if _is_gray(data):
            if hue_shift != 0 or sat_shift != 0:
                warnings.warn(f"HueSaturationValue: {self.inputs} is gray (shape {data.shape}), so only the value "
                              "shift applies; give RGB images or set hue_shift_limit and sat_shift_limit to 0.",
                              stacklevel=2)
            # A gray pixel is its own HSV value (saturation 0), and RGB -> gray of equal channels gives it back.
            return self._shift(data, val_shift)
        hsv = rgb_to_hsv(data)
        if hue_shift != 0 and data.dtype == np.uint8:
            levels = np.arange(256, dtype=np.int16)
            hsv[..., 0] = np.mod(levels + hue_shift, 180).astype(np.uint8)[hsv[..., 0]]
        elif hue_shift != 0:
            hsv[..., 0] = np.mod(hsv[..., 0] + np.float32(hue_shift), np.float32(360))
        hsv[..., 1] = self._shift(hsv[..., 1], sat_shift)
        hsv[..., 2] = self._shift(hsv[..., 2], val_shift)
        return hsv_to_rgb(hsv)

    @staticmethod
    def _shift(channel: np.ndarray, shift: float) -> np.ndarray:
        """Add ``shift`` and clip: a truncated 256-entry table for uint8, float32 arithmetic clipped to [0, 1]."""
        if shift == 0:
            return channel
        if channel.dtype == np.uint8:
            return np.clip(np.arange(256, dtype=np.int16) + shift, 0, 255).astype(np.uint8)[channel]
        return np.clip(channel + np.float32(shift), 0, 1).astype(channel.dtype)


def _jitter_range(value: float | Sequence[float], name: str, centre: float, bounds: Range) -> Range:
    """ColorJitter's factor range: a number ``v`` means ``(centre - v, centre + v)`` (floored at 0 for factors)."""
    if is_number(value):
        if value < 0:  # type: ignore[operator]
            raise ValueError(f"ColorJitter {name} as a single number must be non-negative, got {value!r}.")
        low, high = centre - float(value), centre + float(value)  # type: ignore[arg-type]
        low = max(low, 0.0) if centre == 1 else low
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2 and all(
            isinstance(item, numbers.Real) and not isinstance(item, bool) for item in value):
        low, high = float(value[0]), float(value[1])
    else:
        raise ValueError(f"ColorJitter {name} must be a number or a pair (min, max), got {value!r}.")
    if not bounds[0] <= low <= high <= bounds[1]:
        raise ValueError(f"ColorJitter {name} must give a range (min, max) with {bounds[0]} <= min <= max <= "
                         f"{bounds[1]}, got {value!r}.")
    return low, high


def adjust_brightness(image: np.ndarray, factor: float) -> np.ndarray:
    """Scale values by ``factor`` (torchvision's brightness), clipped; uint8 by a truncated table."""
    if factor == 0:
        return np.zeros_like(image)
    if factor == 1:
        return image
    if image.dtype == np.uint8:
        return np.clip(np.arange(256) * factor, 0, 255).astype(np.uint8)[image]
    # albumentations multiplies by a Python float: float32 stays float32, uint16 goes to float64 (then truncated).
    return clip_to(image * (np.float32(factor) if image.dtype == np.float32 else factor), image.dtype)


def adjust_contrast(image: np.ndarray, factor: float) -> np.ndarray:
    """Blend with the mean gray level by ``factor`` (torchvision's contrast), clipped; uint8 by a truncated table."""
    if factor == 1:
        return image
    mean = float((image if _is_gray(image) else rgb_to_gray(image)).mean())
    if factor == 0:
        return np.full_like(image, mean if image.dtype == np.float32 else int(mean + 0.5))
    if image.dtype == np.uint8:
        return np.clip(np.arange(256) * factor + mean * (1 - factor), 0, 255).astype(np.uint8)[image]
    return clip_to(image.astype(np.float32) * np.float32(factor) + np.float32(mean * (1 - factor)), image.dtype)


def adjust_saturation(image: np.ndarray, factor: float) -> np.ndarray:
    """Blend with the image's gray by ``factor`` (torchvision's saturation); gray images pass unchanged."""
    if factor == 1 or _is_gray(image):
        return image
    gray = np.repeat(rgb_to_gray(image)[..., None], 3, axis=-1)
    if factor == 0:
        return gray
    if image.dtype in (np.uint8, np.uint16):
        return add_weighted(image, factor, gray, 1 - factor)
    return clip_to(image.astype(np.float64) * factor + gray.astype(np.float64) * (1 - factor), image.dtype)


def adjust_hue(image: np.ndarray, factor: float) -> np.ndarray:
    """Turn the hue by ``factor`` of a full circle (torchvision's hue) in OpenCV's HSV; gray images pass."""
    if factor == 0 or _is_gray(image):
        return image
    if image.dtype not in (np.uint8, np.float32):
        # OpenCV (under FastEstimator) has no RGB -> HSV conversion of other dtypes, so it fails here too.
        raise TypeError(f"ColorJitter turns the hue of uint8 or float32 RGB images only, got dtype {image.dtype}; "
                        "pass hue=0 to jitter the other properties of such images, or convert them first.")
    hsv = rgb_to_hsv(image)
    if image.dtype == np.uint8:
        table = np.mod(np.arange(256, dtype=np.int16) + 180 * factor, 180).astype(np.uint8)
        return hsv_to_rgb(_apply_hue(hsv, table[hsv[..., 0]]))
    return hsv_to_rgb(_apply_hue(hsv, np.mod(hsv[..., 0] + np.float32(factor * 360), np.float32(360))))


_ADJUSTMENTS = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)


class ColorJitter(UnivariateOp):
    """Change brightness, contrast, saturation and hue by random factors, in a random order (torchvision's way).

    Per sample: brightness, contrast and saturation factors ``uniform(range)`` and a hue factor ``uniform(hue)``
    (a fraction of the hue circle), then the four adjustments in a random order. Brightness scales values;
    contrast blends with the mean gray level; saturation blends with the gray image; hue turns the OpenCV hue.
    uint8 results are truncated (brightness, contrast, hue tables) or rounded (saturation); uint16 ones likewise,
    clipped to [0, 65535]; float32 results are clipped to [0, 1]. Gray images get brightness and contrast only. As
    under FastEstimator (whose OpenCV has no uint16 HSV), the hue of uint16 RGB images can't be turned: give them
    ``hue=0``.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        brightness: A number ``v >= 0`` for factors in ``[max(0, 1 - v), 1 + v]``, or a pair ``(min, max)``, min >= 0.
        contrast: Like ``brightness``, for the contrast factor.
        saturation: Like ``brightness``, for the saturation factor.
        hue: A number ``v`` in [0, 0.5] for ``[-v, v]``, or a pair with ``-0.5 <= min <= max <= 0.5``. (albumentations
            also accepts a single number above 0.5; fe_ray refuses it, as FastEstimator's documentation asks.)

    Raises:
        ValueError: If an argument is not a number or pair in its bounds; when running, if an image is neither RGB
            nor gray.
        TypeError: When running, if an image is not uint8, uint16 or float32, or a uint16 RGB image gets a hue
            factor other than 0.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 brightness: float | Sequence[float] = 0.2, contrast: float | Sequence[float] = 0.2,
                 saturation: float | Sequence[float] = 0.2, hue: float | Sequence[float] = 0.2) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.brightness = _jitter_range(brightness, "brightness", 1.0, (0.0, float("inf")))
        self.contrast = _jitter_range(contrast, "contrast", 1.0, (0.0, float("inf")))
        self.saturation = _jitter_range(saturation, "saturation", 1.0, (0.0, float("inf")))
        self.hue = _jitter_range(hue, "hue", 0.0, (-0.5, 0.5))

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[tuple[float, ...], np.ndarray]:
        rng = get_rng(state)
        factors = tuple(float(rng.uniform(*limits)) for limits in
                        (self.brightness, self.contrast, self.saturation, self.hue))
        return factors, rng.permutation(len(_ADJUSTMENTS))

    def apply(self, data: np.ndarray, params: tuple[tuple[float, ...], np.ndarray]) -> np.ndarray:
        _check_image(data, "ColorJitter", self.inputs, (np.uint8, np.uint16, np.float32))
        factors, order = params
        for index in order:
            data = _ADJUSTMENTS[index](data, factors[index])
        return data
