"""Random pixel-value ops of albumentations' kind: RandomBrightnessContrast, RandomGamma, GaussianNoise, Posterize and
Solarize.

FastEstimator wraps albumentations (1.3) for these; the numpy code here repeats its arithmetic (lookup tables for
uint8, clipping to the dtype's range, truncating casts; see :mod:`fe_ray.op.numpyop.univariate._image`), so a given
parameter gives the same image. The parameters themselves are drawn from the sample's generator with
albumentations' distributions (the numbers differ from albumentations', which draws from Python's global ``random``):
in a Pipeline the draws are exact across resumes and worker threads. Several inputs of one op get the same
parameters, as FastEstimator's replayed albumentations give them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import (
    Range,
    check_channels,
    check_dtype,
    check_scaled,
    clip_to,
    is_number,
    max_value,
    to_range,
)
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


class RandomBrightnessContrast(UnivariateOp):
    """Change brightness and contrast by random amounts: ``image * alpha + beta * reference``.

    Per sample ``alpha = 1 + uniform(contrast_limit)`` and ``beta = uniform(brightness_limit)``; the reference is
    the dtype's maximum (``brightness_by_max``) or the image's mean (times ``alpha``). uint8 images go through a
    256-entry lookup table truncated into [0, 255]; float images are clipped to [0, 1].

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        brightness_limit: Range of ``beta``: a number ``v`` means ``(-v, v)``, or a pair.
        contrast_limit: Range of ``alpha - 1``: a number ``v`` means ``(-v, v)``, or a pair.
        brightness_by_max: Shift brightness by ``beta`` times the dtype's maximum (True) or the image's mean.

    Raises:
        ValueError: If a limit is not a number or a pair.
        TypeError: When running, if an image is not uint8, uint16, uint32 or float (as albumentations, which has
            no maximum for other dtypes).
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 brightness_limit: float | Sequence[float] = 0.2, contrast_limit: float | Sequence[float] = 0.2,
                 brightness_by_max: bool = True) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.brightness_limit = to_range(brightness_limit, "brightness_limit", "RandomBrightnessContrast")
        self.contrast_limit = to_range(contrast_limit, "contrast_limit", "RandomBrightnessContrast")
        self.brightness_by_max = bool(brightness_by_max)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[float, float]:
        rng = get_rng(state)
        alpha = 1.0 + float(rng.uniform(*self.contrast_limit))
        beta = float(rng.uniform(*self.brightness_limit))
        return alpha, beta

    def apply(self, data: np.ndarray, params: tuple[float, float]) -> np.ndarray:
        check_scaled(data, "RandomBrightnessContrast", self.inputs)
        alpha, beta = params
        if data.dtype == np.uint8:
            table = np.arange(256, dtype=np.float32)
            if alpha != 1:
                table *= alpha
            if beta != 0:
                table += beta * 255.0 if self.brightness_by_max else alpha * beta * float(np.mean(data))
            return np.clip(table, 0, 255).astype(np.uint8)[data]
        result = data.astype(np.float32)
        if alpha != 1:
            result *= alpha
        if beta != 0:
            result += beta * max_value(data.dtype) if self.brightness_by_max else beta * float(np.mean(result))
        return clip_to(result, data.dtype)


class RandomGamma(UnivariateOp):
    """Raise pixel values (in units of the maximum) to a random power ``gamma = uniform(gamma_limit) / 100``.

    uint8 images go through albumentations' lookup table ``(arange(0, 256/255, 1/255) ** gamma * 255)``, truncated
    (so even gamma 1 lowers 24 of the 256 levels by one, as in FastEstimator); float images become
    ``image ** gamma``, unclipped.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        gamma_limit: The range of ``gamma`` in percent, a pair ``(low, high)`` with ``low > 0``.
        eps: Accepted for FastEstimator compatibility; unused (albumentations 1.3 ignores it too).

    Raises:
        ValueError: If ``gamma_limit`` is not a pair of positive numbers. (FastEstimator turns a single number
            ``v`` into ``(-v, v)``, whose negative gammas break the image; fe_ray rejects it instead.)
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 gamma_limit: float | Sequence[float] = (80, 120), eps: float = 1e-7) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.gamma_limit = to_range(gamma_limit, "gamma_limit", "RandomGamma")
        if not 0 < self.gamma_limit[0] <= self.gamma_limit[1]:
            raise ValueError(f"RandomGamma gamma_limit must be a pair (low, high) of percentages with 0 < low <= "
                             f"high, e.g. (80, 120); got {gamma_limit!r} (a single number v means (-v, v)).")
        self.eps = eps

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return float(get_rng(state).uniform(*self.gamma_limit)) / 100.0

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        if data.dtype == np.uint8:
            table = (np.arange(0, 256.0 / 255, 1.0 / 255) ** params) * 255
            return table.astype(np.uint8)[data]
        return np.power(data, params)


class GaussianNoise(UnivariateOp):
    """Add gaussian noise of a random variance ``uniform(var_limit)`` and mean ``mean``, per pixel and channel.

    The noise is in pixel units and the result is clipped to the dtype's range ([0, 255] for uint8, truncated;
    [0, 1] for float images, so the default variances suit uint8 images; a float image in another range must not
    use this op). Several inputs get the same noise (so they must have the first input's shape).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the noisy images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        var_limit: Range of the variance: a number ``v`` means ``(0, v)``, or a pair.
        mean: Mean of the noise.

    Raises:
        ValueError: If ``var_limit`` is not a non-negative number or pair; when running, if an input's shape
            differs from the first input's.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 var_limit: float | Sequence[float] = (10.0, 50.0), mean: float = 0.0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.var_limit = to_range(var_limit, "var_limit", "GaussianNoise", low=0.0)
        if min(self.var_limit) < 0:
            raise ValueError(f"GaussianNoise var_limit holds variances, which must be non-negative; got {var_limit!r}.")
        self.mean = float(mean)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        rng = get_rng(state)
        sigma = float(rng.uniform(*self.var_limit)) ** 0.5
        return rng.normal(self.mean, sigma, data.shape)

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        if data.shape != params.shape:
            raise ValueError(f"GaussianNoise adds the same noise to every input, so they need one shape; {self.inputs} "
                             f"have shapes {params.shape} (first) and {data.shape}.")
        return clip_to(data.astype(np.float32) + params, data.dtype)


def parse_num_bits(num_bits: int | Sequence[int] | Sequence[Sequence[int]]) -> Range | list[Range]:
    """Posterize's ``num_bits`` as one range, or three (R, G, B), of bit counts (albumentations' reading).

    Raises:
        ValueError: If ``num_bits`` has another form or values outside [0, 8].
    """
    parsed: Range | list[Range]
    if isinstance(num_bits, Sequence) and len(num_bits) == 3:
        parsed = [to_range(bits, "num_bits", "Posterize", low=0) for bits in num_bits]
        bounds = [bound for pair in parsed for bound in pair]
    elif isinstance(num_bits, Sequence):
        parsed = to_range(num_bits, "num_bits", "Posterize")
        bounds = list(parsed)
    else:
        parsed = to_range(num_bits, "num_bits", "Posterize", low=num_bits)
        bounds = list(parsed)
    if not all(float(b).is_integer() and 0 <= b <= 8 for b in bounds) or any(
            low > high for low, high in np.reshape(bounds, (-1, 2))):
        raise ValueError(f"Posterize num_bits must be ints in [0, 8] (an int, a pair (low, high), or three of "
                         f"them for R, G, B), got {num_bits!r}.")
    return parsed


class Posterize(UnivariateOp):
    """Keep only the ``num_bits`` highest bits of each uint8 value (a random number of bits per sample).

    ``num_bits``: an int ``n`` keeps ``n`` bits; a pair ``(low, high)`` draws the bits from that range (inclusive);
    three entries draw per channel (RGB images): each a pair, or an int ``r`` meaning the range ``(0, r)`` (as
    albumentations reads it, though FastEstimator's docstring calls it a fixed count). 0 bits give black, 8 the
    original.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the posterized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        num_bits: The number(s) of bits to keep, in [0, 8].

    Raises:
        ValueError: If ``num_bits`` has another form or values outside [0, 8]; when running, if per-channel bits
            meet an image that is not RGB.
        TypeError: When running, if an image is not uint8.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 num_bits: int | Sequence[int] | Sequence[Sequence[int]] = 4) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.num_bits = parse_num_bits(num_bits)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int | list[int]:
        rng = get_rng(state)
        if isinstance(self.num_bits, list):
            return [int(rng.integers(int(low), int(high) + 1)) for low, high in self.num_bits]
        return int(rng.integers(int(self.num_bits[0]), int(self.num_bits[1]) + 1))

    def apply(self, data: np.ndarray, params: int | list[int]) -> np.ndarray:
        check_dtype(data, (np.uint8,), "Posterize", self.inputs)
        if isinstance(params, int):
            return data & np.uint8((0xFF << (8 - params)) & 0xFF)
        check_channels(data, 3, "Posterize with per-channel num_bits", self.inputs)
        masks = np.array([(0xFF << (8 - bits)) & 0xFF for bits in params], dtype=np.uint8)
        return data & masks


class Solarize(UnivariateOp):
    """Invert every value at or above a random threshold ``uniform(threshold)``: ``max - value``.

    The maximum is 255 for uint8 images and 1.0 for float ones (so a float image needs a threshold in [0, 1]; the
    default 128 leaves it unchanged, as in FastEstimator).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the solarized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        threshold: The threshold: a number ``t`` (always ``t``) or a range ``(low, high)``.

    Raises:
        ValueError: If ``threshold`` is not a number or a pair.
        TypeError: When running, if an image is not uint8, uint16, uint32 or float (as albumentations, which has
            no maximum for other dtypes).
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 threshold: float | Sequence[float] = 128) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        low = threshold if is_number(threshold) else None
        self.threshold = to_range(threshold, "threshold", "Solarize", low=low)  # type: ignore[arg-type]

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return float(get_rng(state).uniform(*self.threshold))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        check_scaled(data, "Solarize", self.inputs)
        top = max_value(data.dtype)
        if data.dtype == np.uint8:
            levels = np.arange(256)
            return np.where(levels < params, levels, 255 - levels).astype(np.uint8)[data]
        return np.where(data >= params, (top - data).astype(data.dtype), data)
