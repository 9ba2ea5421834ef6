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


def squeeze(tensor: np.ndarray, axis: int | None) -> np.ndarray:
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
