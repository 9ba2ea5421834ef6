"""TensorFlow implementations of the FastEstimator-style tensor helpers of :mod:`fe_ray.backend.tensor_ops`.

Imported only when a TF tensor or variable reaches one of those helpers. Arguments arrive validated: axes as an
int, a tuple or None, and dtypes as canonical names such as ``"float32"``.
"""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a TF tensor or variable (a Keras variable included)."""
    if tf.is_tensor(value) or isinstance(value, tf.Variable):
        return True
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(value, keras.Variable)


def _dtype(name: str | None) -> tf.DType | None:
    return None if name is None else tf.as_dtype(name)


def _axis(axis: int | tuple[int, ...] | None) -> int | list[int] | None:
    return list(axis) if isinstance(axis, tuple) else axis


def argmax(tensor: tf.Tensor, axis: int) -> tf.Tensor:
    """Index (int64) of the largest element along ``axis``."""
    return tf.argmax(tensor, axis=axis)


def reduce_sum(tensor: tf.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> tf.Tensor:
    """Sum over ``axis`` (every axis when None)."""
    return tf.reduce_sum(tensor, axis=_axis(axis), keepdims=keepdims)


def reduce_max(tensor: tf.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> tf.Tensor:
    """Maximum over ``axis`` (every axis when None)."""
    return tf.reduce_max(tensor, axis=_axis(axis), keepdims=keepdims)


def reduce_min(tensor: tf.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> tf.Tensor:
    """Minimum over ``axis`` (every axis when None)."""
    return tf.reduce_min(tensor, axis=_axis(axis), keepdims=keepdims)


def squeeze(tensor: tf.Tensor, axis: int | None) -> tf.Tensor:
    """Drop ``axis`` (or every axis of length 1 when None)."""
    return tf.squeeze(tensor, axis=axis)


def expand_dims(tensor: tf.Tensor, axis: int) -> tf.Tensor:
    """Insert a new axis of length 1 at ``axis``."""
    return tf.expand_dims(tensor, axis=axis)


def _like(value: Any, tensor: tf.Tensor) -> tf.Tensor:
    """``value`` (a number, array or tensor) as a tensor of ``tensor``'s dtype."""
    return tf.cast(value, tensor.dtype)


def clip_by_value(tensor: tf.Tensor, min_value: Any, max_value: Any) -> tf.Tensor:
    """Limit the values to ``[min_value, max_value]``; a None bound leaves that side open."""
    tensor = tf.convert_to_tensor(tensor)
    if min_value is not None:
        tensor = tf.maximum(tensor, _like(min_value, tensor))
    if max_value is not None:
        tensor = tf.minimum(tensor, _like(max_value, tensor))
    return tensor


def cast(data: Any, dtype: str) -> tf.Tensor:
    """``data`` (a TF tensor) converted to the canonical dtype name ``dtype``."""
    return tf.cast(data, _dtype(dtype))


def cast_like(data: Any, reference: tf.Tensor) -> tf.Tensor:
    """``data`` (a tensor, array or number) as a TF tensor with the dtype of ``reference``."""
    return tf.cast(data, reference.dtype)


def zeros_like(tensor: tf.Tensor, dtype: str | None) -> tf.Tensor:
    """Zeros shaped like ``tensor``, in ``dtype`` (the tensor's own when None)."""
    return tf.zeros_like(tensor, dtype=_dtype(dtype))


def ones_like(tensor: tf.Tensor, dtype: str | None) -> tf.Tensor:
    """Ones shaped like ``tensor``, in ``dtype`` (the tensor's own when None)."""
    return tf.ones_like(tensor, dtype=_dtype(dtype))


def permute(tensor: tf.Tensor, permutation: list[int]) -> tf.Tensor:
    """Reorder the axes so that output axis ``i`` is input axis ``permutation[i]``."""
    return tf.transpose(tensor, perm=list(permutation))


def reshape(tensor: tf.Tensor, shape: list[int]) -> tf.Tensor:
    """The elements of ``tensor`` in ``shape`` (one entry may be -1)."""
    return tf.reshape(tensor, list(shape))


def tensor_round(tensor: tf.Tensor) -> tf.Tensor:
    """Round to the nearest integer, halves to even."""
    return tf.round(tensor)


def abs(tensor: tf.Tensor) -> tf.Tensor:  # FastEstimator's name, shadowing the builtin here only
    """Element-wise absolute value."""
    return tf.abs(tensor)


def exp(tensor: tf.Tensor) -> tf.Tensor:
    """Element-wise e ** x; integer and boolean input is computed in float32, as torch does."""
    tensor = tf.convert_to_tensor(tensor)
    if not (tensor.dtype.is_floating or tensor.dtype.is_complex):
        tensor = tf.cast(tensor, tf.float32)
    return tf.exp(tensor)


def maximum(tensor1: tf.Tensor, tensor2: tf.Tensor) -> tf.Tensor:
    """Element-wise larger of two tensors (broadcasting)."""
    return tf.maximum(tensor1, tensor2)


def matmul(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """Matrix product (batched over leading axes)."""
    return tf.matmul(a, b)


def where(condition: tf.Tensor, yes: Any, no: Any) -> tf.Tensor:
    """``yes`` where ``condition`` holds, else ``no``; a number beside a tensor takes that tensor's dtype."""
    if condition.dtype != tf.bool:
        condition = tf.cast(condition, tf.bool)
    if is_tensor(yes) and not is_tensor(no):
        no = _like(no, yes)
    elif is_tensor(no) and not is_tensor(yes):
        yes = _like(yes, no)
    return tf.where(condition, yes, no)
