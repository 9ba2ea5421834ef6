"""The RUA-specific variants FastEstimator defines in ``fe.op.numpyop.univariate.rua``: Identity, Equalize
(Pillow's), Posterize and Solarize with RUA's defaults and strength rules.

They are importable as ``fe_ray.op.numpyop.univariate.rua.<Name>``, FastEstimator's path; the package-level
``Posterize`` / ``Solarize`` are albumentations' ops, and FastEstimator's package-level ``Equalize`` is
albumentations' too, so these stay in the ``rua`` module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, is_number
from fe_ray.op.numpyop.univariate._pillow import equalize
from fe_ray.op.numpyop.univariate.histogram import PillowImageOp
from fe_ray.op.numpyop.univariate.photometric import Posterize as PosterizeAug
from fe_ray.op.numpyop.univariate.photometric import parse_num_bits
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


class Identity(UnivariateOp):
    """Pass the inputs through unchanged: RUA's "no augmentation" choice.

    Args:
        inputs: Key(s) of the data.
        outputs: Key(s) to write the data to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
    """

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Accept RUA's strength (``magnitude_coef`` in [0, 1]) and ignore it."""

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        return data


class Equalize(PillowImageOp):
    """Equalize the histogram of each channel of uint8 images, as Pillow's ``ImageOps.equalize`` (RUA's Equalize).

    Level ``i`` maps to ``(step // 2 + count of values below i) // step`` with ``step = (pixels - count of the
    brightest value) // 255``; a channel with one value, or too few pixels for a step, is left as is. This is
    FastEstimator's ``fe.op.numpyop.univariate.rua.Equalize``; ``fe.op.numpyop.univariate.Equalize`` is
    albumentations' (OpenCV's formula by default).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the equalized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: When running, if an image is not grayscale or RGB.
        TypeError: When running, if an image is not uint8.
    """

    def transform(self, data: np.ndarray) -> np.ndarray:
        return equalize(data)


class Posterize(PosterizeAug):
    """Posterize with RUA's defaults: keep a random number of high bits of each uint8 value (RUA's Posterize).

    As the package-level :class:`~fe_ray.op.numpyop.univariate.Posterize`, with ``num_bits`` 7 by default and
    ``set_rua_level(m)`` turning an int ``n`` into the range ``(round(8 - m * n), 8)`` and a pair into the pair
    narrowed around its middle to ``m`` of its width (rounded); three entries (R, G, B) each so.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the posterized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        num_bits: The number(s) of bits to keep, in [0, 8]: an int, a pair, or three of them for R, G, B.

    Raises:
        ValueError: If ``num_bits`` has another form or values outside [0, 8].
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 num_bits: int | Sequence[int] | Sequence[Sequence[int]] = 7) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, num_bits=num_bits)
        self.bits_spec: Any = num_bits

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Set the bit range for RUA's strength ``magnitude_coef`` (in [0, 1]), as the class docstring says."""
        spec = self.bits_spec
        if isinstance(spec, Sequence) and len(spec) == 3:
            spec = tuple(_bits_for_level(bits, magnitude_coef) for bits in spec)
        else:
            spec = _bits_for_level(spec, magnitude_coef)
        self.num_bits = parse_num_bits(spec)
        self.bits_spec = spec


def _bits_for_level(bits: int | Sequence[int], magnitude_coef: float) -> tuple[int, int]:
    if isinstance(bits, Sequence):
        middle = (bits[0] + bits[1]) / 2
        extent = magnitude_coef * (bits[1] - bits[0]) / 2
        return round(middle - extent), round(middle + extent)  # Python's round (half to even), as FastEstimator
    return round(8 - magnitude_coef * bits), 8


class Solarize(UnivariateOp):
    """Invert the uint8 values at or above a random threshold (RUA's Solarize, distinct from albumentations').

    The threshold is ``256 - round(uniform(0, threshold))`` for a number, ``256 - round(uniform(low, high))`` for a
    pair; values below it stay, the others become ``255 - value``. ``set_rua_level(m)`` turns a number ``t`` into
    ``m * t`` and a pair into the number ``low + m * (high - low)``, as FastEstimator's ``rua.Solarize`` does.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the solarized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        threshold: How far below 256 the threshold may go: a number or a pair ``(low, high)``.

    Raises:
        ValueError: If ``threshold`` is not a number or a pair of numbers.
        TypeError: When running, if an image is not uint8.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 threshold: float | Sequence[float] = 256) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.threshold: float | tuple[float, float]
        if is_number(threshold):
            self.threshold = float(threshold)  # type: ignore[arg-type]
        elif isinstance(threshold, Sequence) and len(threshold) == 2 and all(is_number(v) for v in threshold):
            self.threshold = (float(threshold[0]), float(threshold[1]))
        else:
            raise ValueError(f"Solarize threshold must be a number or a pair (low, high) of numbers, got "
                             f"{threshold!r}.")

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Scale the threshold range for RUA's strength ``magnitude_coef`` (in [0, 1]), as the class docstring says."""
        if isinstance(self.threshold, tuple):
            low, high = self.threshold
            self.threshold = magnitude_coef * (high - low) + low
        else:
            self.threshold = magnitude_coef * self.threshold

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int:
        low, high = self.threshold if isinstance(self.threshold, tuple) else (0.0, self.threshold)
        return 256 - round(float(get_rng(state).uniform(low, high)))

    def apply(self, data: np.ndarray, params: int) -> np.ndarray:
        check_dtype(data, (np.uint8,), "Solarize", self.inputs)
        return np.where(data < params, data, 255 - data).astype(np.uint8)
