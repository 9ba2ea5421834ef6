"""Random noise shaped like a tensor: FastEstimator's ``random_normal_like`` and ``random_uniform_like``.

The noise comes from the tensor's own framework and its global random state (torch's global generator, TensorFlow's
global ``tf.random.Generator``, numpy's global ``RandomState``), which ``fe_ray.enable_deterministic`` seeds and
checkpoints save, so a resumed run draws the noise the uninterrupted one would have; on the tensor's device for
torch.
"""

from __future__ import annotations

from fe_ray.backend.tensor_ops import DTYPE_ALIASES, Tensor, _ops

#: The dtype names random noise can take (floating point only, as in FastEstimator), with torch-style aliases.
FLOAT_DTYPES = ("float16", "float32", "float64")
#: The integer dtype names uniform noise can also take, by framework (FastEstimator's TF and numpy draw them; its
#: torch ``rand_like`` cannot).
UNIFORM_INT_DTYPES = {"tf": ("int32", "int64"), "np": ("uint8", "int8", "int16", "int32", "int64"), "torch": ()}


def _float_dtype(dtype: str | None, tensor: Tensor, func: str, integers: tuple[str, ...] = ()) -> str:
    """The canonical floating dtype name of ``dtype`` (``tensor``'s own when None), or one of ``integers``; a
    ValueError otherwise."""
    ops = _ops(tensor, func)
    if dtype is None:
        if not ops.is_floating(tensor):
            raise ValueError(f"{func}: dtype=None takes the tensor's dtype, but {ops.dtype_of(tensor)} is no "
                             f"floating type; pass dtype='float32' (or another of {list(FLOAT_DTYPES)}).")
        return ops.dtype_of(tensor)
    name = DTYPE_ALIASES.get(dtype, dtype) if isinstance(dtype, str) else None
    if name not in FLOAT_DTYPES + integers:
        kind = "floating type or integer type" if integers else "floating type"
        raise ValueError(f"{func}: dtype {dtype!r} is no {kind} noise can take here; valid choices are "
                         f"{list(FLOAT_DTYPES) + ['half', 'float', 'double'] + list(integers)} or None (the tensor's "
                         f"dtype).")
    return name


def random_normal_like(tensor: Tensor, mean: float = 0.0, std: float = 1.0, dtype: str | None = "float32") -> Tensor:
    """Return normal noise ``N(mean, std**2)`` with the shape, framework (and torch device) of ``tensor``.

    Args:
        tensor: The torch / TF tensor or numpy array whose shape to copy; its values are ignored.
        mean: The mean of the noise.
        std: The standard deviation of the noise (non-negative).
        dtype: A floating dtype name for the result, or None for the dtype of ``tensor`` (which must be
            floating).

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``dtype`` is no floating dtype name or ``std`` is negative.
    """
    name = _float_dtype(dtype, tensor, "random_normal_like")
    if std < 0:
        raise ValueError(f"random_normal_like: std must be >= 0, got {std!r}; pass the standard deviation, "
                         f"not the variance or a negative scale.")
    return _ops(tensor, "random_normal_like").random_normal_like(tensor, float(mean), float(std), name)


def random_uniform_like(tensor: Tensor, minval: float = 0.0, maxval: float = 1.0,
                        dtype: str | None = "float32") -> Tensor:
    """Return uniform noise in ``[minval, maxval)`` with the shape, framework (and torch device) of ``tensor``.

    Args:
        tensor: The torch / TF tensor or numpy array whose shape to copy; its values are ignored.
        minval: The lower bound (included).
        maxval: The upper bound (excluded); must exceed ``minval``.
        dtype: A floating dtype name for the result, or None for the dtype of ``tensor`` (which must be
            floating). TF also takes 'int32' / 'int64' (whole-number bounds) and numpy the integer names of
            :data:`UNIFORM_INT_DTYPES`, as FastEstimator's do: integer noise in ``[minval, maxval)``.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``dtype`` is no dtype name noise can take or ``maxval <= minval``.
    """
    from fe_ray.backend import get_framework

    ops, framework = _ops(tensor, "random_uniform_like"), get_framework(tensor)
    name = _float_dtype(dtype, tensor, "random_uniform_like", UNIFORM_INT_DTYPES[framework])
    if not maxval > minval:
        raise ValueError(f"random_uniform_like: maxval ({maxval!r}) must be greater than minval ({minval!r}); "
                         f"swap them or widen the range.")
    low, high = float(minval), float(maxval)
    if name not in FLOAT_DTYPES and framework == "tf":
        # TF draws integers in [minval, maxval) from integer bounds (numpy draws floats and truncates them).
        if not (low.is_integer() and high.is_integer()):
            raise ValueError(f"random_uniform_like: integer noise in TF needs whole-number bounds, got minval "
                             f"{minval!r} and maxval {maxval!r}.")
        return ops.random_uniform_like(tensor, int(low), int(high), name)
    return ops.random_uniform_like(tensor, low, high, name)
