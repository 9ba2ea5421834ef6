"""Shared helpers of the image ops: parameter ranges and dtype conventions as FastEstimator's albumentations has them.

FastEstimator's image ops wrap albumentations (1.3), whose conventions the ops here keep so that a pipeline gives the
same images: the largest pixel value of an image is 255 for uint8, 65535 for uint16, 4294967295 for uint32 and 1.0
for float images; results are clipped to ``[0, max value]`` and cast back to the input's dtype by truncation (as
``astype`` does), not by rounding.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.univariate.normalize import MAX_VALUES_BY_DTYPE

Range = tuple[float, float]


def max_value(dtype: np.dtype[Any]) -> float:
    """The largest pixel value of images of ``dtype`` (1.0 for float dtypes, as albumentations' clipping uses)."""
    return MAX_VALUES_BY_DTYPE.get(np.dtype(dtype), 1.0)


def clip_to(image: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Clip ``image`` to ``[0, max_value(dtype)]`` and cast it to ``dtype`` (truncating, as albumentations does)."""
    return np.clip(image, 0, max_value(dtype)).astype(dtype)


def is_number(value: Any) -> bool:
    """True for ints and floats (numpy's included), False for bools."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def to_range(value: float | Sequence[float], name: str, op: str, low: float | None = None) -> Range:
    """A ``(low, high)`` range from a number or a pair, by albumentations' ``to_tuple`` rule.

    A pair is kept as given. A single number ``v`` becomes ``(-v, v)`` when ``low`` is None, else the ordered pair of
    ``low`` and ``v``.

    Raises:
        ValueError: If ``value`` is neither a number nor a pair of numbers.
    """
    if is_number(value):
        if low is None:
            return -float(value), float(value)  # type: ignore[arg-type]
        return (float(low), float(value)) if low < value else (float(value), float(low))  # type: ignore[operator]
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2 and all(
            is_number(item) for item in value):
        return float(value[0]), float(value[1])
    raise ValueError(f"{op} {name} must be a number or a pair (low, high) of numbers, got {value!r}.")


def symmetric_range(value: float | Sequence[float], name: str, op: str) -> Range:
    """FastEstimator's ``param_to_range``: a number ``v`` means ``(-|v|, |v|)``, a pair is kept as given."""
    if is_number(value):
        return -abs(float(value)), abs(float(value))  # type: ignore[arg-type]
    return to_range(value, name, op)


def shrink_range(limits: Range, magnitude_coef: float) -> Range:
    """The range RUA's ``set_rua_level`` leaves: same middle, half-width scaled by ``magnitude_coef`` (in [0, 1])."""
    middle = (limits[1] + limits[0]) / 2
    extent = magnitude_coef * (limits[1] - limits[0]) / 2
    return middle - extent, middle + extent


def check_dtype(image: np.ndarray, allowed: tuple[type, ...], op: str, inputs: list[str]) -> None:
    """Raise TypeError unless ``image``'s dtype is one of ``allowed`` (e.g. uint8-only ops).

    Raises:
        TypeError: If the dtype is not allowed; the message names the dtype, the input and the fix.
    """
    if image.dtype.type not in allowed:
        names = ", ".join(np.dtype(kind).name for kind in allowed)
        raise TypeError(f"{op} works on {names} images, but {inputs} has dtype {image.dtype}; convert it first "
                        "(e.g. (image * 255).astype(np.uint8) for a float image in [0, 1]).")


def check_scaled(image: np.ndarray, op: str, inputs: list[str]) -> None:
    """Raise TypeError unless ``image`` has a known pixel maximum: a float dtype (1.0) or one of
    ``MAX_VALUES_BY_DTYPE``'s integer dtypes (albumentations looks the maximum up there and fails on others, e.g.
    int32, int64 or bool, rather than clip them to [0, 1]).

    Raises:
        TypeError: If the dtype has no known maximum; the message names the dtype, the input and the fix.
    """
    if not np.issubdtype(image.dtype, np.floating) and np.dtype(image.dtype) not in MAX_VALUES_BY_DTYPE:
        known = ", ".join(str(dtype) for dtype in MAX_VALUES_BY_DTYPE if not np.issubdtype(dtype, np.floating))
        raise TypeError(f"{op} needs images whose maximum pixel value it knows ({known}, or floats in [0, 1]), but "
                        f"{inputs} has dtype {image.dtype}; convert it first (e.g. image.astype(np.uint8) for "
                        f"values in [0, 255], or image / 255.0).")


def check_channels(image: np.ndarray, channels: int | None, op: str, inputs: list[str]) -> None:
    """Raise ValueError unless ``image`` is ``(height, width, channels)`` (any channel count when None).

    Raises:
        ValueError: If the image has another shape; the message names the shape and the input.
    """
    if image.ndim != 3 or (channels is not None and image.shape[-1] != channels):
        wanted = f"(height, width, {channels})" if channels is not None else "(height, width, channels)"
        raise ValueError(f"{op} needs images of shape {wanted}, channels last; {inputs} has shape {image.shape}.")
