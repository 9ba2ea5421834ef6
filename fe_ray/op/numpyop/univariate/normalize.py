"""Pixel value ops: Normalize (mean/std per channel), ToFloat (scale into [0, 1]) and Binarize (threshold)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

# The divisor ToFloat infers from an image's dtype (the largest value that dtype holds for images).
MAX_VALUES_BY_DTYPE: dict[np.dtype[Any], float] = {
    np.dtype(np.uint8): 255.0,
    np.dtype(np.uint16): 65535.0,
    np.dtype(np.uint32): 4294967295.0,
    np.dtype(np.float32): 1.0,
}


def _per_channel(value: float | Sequence[float], name: str, op: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float32)
    if array.ndim > 1 or array.size == 0:
        raise ValueError(f"{op} {name} must be a number or one number per channel, got {value!r}.")
    return array


class Normalize(UnivariateOp):
    """Scale images by ``max_pixel_value``, then subtract ``mean`` and divide by ``std`` per channel.

    ``out = (image - mean * max_pixel_value) / (std * max_pixel_value)`` as float32, channels on the last axis (a
    single number applies to every channel). Works on one sample or, as a Network pop, on a whole batch.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the normalized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        mean: Mean(s) per channel, in units of ``max_pixel_value`` (ImageNet's by default).
        std: Standard deviation(s) per channel, in the same units.
        max_pixel_value: The largest possible pixel value (255 for uint8 images, 1 for images already in [0, 1]).

    Raises:
        ValueError: If ``mean`` or ``std`` is not a number or a flat sequence, ``std`` holds a 0, or (when running)
            the number of values does not match the image's channels.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 mean: float | Sequence[float] = (0.485, 0.456, 0.406),
                 std: float | Sequence[float] = (0.229, 0.224, 0.225), max_pixel_value: float = 255.0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.mean = _per_channel(mean, "mean", "Normalize")
        self.std = _per_channel(std, "std", "Normalize")
        if np.any(self.std == 0) or max_pixel_value == 0:
            raise ValueError(f"Normalize divides by std * max_pixel_value, so neither may be 0; got std={std!r}, "
                             f"max_pixel_value={max_pixel_value!r}.")
        self.max_pixel_value = float(max_pixel_value)

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        for name, values in (("mean", self.mean), ("std", self.std)):
            if values.size > 1 and (data.ndim == 0 or data.shape[-1] != values.size):
                raise ValueError(f"Normalize {name} has {values.size} values (one per channel) but the image of "
                                 f"{self.inputs} has shape {data.shape}, whose last axis is not {values.size} "
                                 "channels; pass a single number, or move channels last before normalizing.")
        shift = self.mean * self.max_pixel_value
        scale = np.float32(1.0) / (self.std * self.max_pixel_value)
        return ((data.astype(np.float32) - shift) * scale).astype(np.float32)


class ToFloat(UnivariateOp):
    """Divide images by ``max_value`` into float32 values in [0, 1].

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the float images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        max_value: The divisor; None infers it from the image's dtype (uint8: 255, uint16: 65535, uint32:
            4294967295, float32: 1).

    Raises:
        ValueError: If ``max_value`` is 0, or (when running) it is None and the image's dtype has no known maximum.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 max_value: float | None = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if max_value is not None and max_value == 0:
            raise ValueError("ToFloat max_value must not be 0 (it is the divisor); pass the largest pixel value, or "
                             "None to infer it from the image's dtype.")
        self.max_value = max_value

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        max_value = self.max_value
        if max_value is None:
            if data.dtype not in MAX_VALUES_BY_DTYPE:
                known = ", ".join(str(dtype) for dtype in MAX_VALUES_BY_DTYPE)
                raise ValueError(f"ToFloat cannot infer the maximum of dtype {data.dtype} (input {self.inputs}); it "
                                 f"knows {known}. Pass max_value=... explicitly.")
            max_value = MAX_VALUES_BY_DTYPE[data.dtype]
        return (data.astype(np.float32) / np.float32(max_value)).astype(np.float32)


class Binarize(UnivariateOp):
    """Map every element to 1.0 if it is ``>= threshold``, else 0.0 (float32).

    Args:
        threshold: The threshold.
        inputs: Key(s) of the data.
        outputs: Key(s) to write the binarized data to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
    """

    def __init__(self, threshold: float, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.threshold = threshold

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        return (data >= self.threshold).astype(np.float32)
