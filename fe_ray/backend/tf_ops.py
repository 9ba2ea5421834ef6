"""TensorFlow implementations of the FastEstimator-style tensor helpers of :mod:`fe_ray.backend.tensor_ops`.

Imported only when a TF tensor or variable reaches one of those helpers. Arguments arrive validated: axes as an
int, a tuple or None, and dtypes as canonical names such as ``"float32"``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import tensorflow as tf

from fe_ray.backend.determinism import tf_global_generator


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a TF tensor or variable (a Keras variable included)."""
    if tf.is_tensor(value) or isinstance(value, tf.Variable):
        return True
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(value, keras.Variable)


def _dtype(name: str | None) -> tf.DType | None:
    return None if name is None else tf.as_dtype(name)


def known_dtype(name: str) -> bool:
    """Whether TF has a dtype of this name ('uint16', 'bfloat16', 'complex64'...)."""
    try:
        tf.as_dtype(name)
    except TypeError:
        return False
    return True


def is_traced(value: Any) -> bool:
    """Whether ``value`` (or an element of a list / tuple of it) is a TF tensor of a graph being traced, whose
    values are not known yet."""
    items = value if isinstance(value, (list, tuple)) else (value,)
    return not tf.executing_eagerly() and any(is_tensor(item) for item in items)


def fill_unknown_sizes(tensor: tf.Tensor, shape: tuple[int | None, ...]) -> tuple[int | tf.Tensor, ...]:
    """``shape`` with each unknown (None) size replaced by the scalar tensor of the running graph's size."""
    dynamic = tf.shape(tensor)
    return tuple(dynamic[i] if size is None else size for i, size in enumerate(shape))


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


def squeeze(tensor: tf.Tensor, axis: int | tuple[int, ...] | None) -> tf.Tensor:
    """Drop ``axis`` (or every axis of length 1 when None)."""
    return tf.squeeze(tensor, axis=_axis(axis))


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


# ------------------------------------------------------------- helpers of tensor_math / tensor_random / tensor_info
def _floating(tensor: Any) -> tf.Tensor:
    """``tensor`` as a tensor, cast to float32 unless it is floating already (TF's ops refuse integers)."""
    tensor = tf.convert_to_tensor(tensor)
    return tensor if tensor.dtype.is_floating else tf.cast(tensor, tf.float32)


def sign(tensor: tf.Tensor) -> tf.Tensor:
    """Element-wise -1 / 0 / 1, in the input dtype."""
    return tf.sign(tensor)


def tensor_pow(tensor: tf.Tensor, power: int | float | np.ndarray | tf.Tensor) -> tf.Tensor:
    """Element-wise ``tensor ** power``; integer input with a fractional power (or a floating tensor / array of
    powers) is computed in float32, as torch does. A power tensor takes the input's dtype (tf.pow wants both alike).
    """
    tensor = tf.convert_to_tensor(tensor)
    if is_tensor(power) or isinstance(power, np.ndarray):
        power = tf.convert_to_tensor(power)
        fractional = power.dtype.is_floating  # its values may be unknown (traced): go by the dtype
    else:
        fractional = float(power) != int(power)
    if not tensor.dtype.is_floating and fractional:
        tensor = tf.cast(tensor, tf.float32)
    return tf.pow(tensor, tf.cast(power, tensor.dtype))


def tensor_sqrt(tensor: tf.Tensor) -> tf.Tensor:
    """Element-wise square root; integer input is computed in float32, as torch does."""
    return tf.sqrt(_floating(tensor))


def roll(tensor: tf.Tensor, shift: int | tuple[int, ...], axis: int | tuple[int, ...]) -> tf.Tensor:
    """Shift the elements along ``axis`` by ``shift`` places, wrapping around."""
    return tf.roll(tensor, shift=_axis(shift), axis=_axis(axis))


def as_indices(indices: Any, reference: tf.Tensor) -> tf.Tensor:
    """``indices`` (any framework, or numpy) as an int64 TF tensor."""
    if not is_tensor(indices):
        indices = np.asarray(indices.detach().cpu() if hasattr(indices, "detach") else indices)
    return tf.cast(indices, tf.int64)


def gather(tensor: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """The rows ``tensor[indices]`` (along axis 0)."""
    return tf.gather(tensor, indices, axis=0)


def gather_from_batch(tensor: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """``tensor[i, indices[i]]`` for every sample ``i``."""
    return tf.gather(tensor, indices, axis=1, batch_dims=1)


def random_normal_like(tensor: tf.Tensor, mean: float, std: float, dtype: str) -> tf.Tensor:
    """Normal noise shaped like ``tensor`` (its dynamic shape, so traced graphs work), from TF's global
    ``tf.random.Generator``: its state is a variable that fe_ray's checkpoints save and restore, where the hidden
    state of ``tf.random.normal`` cannot be saved, so a resumed run would draw other noise than the run it
    continues."""
    return tf_global_generator().normal(tf.shape(tensor), mean=mean, stddev=std, dtype=_dtype(dtype))


def random_uniform_like(tensor: tf.Tensor, minval: float | int, maxval: float | int, dtype: str) -> tf.Tensor:
    """Uniform noise in ``[minval, maxval)`` shaped like ``tensor``, from TF's global ``tf.random.Generator``
    (see :func:`random_normal_like`); integer dtypes take integer bounds."""
    return tf_global_generator().uniform(tf.shape(tensor), minval=minval, maxval=maxval, dtype=_dtype(dtype))


def reduce_std(tensor: tf.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> tf.Tensor:
    """Population standard deviation (divisor n) over ``axis``; integer input is computed in float32."""
    return tf.math.reduce_std(_floating(tensor), axis=_axis(axis), keepdims=keepdims)


def has_nan_or_inf(tensor: tf.Tensor) -> bool | tf.Tensor:
    """Whether any element is NaN or +-inf (never for integer / boolean tensors): a Python bool when running
    eagerly, a scalar bool tensor inside a traced graph (whose values are not known while it is traced)."""
    tensor = tf.convert_to_tensor(tensor)
    eager = tf.executing_eagerly()
    if not (tensor.dtype.is_floating or tensor.dtype.is_complex):
        return False if eager else tf.constant(False)
    found = tf.logical_not(tf.reduce_all(tf.math.is_finite(tensor)))
    return bool(found) if eager else found


def is_floating(tensor: tf.Tensor) -> bool:
    """Whether the tensor holds floating-point values."""
    return tensor.dtype.is_floating


def dtype_of(tensor: tf.Tensor) -> str:
    """The canonical dtype name, e.g. ``"float32"``."""
    return tensor.dtype.name


def reduce_mean(tensor: tf.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> tf.Tensor:
    """Mean over ``axis`` (every axis when None)."""
    return tf.reduce_mean(tensor, axis=_axis(axis), keepdims=keepdims)


def flip(tensor: tf.Tensor, axes: tuple[int, ...]) -> tf.Tensor:
    """Reverse the element order along ``axes``."""
    return tf.reverse(tensor, axis=list(axes))


def percentile(tensor: tf.Tensor, percentiles: list[float], axes: tuple[int, ...], keepdims: bool) -> tf.Tensor:
    """The 'lower' percentiles over ``axes`` (non-negative, sorted), stacked along a new leading axis."""
    tensor = tf.convert_to_tensor(tensor)
    rank = tensor.shape.rank
    others = [d for d in range(rank) if d not in axes]
    dynamic = tf.shape(tensor)
    kept = tf.gather(dynamic, others) if others else tf.zeros([0], tf.int32)
    # Move the reduced axes last and merge them, so one sort serves every percentile.
    merged = tf.reshape(tf.transpose(tensor, others + list(axes)), tf.concat([kept, [-1]], axis=0))
    ordered = tf.sort(merged, axis=-1)
    last = tf.cast(tf.shape(ordered)[-1] - 1, tf.float64)
    picks = [tf.gather(ordered, tf.cast(tf.floor(q / 100.0 * last), tf.int32), axis=-1) for q in percentiles]
    result = tf.stack(picks)
    if keepdims:
        ones = tf.ones([1], tf.int32)
        sizes = [ones if d in axes else dynamic[d:d + 1] for d in range(rank)]
        result = tf.reshape(result, tf.concat([[len(percentiles)], *sizes], axis=0))
    return result


def log1p(tensor: tf.Tensor) -> tf.Tensor:
    """Element-wise ``log(1 + x)``, accurate for small ``x``."""
    return tf.math.log1p(tensor)
