"""Weather effects of albumentations' kind: RandomFog, RandomRain, RandomShadow, RandomSnow and RandomSunFlare.

FastEstimator (1.7) wraps albumentations (1.3) for these, which draws the effects with OpenCV on uint8 images (a
float32 image in [0, 1] is scaled to uint8 by truncation first and divided by 255 afterwards). The numpy code here
repeats that arithmetic; the drawing primitives are simplified stand-ins for OpenCV's (see
:mod:`fe_ray.op.numpyop.univariate._drawing`), so edge pixels of drops, circles and polygons may differ from
FastEstimator's. The parameters are drawn per sample from the sample's generator with albumentations'
distributions (the numbers differ from albumentations', which draws from Python's global ``random``): in a Pipeline
the draws are exact across resumes and worker threads, and several inputs of one op get the same effect.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._drawing import (
    add_weighted,
    blend_disk,
    disk,
    hls_to_rgb,
    line_pixels,
    polygon_mask,
    rgb_to_hls,
)
from fe_ray.op.numpyop.univariate._image import check_channels, check_dtype, is_number
from fe_ray.op.numpyop.univariate.blur import box_blur
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

Roi = tuple[float, float, float, float]


def _to_uint8(image: np.ndarray, op: str, inputs: list[str], rgb: bool) -> np.ndarray:
    """The uint8 image albumentations draws on (float32 scaled by 255, truncated), after the dtype/shape checks."""
    check_dtype(image, (np.uint8, np.float32), op, inputs)
    if rgb:
        check_channels(image, 3, op, inputs)
    elif image.ndim not in (2, 3):
        raise ValueError(f"{op} needs (height, width[, channels]) images; {inputs} has shape {image.shape}.")
    if image.dtype == np.uint8:
        return image.copy()
    # Clipped first so that values outside [0, 1] saturate instead of wrapping around in the cast.
    return np.clip(image * np.float32(255), 0, 255).astype(np.uint8)


def _restore(result: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    return result if dtype == np.uint8 else result.astype(np.float32) / np.float32(255)


def _ordered(low: Any, high: Any, bounds: tuple[float, float], names: str, op: str, strict: bool = False) -> None:
    """Raise ValueError unless ``bounds[0] <= low <= high <= bounds[1]`` (``low < high`` when ``strict``)."""
    fine = is_number(low) and is_number(high) and bounds[0] <= low <= high <= bounds[1] and (low < high or not strict)
    if not fine:
        sign = "<" if strict else "<="
        raise ValueError(f"{op} needs {bounds[0]} <= {names.replace(', ', f' {sign} ')} <= {bounds[1]}, got "
                         f"({low!r}, {high!r}).")


def _roi(roi: Any, name: str, op: str, strict: bool) -> Roi:
    """A validated ``(x_min, y_min, x_max, y_max)`` region in [0, 1] (``min < max`` when ``strict``)."""
    if not (isinstance(roi, Sequence) and len(roi) == 4 and all(is_number(v) for v in roi)):
        raise ValueError(f"{op} {name} must be (x_min, y_min, x_max, y_max) in [0, 1], got {roi!r}.")
    _ordered(roi[0], roi[2], (0, 1), f"{name} x_min, x_max", op, strict)
    _ordered(roi[1], roi[3], (0, 1), f"{name} y_min, y_max", op, strict)
    return float(roi[0]), float(roi[1]), float(roi[2]), float(roi[3])


def _colour(colour: Any, name: str, op: str) -> tuple[int, int, int]:
    if not (isinstance(colour, Sequence) and len(colour) == 3
            and all(is_number(c) and float(c).is_integer() and 0 <= c <= 255 for c in colour)):
        raise ValueError(f"{op} {name} must be three ints (R, G, B) in [0, 255], got {colour!r}.")
    return int(colour[0]), int(colour[1]), int(colour[2])


def _int_at_least(value: Any, low: int, name: str, op: str) -> int:
    if not (is_number(value) and float(value).is_integer() and value >= low):
        raise ValueError(f"{op} {name} must be an int >= {low}, got {value!r}.")
    return int(value)


class RandomFog(UnivariateOp):
    """Add fog: translucent white circles scattered around the centre, then a box blur.

    Per sample ``fog_coef = uniform(fog_coef_lower, fog_coef_upper)``. Circle positions fill rings growing from the
    image centre (albumentations' layout: ``hw // 10 * ring`` circles per ring with ``hw = (width // 3) * fog_coef``);
    each circle of radius ``max(hw, 10) // 2`` is blended in with opacity ``alpha_coef * fog_coef``, and the image is
    then blurred with a ``max(hw, 10) // 10`` box. Images may have any number of channels (or none).

    Differs from albumentations where it would loop forever (on very narrow or flat images, whose rings stop
    growing along one side): there the ring grows by one pixel on that side.

    Args:
        inputs: Key(s) of the images (uint8, or float32 in [0, 1]).
        outputs: Key(s) to write the foggy images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        fog_coef_lower: Lower limit of the fog intensity, in [0, 1].
        fog_coef_upper: Upper limit of the fog intensity, in [``fog_coef_lower``, 1].
        alpha_coef: Opacity of the fog circles, in [0, 1].

    Raises:
        ValueError: If a coefficient is out of its range; when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 fog_coef_lower: float = 0.3, fog_coef_upper: float = 1.0, alpha_coef: float = 0.08) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        _ordered(fog_coef_lower, fog_coef_upper, (0, 1), "fog_coef_lower, fog_coef_upper", "RandomFog")
        if not (is_number(alpha_coef) and 0 <= alpha_coef <= 1):
            raise ValueError(f"RandomFog alpha_coef must be in [0, 1], got {alpha_coef!r}.")
        self.fog_coef_lower, self.fog_coef_upper = float(fog_coef_lower), float(fog_coef_upper)
        self.alpha_coef = float(alpha_coef)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[float, np.ndarray]:
        rng = get_rng(state)
        fog_coef = float(rng.uniform(self.fog_coef_lower, self.fog_coef_upper))
        height, width = data.shape[:2]
        hw = max(1, int(width // 3 * fog_coef))
        mid_x, mid_y = width // 2 - 2 * hw, height // 2 - hw
        step_x, step_y = 3 * hw * width // (height + width), 3 * hw * height // (height + width)
        # albumentations never ends when a side's step is 0 while that side is still inside; grow it by 1 there.
        step_x = step_x or int(mid_x > -hw)
        step_y = step_y or int(mid_y > -hw)
        points, ring = [], 1
        while mid_x > -hw or mid_y > -hw:
            count = hw // 10 * ring
            xs = rng.integers(mid_x, width - mid_x - hw + 1, count)
            ys = rng.integers(mid_y, height - mid_y - hw + 1, count)
            points.append(np.stack([xs, ys], axis=1))
            mid_x, mid_y, ring = mid_x - step_x, mid_y - step_y, ring + 1
        return fog_coef, np.concatenate(points) if points else np.zeros((0, 2), dtype=np.int64)

    def apply(self, data: np.ndarray, params: tuple[float, np.ndarray]) -> np.ndarray:
        fog_coef, haze = params
        image = _to_uint8(data, "RandomFog", self.inputs, rgb=False)
        hw = max(int(image.shape[1] // 3 * fog_coef), 10)
        alpha = self.alpha_coef * fog_coef
        for x, y in haze:
            blend_disk(image, (int(x) + hw // 2, int(y) + hw // 2), hw // 2, 255, alpha)
        return _restore(box_blur(image, hw // 10), data.dtype)


class RandomRain(UnivariateOp):
    """Add rain: slanted drop lines of ``drop_color``, then a box blur and a darkening by ``brightness_coefficient``.

    Per sample the slant is ``int(uniform(slant_lower, slant_upper))`` and ``height * width // 600`` drops start at
    random points (``rain_type`` "drizzle", "heavy" or "torrential" sets 1/770, 1/600 or 1/500 drops per pixel and
    drop lengths 10, 30 or 60 instead). Each drop runs from ``(x, y)`` to ``(x + slant, y + drop_length)``; the image
    is then blurred with a ``blur_value`` box and its HSV value scaled by ``brightness_coefficient``.

    Differs from albumentations in the darkening: the RGB values are scaled (and truncated) directly instead of going
    through OpenCV's 8-bit HSV, whose quantised hue and saturation may move the non-maximal channels by a few levels.

    Args:
        inputs: Key(s) of the RGB images (uint8, or float32 in [0, 1]).
        outputs: Key(s) to write the rainy images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        slant_lower: Lower limit of the slant in pixels, in [-20, 20].
        slant_upper: Upper limit of the slant, in [``slant_lower``, 20].
        drop_length: Length of the drops in pixels, in [0, 100].
        drop_width: Width of the drops in pixels, in [1, 5].
        drop_color: Colour of the drops (R, G, B).
        blur_value: Size of the box blur (1 for none).
        brightness_coefficient: Factor of the brightness, in [0, 1].
        rain_type: None, "drizzle", "heavy" or "torrential".

    Raises:
        ValueError: If an argument is out of its range; when running, if an image is not RGB, or too small for its
            drops (narrower than the slant or shorter than the drops).
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    is_random = True
    _RAIN_TYPES = {"drizzle": (770, 10), "heavy": (600, 30), "torrential": (500, 60)}

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 slant_lower: int = -10, slant_upper: int = 10, drop_length: int = 20, drop_width: int = 1,
                 drop_color: tuple[int, int, int] = (200, 200, 200), blur_value: int = 7,
                 brightness_coefficient: float = 0.7, rain_type: str | None = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        op = "RandomRain"
        if rain_type is not None and rain_type not in self._RAIN_TYPES:
            raise ValueError(f"{op} rain_type must be None, 'drizzle', 'heavy' or 'torrential', got {rain_type!r}.")
        _ordered(slant_lower, slant_upper, (-20, 20), "slant_lower, slant_upper", op)
        drop_width = _int_at_least(drop_width, 1, "drop_width", op)
        if drop_width > 5:
            raise ValueError(f"{op} drop_width must be an int in [1, 5], got {drop_width!r}.")
        if not (is_number(drop_length) and float(drop_length).is_integer() and 0 <= drop_length <= 100):
            raise ValueError(f"{op} drop_length must be an int in [0, 100], got {drop_length!r}.")
        if not (is_number(brightness_coefficient) and 0 <= brightness_coefficient <= 1):
            raise ValueError(f"{op} brightness_coefficient must be in [0, 1], got {brightness_coefficient!r}.")
        self.slant_lower, self.slant_upper = float(slant_lower), float(slant_upper)
        self.drop_length, self.drop_width = int(drop_length), drop_width
        self.drop_color = _colour(drop_color, "drop_color", op)
        self.blur_value = _int_at_least(blur_value, 1, "blur_value", op)
        self.brightness_coefficient = float(brightness_coefficient)
        self.rain_type = rain_type

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[int, int, np.ndarray]:
        rng = get_rng(state)
        slant = int(rng.uniform(self.slant_lower, self.slant_upper))
        height, width = data.shape[:2]
        per_drop, drop_length = self._RAIN_TYPES.get(self.rain_type or "", (600, self.drop_length))
        num_drops = height * width // per_drop
        x_low, x_high = (slant, width) if slant < 0 else (0, width - slant)
        if num_drops and (x_high < x_low or height < drop_length):
            raise ValueError(f"RandomRain needs images at least {abs(slant)} wide and {drop_length} high for drops "
                             f"of slant {slant} and length {drop_length}; {self.inputs} has shape {data.shape}. "
                             "Lower drop_length or the slant limits, or use larger images.")
        xs = rng.integers(x_low, x_high + 1, num_drops)
        ys = rng.integers(0, height - drop_length + 1, num_drops)
        return slant, drop_length, np.stack([xs, ys], axis=1)

    def apply(self, data: np.ndarray, params: tuple[int, int, np.ndarray]) -> np.ndarray:
        slant, drop_length, drops = params
        image = _to_uint8(data, "RandomRain", self.inputs, rgb=True)
        for x, y in drops:
            rows, cols = line_pixels(image.shape, (int(x), int(y)), (int(x) + slant, int(y) + drop_length),
                                     self.drop_width)
            image[rows, cols] = self.drop_color
        image = box_blur(image, self.blur_value)
        image = (image * np.float32(self.brightness_coefficient)).astype(np.uint8)
        return _restore(image, data.dtype)


class RandomShadow(UnivariateOp):
    """Add shadows: random polygons within ``shadow_roi`` whose HLS lightness is halved.

    Per sample ``randint(num_shadows_lower, num_shadows_upper)`` polygons (both ends included) each get
    ``shadow_dimension`` vertices drawn uniformly among the pixel positions of the region. The polygons are filled by
    the even-odd rule and outlined (a numpy rasteriser in place of ``cv2.fillPoly``, so edge pixels may differ).
    Unlike FastEstimator's, whose shared random state made it warn against multi-threaded Pipelines, this op draws
    from the sample's generator and works with any ``num_process``.

    Args:
        inputs: Key(s) of the RGB images (uint8, or float32 in [0, 1]).
        outputs: Key(s) to write the shadowed images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        shadow_roi: Region of the shadows, (x_min, y_min, x_max, y_max) as fractions in [0, 1].
        num_shadows_lower: Lower limit of the number of shadows, at least 0.
        num_shadows_upper: Upper limit of the number of shadows, at least ``num_shadows_lower``.
        shadow_dimension: Number of vertices of each shadow polygon, at least 3.

    Raises:
        ValueError: If an argument is out of its range; when running, if an image is not RGB.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 shadow_roi: tuple[float, float, float, float] = (0.0, 0.5, 1.0, 1.0), num_shadows_lower: int = 1,
                 num_shadows_upper: int = 2, shadow_dimension: int = 5) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        op = "RandomShadow"
        self.shadow_roi = _roi(shadow_roi, "shadow_roi", op, strict=False)
        _ordered(num_shadows_lower, num_shadows_upper, (0, math.inf), "num_shadows_lower, num_shadows_upper", op)
        self.num_shadows_lower = _int_at_least(num_shadows_lower, 0, "num_shadows_lower", op)
        self.num_shadows_upper = _int_at_least(num_shadows_upper, 0, "num_shadows_upper", op)
        self.shadow_dimension = _int_at_least(shadow_dimension, 3, "shadow_dimension", op)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> list[np.ndarray]:
        rng = get_rng(state)
        height, width = data.shape[:2]
        x_min, y_min, x_max, y_max = self.shadow_roi
        x_min, x_max, y_min, y_max = int(x_min * width), int(x_max * width), int(y_min * height), int(y_max * height)
        count = int(rng.integers(self.num_shadows_lower, self.num_shadows_upper + 1))
        return [np.stack([rng.integers(x_min, x_max + 1, self.shadow_dimension),
                          rng.integers(y_min, y_max + 1, self.shadow_dimension)], axis=1) for _ in range(count)]

    def apply(self, data: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
        image = _to_uint8(data, "RandomShadow", self.inputs, rgb=True)
        shadow = np.zeros(image.shape[:2], dtype=bool)
        for vertices in params:
            shadow |= polygon_mask(image.shape, vertices)
        hls = rgb_to_hls(image)
        hls[..., 1][shadow] = (hls[..., 1][shadow] * 0.5).astype(np.uint8)
        return _restore(hls_to_rgb(hls), data.dtype)


class RandomSnow(UnivariateOp):
    """Add snow: multiply the HLS lightness of the pixels darker than a random threshold by ``brightness_coeff``.

    Per sample ``snow_point = uniform(snow_point_lower, snow_point_upper)``; lightness values (in [0, 255]) below
    ``snow_point * 127.5 + 85`` are multiplied, clipped to 255 and truncated, with OpenCV's 8-bit HLS conversions.

    Args:
        inputs: Key(s) of the RGB images (uint8, or float32 in [0, 1]).
        outputs: Key(s) to write the snowy images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        snow_point_lower: Lower limit of the amount of snow, in [0, 1].
        snow_point_upper: Upper limit of the amount of snow, in [``snow_point_lower``, 1].
        brightness_coeff: Factor of the lightness of the snowy pixels, at least 0.

    Raises:
        ValueError: If an argument is out of its range; when running, if an image is not RGB.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 snow_point_lower: float = 0.1, snow_point_upper: float = 0.3, brightness_coeff: float = 2.5) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        _ordered(snow_point_lower, snow_point_upper, (0, 1), "snow_point_lower, snow_point_upper", "RandomSnow")
        if not (is_number(brightness_coeff) and brightness_coeff >= 0):
            raise ValueError(f"RandomSnow brightness_coeff must be a number >= 0, got {brightness_coeff!r}.")
        self.snow_point_lower, self.snow_point_upper = float(snow_point_lower), float(snow_point_upper)
        self.brightness_coeff = float(brightness_coeff)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return float(get_rng(state).uniform(self.snow_point_lower, self.snow_point_upper))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        image = _to_uint8(data, "RandomSnow", self.inputs, rgb=True)
        hls = rgb_to_hls(image)
        lightness = hls[..., 1].astype(np.float32)
        snowy = lightness < params * 127.5 + 85
        lightness[snowy] *= np.float32(self.brightness_coeff)
        hls[..., 1] = np.clip(lightness, 0, 255).astype(np.uint8)
        return _restore(hls_to_rgb(hls), data.dtype)


class RandomSunFlare(UnivariateOp):
    """Add a sun flare: faint coloured circles along a line through the flare centre, and the flare itself.

    Per sample the centre is drawn in ``flare_roi`` and a direction ``2 * pi * uniform(angle_lower, angle_upper)``;
    ``randint(num_flare_circles_lower, num_flare_circles_upper)`` circles (radius ``randint(1, max(height // 100 - 2,
    2)) ** 3``, opacity in [0.05, 0.2], colour within 50 below ``src_color``) sit at points 10 pixels apart on the
    line and are blended in one after another onto a shared overlay, as albumentations does. The flare is
    ``src_radius // 10`` concentric circles of ``src_color`` with radii up to ``src_radius``, blended with opacities
    falling as the cube from 1 (smallest) to 0 (largest).

    Args:
        inputs: Key(s) of the RGB images (uint8, or float32 in [0, 1]).
        outputs: Key(s) to write the flared images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        flare_roi: Region of the flare centre, (x_min, y_min, x_max, y_max) as fractions with min < max in [0, 1].
        angle_lower: Lower limit of the angle (in turns), in [0, ``angle_upper``).
        angle_upper: Upper limit of the angle (in turns), in (``angle_lower``, 1].
        num_flare_circles_lower: Lower limit of the number of circles, at least 0.
        num_flare_circles_upper: Upper limit of the number of circles, above ``num_flare_circles_lower``.
        src_radius: Radius of the flare in pixels.
        src_color: Colour of the flare (R, G, B).

    Raises:
        ValueError: If an argument is out of its range; when running, if an image is not RGB.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 flare_roi: tuple[float, float, float, float] = (0, 0, 1, 0.5), angle_lower: float = 0.0,
                 angle_upper: float = 1.0, num_flare_circles_lower: int = 6, num_flare_circles_upper: int = 10,
                 src_radius: int = 400, src_color: tuple[int, int, int] = (255, 255, 255)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        op = "RandomSunFlare"
        self.flare_roi = _roi(flare_roi, "flare_roi", op, strict=True)
        _ordered(angle_lower, angle_upper, (0, 1), "angle_lower, angle_upper", op, strict=True)
        _ordered(num_flare_circles_lower, num_flare_circles_upper, (0, math.inf),
                 "num_flare_circles_lower, num_flare_circles_upper", op, strict=True)
        self.angle_lower, self.angle_upper = float(angle_lower), float(angle_upper)
        self.num_flare_circles_lower = _int_at_least(num_flare_circles_lower, 0, "num_flare_circles_lower", op)
        self.num_flare_circles_upper = _int_at_least(num_flare_circles_upper, 0, "num_flare_circles_upper", op)
        self.src_radius = _int_at_least(src_radius, 0, "src_radius", op)
        self.src_color = _colour(src_color, "src_color", op)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[int, int, list[tuple[Any, ...]]]:
        rng = get_rng(state)
        height, width = data.shape[:2]
        angle = 2 * math.pi * float(rng.uniform(self.angle_lower, self.angle_upper))
        x_min, y_min, x_max, y_max = self.flare_roi
        centre_x = int(width * float(rng.uniform(x_min, x_max)))
        centre_y = int(height * float(rng.uniform(y_min, y_max)))
        count = int(rng.integers(self.num_flare_circles_lower, self.num_flare_circles_upper + 1))
        steps = np.arange(-centre_x, width - centre_x, 10)
        line_x, line_y = centre_x + steps * math.cos(angle), centre_y + steps * math.sin(angle)
        circles = []
        for _ in range(count):
            alpha = float(rng.uniform(0.05, 0.2))
            point = int(rng.integers(0, len(steps)))
            radius = int(rng.integers(1, max(height // 100 - 2, 2) + 1))
            colour = tuple(int(rng.integers(max(c - 50, 0), c + 1)) for c in self.src_color)
            circles.append((alpha, (int(line_x[point]), int(line_y[point])), radius ** 3, colour))
        return centre_x, centre_y, circles

    def apply(self, data: np.ndarray, params: tuple[int, int, list[tuple[Any, ...]]]) -> np.ndarray:
        centre_x, centre_y, circles = params
        output = _to_uint8(data, "RandomSunFlare", self.inputs, rgb=True)
        overlay = output.copy()
        # The overlay keeps every circle drawn so far, so each blend covers the union of the circles' boxes (outside
        # it overlay and output agree and the blend changes nothing).
        rows, cols = slice(0, 0), slice(0, 0)
        for alpha, centre, radius, colour in circles:
            box = disk(output.shape, centre, radius)
            if box is None:
                continue
            overlay[box[0], box[1]][box[2]] = colour
            rows = slice(min(rows.start, box[0].start) if rows.stop else box[0].start, max(rows.stop, box[0].stop))
            cols = slice(min(cols.start, box[1].start) if cols.stop else box[1].start, max(cols.stop, box[1].stop))
            output[rows, cols] = add_weighted(overlay[rows, cols], alpha, output[rows, cols], 1 - alpha)
        num_times = self.src_radius // 10
        alphas = np.linspace(0.0, 1, num=num_times)
        radii = np.linspace(1, self.src_radius, num=num_times)
        overlay = output.copy()
        for i in range(num_times):
            box = disk(output.shape, (centre_x, centre_y), int(radii[i]))
            if box is None:
                continue
            overlay[box[0], box[1]][box[2]] = self.src_color
            fade = float(alphas[num_times - i - 1])
            alpha = fade * fade * fade
            output[box[0], box[1]] = add_weighted(overlay[box[0], box[1]], alpha, output[box[0], box[1]], 1 - alpha)
        return _restore(output, data.dtype)
