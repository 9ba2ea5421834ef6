"""numpy implementations of the FastEstimator-style tensor helpers of :mod:`fe_ray.backend.tensor_ops`.

Arguments arrive validated by :mod:`fe_ray.backend.tensor_ops`: axes as an int, a tuple or None, and dtypes as
canonical names such as ``"float32"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a numpy array or numpy scalar."""
    return isinstance(value, (np.ndarray, np.generic))


def known_dtype(name: str) -> bool:
    """Whether numpy understands this dtype name ('uint16', 'complex64'...)."""
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


def argmax(tensor: np.ndarray, axis: int) -> np.ndarray:
    """Index of the largest element along ``axis``."""
    return np.argmax(tensor, axis=axis)


def reduce_sum(tensor: np.ndarray, axis: int | tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Sum over ``axis`` (every axis when None)."""
    return np.sum(tensor, axis=axis, keepdims=keepdims)


def reduce_max(tensor: np.ndarray, axis: int | tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Maximum over ``axis`` (every axis when None)."""
    return np.max(tensor, axis=axis, keepdims=keepdims)


def reduce_min(tensor: np.ndarray, axis: int | tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Minimum over ``axis`` (every axis when None)."""
    return np.min(tensor, axis=axis, keepdims=keepdims)


def squeeze(tensor: np.ndarray, axis: int | tuple[int, ...] | None) -> np.ndarray:
    """Drop ``axis`` (or every axis of length 1 when None)."""
    return np.squeeze(tensor, axis=axis)


def expand_dims(tensor: np.ndarray, axis: int) -> np.ndarray:
    """Insert a new axis of length 1 at ``axis``."""
    return np.expand_dims(tensor, axis=axis)


def clip_by_value(tensor: np.ndarray, min_value: Any, max_value: Any) -> np.ndarray:
    """Limit the values to ``[min_value, max_value]``; a None bound leaves that side open."""
    return np.clip(tensor, min_value, max_value)


def cast(data: Any, dtype: str) -> np.ndarray:
    """An array of ``data`` with the canonical dtype name ``dtype``."""
    return np.array(data, dtype=np.dtype(dtype))


def cast_like(data: Any, reference: np.ndarray) -> np.ndarray:
    """An array of ``data`` with the dtype of ``reference``."""
    return np.array(data, dtype=reference.dtype)


def zeros_like(tensor: np.ndarray, dtype: str | None) -> np.ndarray:
    """Zeros shaped like ``tensor``, in ``dtype`` (the tensor's own when None)."""
    return np.zeros_like(tensor, dtype=None if dtype is None else np.dtype(dtype))


def ones_like(tensor: np.ndarray, dtype: str | None) -> np.ndarray:
    """Ones shaped like ``tensor``, in ``dtype`` (the tensor's own when None)."""
    return np.ones_like(tensor, dtype=None if dtype is None else np.dtype(dtype))


def permute(tensor: np.ndarray, permutation: list[int]) -> np.ndarray:
    """Reorder the axes so that output axis ``i`` is input axis ``permutation[i]``."""
    return np.transpose(tensor, axes=permutation)


def reshape(tensor: np.ndarray, shape: list[int]) -> np.ndarray:
    """The elements of ``tensor`` in ``shape`` (one entry may be -1)."""
    return np.reshape(tensor, shape)


def tensor_round(tensor: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, halves to even."""
    return np.round(tensor)


def abs(tensor: np.ndarray) -> np.ndarray:  # FastEstimator's name, shadowing the builtin here only
    """Element-wise absolute value."""
    return np.abs(tensor)


def exp(tensor: np.ndarray) -> np.ndarray:
    """Element-wise e ** x."""
    return np.exp(tensor)


def maximum(tensor1: np.ndarray, tensor2: np.ndarray) -> np.ndarray:
    """Element-wise larger of two arrays (broadcasting)."""
    return np.maximum(tensor1, tensor2)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Matrix product (batched over leading axes)."""
    return np.matmul(a, b)


def where(condition: np.ndarray, yes: Any, no: Any) -> np.ndarray:
    """``yes`` where ``condition`` holds, else ``no`` (either may be a scalar)."""
    return np.where(condition, yes, no)


# ------------------------------------------------------------- helpers of tensor_math / tensor_random / tensor_info
def sign(tensor: np.ndarray) -> np.ndarray:
    """Element-wise -1 / 0 / 1, in the input dtype."""
    return np.sign(tensor)


def tensor_pow(tensor: np.ndarray, power: int | float | np.ndarray) -> np.ndarray:
    """Element-wise ``tensor ** power`` (numpy's promotion: integer input with a float power gives float64); an
    array of powers broadcasts against ``tensor``."""
    return np.power(tensor, power)


def tensor_sqrt(tensor: np.ndarray) -> np.ndarray:
    """Element-wise square root (integer input gives float64)."""
    return np.sqrt(tensor)


def roll(tensor: np.ndarray, shift: int | tuple[int, ...], axis: int | tuple[int, ...]) -> np.ndarray:
    """Shift the elements along ``axis`` by ``shift`` places, wrapping around."""
    return np.roll(tensor, shift=shift, axis=axis)


def as_indices(indices: Any, reference: np.ndarray) -> np.ndarray:
    """``indices`` (any framework, or numpy) as an int64 array."""
    if hasattr(indices, "detach"):  # a torch tensor, possibly on a GPU
        indices = indices.detach().cpu()
    return np.asarray(indices).astype(np.int64)


def gather(tensor: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The rows ``tensor[indices]`` (along axis 0)."""
    return np.take(tensor, indices, axis=0)


def gather_from_batch(tensor: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``tensor[i, indices[i]]`` for every sample ``i``."""
    return tensor[np.arange(tensor.shape[0]), indices]


def random_normal_like(tensor: np.ndarray, mean: float, std: float, dtype: str) -> np.ndarray:
    """Normal noise shaped like ``tensor``, from numpy's global generator (``np.random.seed`` applies)."""
    return np.random.normal(loc=mean, scale=std, size=np.shape(tensor)).astype(dtype)


def random_uniform_like(tensor: np.ndarray, minval: float, maxval: float, dtype: str) -> np.ndarray:
    """Uniform noise in ``[minval, maxval)`` shaped like ``tensor``."""
    return np.random.uniform(low=minval, high=maxval, size=np.shape(tensor)).astype(dtype)


def reduce_std(tensor: np.ndarray, axis: int | tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Population standard deviation (divisor n) over ``axis`` (every axis when None)."""
    return np.std(tensor, axis=axis, keepdims=keepdims)


def has_nan_or_inf(tensor: np.ndarray) -> bool:
    """Whether any element is NaN or +-inf (never for integer / boolean arrays)."""
    tensor = np.asarray(tensor)
    if not (np.issubdtype(tensor.dtype, np.floating) or np.issubdtype(tensor.dtype, np.complexfloating)):
        return False
    return not bool(np.isfinite(tensor).all())


def is_floating(tensor: np.ndarray) -> bool:
    """Whether the array holds floating-point values."""
    return bool(np.issubdtype(np.asarray(tensor).dtype, np.floating))


def dtype_of(tensor: np.ndarray) -> str:
    """The canonical dtype name, e.g. ``"float32"``."""
    return np.asarray(tensor).dtype.name


def reduce_mean(tensor: np.ndarray, axis: int | tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Mean over ``axis`` (every axis when None)."""
    return np.mean(tensor, axis=axis, keepdims=keepdims)


def flip(tensor: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Reverse the element order along ``axes``."""
    return np.flip(tensor, axis=axes)


def percentile(tensor: np.ndarray, percentiles: list[float], axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """The 'lower' percentiles over ``axes``, stacked along a new leading axis."""
    return np.percentile(tensor, percentiles, axis=axes, keepdims=keepdims, method="lower")


def log1p(tensor: np.ndarray) -> np.ndarray:
    """Element-wise ``log(1 + x)``, accurate for small ``x``."""
    return np.log1p(tensor)
