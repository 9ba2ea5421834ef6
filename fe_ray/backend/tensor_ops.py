"""Framework-neutral tensor helpers under FastEstimator's names, argument names and defaults.

Each helper inspects its tensor argument and forwards to :mod:`fe_ray.backend.torch_ops`,
:mod:`fe_ray.backend.tf_ops` or :mod:`fe_ray.backend.numpy_ops`. Those are imported on first use, and only after
the input's framework is already loaded, so neither torch nor TensorFlow becomes a requirement.

Every helper raises TypeError, naming the type, for a tensor argument that is no torch tensor, TF tensor / variable
or numpy array; invalid arguments (an unknown dtype name, say) raise ValueError naming the valid choices.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

Tensor = TypeVar("Tensor")
Axis = int | Sequence[int] | None

#: Canonical dtype names every framework understands, for :func:`cast`, :func:`zeros_like` and :func:`ones_like`.
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
#: torch-style aliases (from FastEstimator's dtype table) also accepted, with torch's meaning in every framework.
DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "short": "int16", "int": "int32",
                 "long": "int64"}
_OPS_MODULES = {"torch": "fe_ray.backend.torch_ops", "tf": "fe_ray.backend.tf_ops", "np": "fe_ray.backend.numpy_ops"}
_SUPPORTED = "torch.Tensor, tf.Tensor / tf.Variable, np.ndarray"


def _module(framework: str) -> ModuleType:
    name = _OPS_MODULES[framework]
    if name not in sys.modules:
        __import__(name)  # not importlib: TF's AutoGraph warns about it when a traced step makes the first call
    return sys.modules[name]


def _ops(value: Any, func: str, arg: str = "tensor") -> ModuleType:
    """The ops module of ``value``'s framework; a TypeError unless ``value`` is a tensor of one."""
    from fe_ray.backend import get_framework  # the package imports this module, so look it up at call time

    if not isinstance(value, (list, tuple, dict, set, str, bytes)):
        module = _module(get_framework(value))
        if module.is_tensor(value):
            return module
    raise TypeError(f"{func}: {arg} has unsupported type {type(value).__module__}.{type(value).__qualname__}; "
                    f"supported types are {_SUPPORTED}.")


def _same_ops(first: Any, second: Any, func: str, names: tuple[str, str]) -> ModuleType:
    """The ops module shared by two tensors; a TypeError if they are of different frameworks."""
    module, other = _ops(first, func, names[0]), _ops(second, func, names[1])
    if module is not other:
        raise TypeError(f"{func}: {names[0]} ({type(first).__name__}) and {names[1]} ({type(second).__name__}) "
                        f"must come from the same framework.")
    return module


def _axes(axis: Axis) -> int | tuple[int, ...] | None:
    """``axis`` as None, an int or a tuple of ints; numpy integers count as ints (as the frameworks take them).

    Raises:
        TypeError: If ``axis`` is a bool (True would silently mean axis 1).
    """
    if isinstance(axis, bool):
        raise TypeError(f"axis must be an int, a sequence of ints or None, got bool {axis!r}.")
    if axis is None or isinstance(axis, numbers.Integral):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def _shape(tensor: Any) -> tuple[int | None, ...] | None:
    """The tensor's shape (None for unknown sizes), or None when even its rank is unknown (TF graphs)."""
    try:
        return tuple(tensor.shape)
    except (TypeError, ValueError):
        return None


def _dtype_name(dtype: Any, func: str, ops: ModuleType | None = None) -> str:
    """The canonical name of a dtype string; a ValueError naming the valid choices otherwise.

    Args:
        dtype: The dtype name to look up.
        func: The calling helper's name, for the error message.
        ops: The ops module of the framework the dtype is for. A name outside :data:`DTYPES` and
            :data:`DTYPE_ALIASES` ('uint16', 'bfloat16', 'complex64'...) is accepted when that framework knows it,
            as FastEstimator hands such names to the framework.
    """
    name = DTYPE_ALIASES.get(dtype, dtype) if isinstance(dtype, str) else None
    if name in DTYPES or (name is not None and ops is not None and ops.known_dtype(name)):
        return name
    raise ValueError(f"{func}: unknown dtype {dtype!r}; valid choices are {list(DTYPES) + list(DTYPE_ALIASES)}, or "
                     f"another dtype name the tensor's framework knows (e.g. 'bfloat16' where it has one).")


def _leaf_ops(leaf: Any) -> ModuleType:
    """The ops module of a tensor leaf; numpy's for anything else (numbers, arrays)."""
    from fe_ray.backend import get_framework

    module = _module(get_framework(leaf))
    return module if module.is_tensor(leaf) else _module("np")


def _map_leaves(func: Callable[[Any], Any], data: Any) -> Any:
    if isinstance(data, dict):
        return {key: _map_leaves(func, value) for key, value in data.items()}
    if isinstance(data, (list, tuple, set)):
        values = [_map_leaves(func, value) for value in data]
        return type(data)(*values) if hasattr(data, "_fields") else type(data)(values)  # namedtuples too
    return func(data)


def argmax(tensor: Tensor, axis: int = 0) -> Tensor:
    """Return the int64 index of the (first) largest value along ``axis``, which the result drops.

    Args:
        tensor: A torch / TF tensor or numpy array.
        axis: The axis to search along; it is removed from the result.
    """
    return _ops(tensor, "argmax").argmax(tensor, axis)


def reduce_sum(tensor: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Return the sum along one axis, several, or all of them (``axis=None``): ``[[1., 2.], [3., 4.]]`` gives
    ``10.``, or ``[4., 6.]`` for ``axis=0``.

    Args:
        tensor: A torch / TF tensor or numpy array.
        axis: The axis or axes to reduce.
        keepdims: Keep each reduced axis with length 1, so the result broadcasts against ``tensor``.
    """
    return _ops(tensor, "reduce_sum").reduce_sum(tensor, _axes(axis), keepdims)


def reduce_max(tensor: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Return the largest value along one axis, several, or all of them (``axis=None``), in the input dtype.

    Args:
        tensor: A torch / TF tensor or numpy array.
        axis: The axis or axes to reduce.
        keepdims: Keep each reduced axis with length 1.
    """
    return _ops(tensor, "reduce_max").reduce_max(tensor, _axes(axis), keepdims)


def reduce_min(tensor: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Return the smallest value along one axis, several, or all of them (``axis=None``), in the input dtype.

    Args:
        tensor: A torch / TF tensor or numpy array.
        axis: The axis or axes to reduce.
        keepdims: Keep each reduced axis with length 1.
    """
    return _ops(tensor, "reduce_min").reduce_min(tensor, _axes(axis), keepdims)


def squeeze(tensor: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """Return ``tensor`` without an axis of length 1, or all of them when ``axis`` is None: (2, 1, 3) -> (2, 3).

    Args:
        tensor: A torch / TF tensor or numpy array.
        axis: The axis, or a sequence of axes, to remove. For TF and numpy each must have length 1; torch leaves an
            axis of another length in place, as ``torch.squeeze`` (and so FastEstimator) does.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If an axis does not exist, or (TF, numpy) its length is not 1.
    """
    ops, shape, axes = _ops(tensor, "squeeze"), _shape(tensor), _axes(axis)
    if axes is not None and shape is not None:
        lenient = ops.__name__ == _OPS_MODULES["torch"]
        choices = [i for i, size in enumerate(shape) if lenient or size in (1, None)]
        for item in (axes,) if isinstance(axes, int) else axes:
            if not -len(shape) <= item < len(shape) or item % len(shape) not in choices:
                raise ValueError(f"squeeze: axis {axis!r} cannot be squeezed from shape {list(shape)}; valid choices "
                                 f"are {choices}{'' if lenient else ' (the axes of length 1)'}, a list of them, or "
                                 f"None.")
    return ops.squeeze(tensor, axes)


def expand_dims(tensor: Tensor, axis: int = 1) -> Tensor:
    """Return ``tensor`` with a new axis of length 1: (3,) -> (1, 3) for ``axis=0``, (3, 1) for ``axis=1``.

    Args:
        tensor: A torch / TF tensor or numpy array with n axes.
        axis: Where the new axis goes, in ``[-n-1, n]``.
    """
    return _ops(tensor, "expand_dims").expand_dims(tensor, axis)


def clip_by_value(tensor: Tensor, min_value: int | float | Tensor | None = None,
                  max_value: int | float | Tensor | None = None) -> Tensor:
    """Return the values limited to ``[min_value, max_value]``: ``[-5, 4, 2]`` in [-2, 3] gives ``[-2, 3, 2]``.

    Args:
        tensor: A torch / TF tensor or numpy array.
        min_value: The lower bound (a number or a tensor of the same framework), or None to leave it open.
        max_value: The upper bound, or None to leave it open.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If both bounds are None.
    """
    ops = _ops(tensor, "clip_by_value")
    if min_value is None and max_value is None:
        raise ValueError("clip_by_value: min_value and max_value are both None; give at least one bound.")
    return ops.clip_by_value(tensor, min_value, max_value)


def cast(data: Any, dtype: str | Tensor) -> Any:
    """Return a tensor, or nested dicts / lists / tuples / sets of them (same structure), in another dtype.

    Args:
        data: A tensor, array or number, or a (nested) collection of them. With a dtype name, leaves that are no
            tensor become numpy arrays. With a reference tensor, a list or tuple holding only numbers (nested lists
            of them too) becomes one tensor, as FastEstimator's ``torch.tensor(data, ...)`` makes it.
        dtype: A name from :data:`DTYPES` or :data:`DTYPE_ALIASES` (or another name the leaf's framework knows,
            such as 'bfloat16'), or a reference tensor: each leaf then becomes a tensor of its framework and dtype
            (and torch device, for leaves that are not torch tensors yet).

    Raises:
        TypeError: If ``dtype`` is neither a string nor a supported tensor.
        ValueError: If ``dtype`` is an unknown name.
    """
    if isinstance(dtype, str):
        def convert_to_name(leaf: Any) -> Any:
            leaf_ops = _leaf_ops(leaf)
            return leaf_ops.cast(leaf, _dtype_name(dtype, "cast", leaf_ops))

        return _map_leaves(convert_to_name, data)
    ops = _ops(dtype, "cast", "dtype")
    from fe_ray.backend import to_number

    if isinstance(data, (list, tuple)) and not hasattr(data, "_fields") and _numbers_only(data):
        try:
            return ops.cast_like(data, dtype)
        except ValueError:  # ragged nesting cannot make one array: convert the numbers one by one, as before
            pass

    def convert(leaf: Any) -> Any:
        leaf_ops = _leaf_ops(leaf)
        return ops.cast_like(leaf if leaf_ops in (ops, _module("np")) else to_number(leaf), dtype)

    return _map_leaves(convert, data)


def _numbers_only(data: list[Any] | tuple[Any, ...]) -> bool:
    """Whether ``data`` holds numbers only (Python or numpy scalars), directly or in nested lists / tuples."""
    return all(_numbers_only(item) if isinstance(item, (list, tuple)) and not hasattr(item, "_fields") else
               isinstance(item, numbers.Number) for item in data)


def zeros_like(tensor: Tensor, dtype: str | None = None) -> Tensor:
    """Return zeros with the shape, framework and device of ``tensor``.

    Args:
        tensor: A torch / TF tensor or numpy array.
        dtype: A dtype name (as for :func:`cast`), or None for the dtype of ``tensor``.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``dtype`` is an unknown name.
    """
    return _filled_like("zeros_like", tensor, dtype)


def ones_like(tensor: Tensor, dtype: str | None = None) -> Tensor:
    """Return ones with the shape, framework and device of ``tensor``.

    Args:
        tensor: A torch / TF tensor or numpy array.
        dtype: A dtype name (as for :func:`cast`), or None for the dtype of ``tensor``.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``dtype`` is an unknown name.
    """
    return _filled_like("ones_like", tensor, dtype)


def _filled_like(func: str, tensor: Any, dtype: str | None) -> Any:
    """``zeros_like`` / ``ones_like`` of ``tensor``'s framework, with the dtype name checked."""
    ops = _ops(tensor, func)
    return getattr(ops, func)(tensor, None if dtype is None else _dtype_name(dtype, func, ops))


def permute(tensor: Tensor, permutation: Sequence[int]) -> Tensor:
    """Return ``tensor`` with output axis i taken from input axis ``permutation[i]``: (2, 3, 4) by [2, 0, 1] gives
    shape (4, 2, 3).

    Args:
        tensor: A torch / TF tensor or numpy array with n axes.
        permutation: Each of ``0 .. n-1`` exactly once; an axis may also be given counted from the end (``-1`` for
            ``n-1``), as every framework takes it.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``permutation`` is not a permutation of the tensor's axes.
    """
    ops, shape = _ops(tensor, "permute"), _shape(tensor)
    order = [int(a) for a in permutation]
    if shape is not None:
        rank = len(shape)
        if any(not -rank <= a < rank for a in order) or sorted(a % rank for a in order) != list(range(rank)):
            raise ValueError(f"permute: {list(permutation)} is no permutation of the tensor's {rank} axes; valid "
                             f"choices hold each of {list(range(rank))} exactly once (or its negative, counted from "
                             f"the end).")
        # Plain axis numbers, so every framework (and a traced TF graph) gets the same permutation.
        order = [a % rank for a in order]
    return ops.permute(tensor, order)


def reshape(tensor: Tensor, shape: list[int]) -> Tensor:
    """Return the elements of ``tensor`` (in row-major order) laid out in a new shape.

    Args:
        tensor: A torch / TF tensor or numpy array.
        shape: The new shape; one entry may be -1, for whatever size is left.
    """
    return _ops(tensor, "reshape").reshape(tensor, list(shape))


def tensor_round(tensor: Tensor) -> Tensor:
    """Return each value rounded to the nearest integer, halves to even (2.5 -> 2., 3.5 -> 4.), in the input dtype.

    Args:
        tensor: A torch / TF tensor or numpy array.
    """
    return _ops(tensor, "tensor_round").tensor_round(tensor)


def abs(tensor: Tensor) -> Tensor:  # FastEstimator's name: shadows the builtin in this module only
    """Return the absolute value of each element, in the input dtype.

    Args:
        tensor: A torch / TF tensor or numpy array.
    """
    return _ops(tensor, "abs").abs(tensor)


def exp(tensor: Tensor) -> Tensor:
    """Return e to the power of each element; integer input gives float32 (torch, TF) or float64 (numpy).

    Args:
        tensor: A torch / TF tensor or numpy array.
    """
    return _ops(tensor, "exp").exp(tensor)


def maximum(tensor1: Tensor, tensor2: Tensor) -> Tensor:
    """Return the larger of two tensors element by element (shapes broadcast).

    Args:
        tensor1: A torch / TF tensor or numpy array.
        tensor2: A tensor of the same framework.

    Raises:
        TypeError: If either is of an unsupported type, or they come from different frameworks.
    """
    return _same_ops(tensor1, tensor2, "maximum", ("tensor1", "tensor2")).maximum(tensor1, tensor2)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Return the matrix product of ``a`` (..., n, k) and ``b`` (..., k, m), batched over leading axes: (..., n, m).

    Args:
        a: A torch / TF tensor or numpy array of shape (..., n, k).
        b: A tensor of the same framework and dtype, of shape (..., k, m).

    Raises:
        TypeError: If either is of an unsupported type, or they come from different frameworks.
    """
    return _same_ops(a, b, "matmul", ("a", "b")).matmul(a, b)


def where(condition: Tensor, yes: Tensor | int | float, no: Tensor | int | float) -> Tensor:
    """Return ``yes`` where ``condition`` is true and ``no`` elsewhere, in the broadcast shape of all three.

    Args:
        condition: A boolean torch / TF tensor or numpy array (other dtypes: non-zero counts as true).
        yes: The values for true positions: a tensor of the same framework, or a number.
        no: The values for false positions. A number beside a tensor takes that tensor's dtype.
    """
    return _ops(condition, "where", "condition").where(condition, yes, no)
