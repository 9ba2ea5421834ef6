"""Axis-layout and indexing helpers under FastEstimator's names: roll, flip, transpose, gather, gather_from_batch.

Like :mod:`fe_ray.backend.tensor_ops`, each helper forwards to the ops module of its tensor's framework (torch,
TF or numpy), imported on first use only. Unsupported tensor types raise TypeError; invalid axes, shifts or indices
raise ValueError naming the valid choices.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from fe_ray.backend.tensor_ops import _OPS_MODULES, Tensor, _ops, _shape


def roll(tensor: Tensor, shift: int | Sequence[int] | Tensor, axis: int | Sequence[int] | Tensor) -> Tensor:
    """Return ``tensor`` with its elements shifted ``shift`` places along ``axis``, those pushed off one end
    re-entering at the other: ``[[1, 2, 3], [5, 6, 7]]`` rolled by 2 along axis 1 gives ``[[2, 3, 1], [6, 7, 5]]``.

    Args:
        tensor: A torch / TF tensor or numpy array.
        shift: How many places to move the elements (negative: towards the start): an int (numpy integers too), a
            list / tuple of them (one shift per axis of ``axis``), or an integer tensor or array holding them. In a
            traced TF graph a TF tensor whose value is not known yet goes to ``tf.roll`` as it is.
        axis: The axis to roll along, or a list / tuple of them (as long as ``shift``), given the same ways.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type, or ``shift`` / ``axis`` hold no integers.
        ValueError: If ``shift`` and ``axis`` give different numbers of entries.
    """
    ops = _ops(tensor, "roll")
    if ops.__name__ == _OPS_MODULES["tf"] and (ops.is_traced(shift) or ops.is_traced(axis)):
        return ops.roll(tensor, shift, axis)  # values a traced graph does not know yet: tf.roll reads them later
    shifts, axes = _integers(shift, "shift"), _integers(axis, "axis")
    if isinstance(shifts, int) and isinstance(axes, int):
        return ops.roll(tensor, shifts, axes)
    shifts, axes = (shifts,) if isinstance(shifts, int) else shifts, (axes,) if isinstance(axes, int) else axes
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift!r} and axis {axis!r} do not pair up; give two ints, or two lists of "
                         f"the same length (one shift per axis).")
    return ops.roll(tensor, shifts, axes)


def _integers(value: Any, name: str) -> int | tuple[int, ...]:
    """``value`` (an int, a list / tuple of them, or an eager tensor / array) as an int or a tuple of ints.

    Raises:
        TypeError: If ``value`` holds anything but integers.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    from fe_ray.backend import to_number

    try:
        items = [to_number(item) for item in value] if isinstance(value, (list, tuple)) else to_number(value)
        array = np.asarray(items)
    except (TypeError, ValueError) as err:
        raise TypeError(f"roll: {name} must be an int, a list of ints or an integer tensor, got {value!r}.") from err
    if array.dtype.kind not in "iu":
        raise TypeError(f"roll: {name} must be an int, a list of ints or an integer tensor, got {value!r}.")
    if array.ndim == 0 and not isinstance(value, (list, tuple)):
        return int(array)
    return tuple(int(item) for item in array.reshape(-1))


def gather(tensor: Tensor, indices: Any) -> Tensor:
    """Return the rows (entries along axis 0) of ``tensor`` at ``indices``, in ``tensor``'s framework.

    ``indices`` loses its axes of length 1 first, as in FastEstimator: indices ``[[1], [0], [1]]`` pick rows
    1, 0 and 1, while a single index ``[2]`` returns row 2 without a leading axis.

    Args:
        tensor: A torch / TF tensor or numpy array.
        indices: Integer row numbers: a tensor of any supported framework, an array or a list.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
    """
    ops = _ops(tensor, "gather")
    index = ops.as_indices(indices, tensor)
    return ops.gather(tensor, ops.squeeze(index, None))


def gather_from_batch(tensor: Tensor, indices: Any) -> Tensor:
    """Return, for every sample ``i`` of a batch, the entry ``tensor[i, indices[i]]``: shape ``(batch, d2, ...)``.

    Useful to keep only the output of each sample's true class (for gradients of it, say).

    Args:
        tensor: A batch shaped ``(batch, d1, ..., dn)``: a torch / TF tensor or numpy array.
        indices: One integer per sample, shaped ``(batch,)`` or ``(batch, 1)``, of any supported framework.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``tensor`` has fewer than 2 axes or ``indices`` does not hold one index per sample.
    """
    ops, shape = _ops(tensor, "gather_from_batch"), _shape(tensor)
    if shape is not None and len(shape) < 2:
        raise ValueError(f"gather_from_batch: tensor of shape {list(shape)} has no axis to gather from; it needs "
                         f"a shape (batch, d1, ...) with at least 2 axes.")
    index = ops.as_indices(indices, tensor)
    index_shape = _shape(index)
    if shape is not None and index_shape is not None and None not in index_shape and shape[0] is not None and (
            math.prod(index_shape) != shape[0] or len(index_shape) > 2):
        raise ValueError(f"gather_from_batch: indices of shape {list(index_shape)} do not match a batch of "
                         f"{shape[0]}; give one index per sample, shaped ({shape[0]},) or ({shape[0]}, 1).")
    # A reshape rather than FastEstimator's squeeze, so that a batch of one keeps its batch axis.
    return ops.gather_from_batch(tensor, ops.reshape(index, [-1]))


def flip(tensor: Tensor, axis: int | Sequence[int]) -> Tensor:
    """Return ``tensor`` with the order of its elements reversed along ``axis``: ``[[0, 1], [2, 3]]`` flipped
    along axis 0 gives ``[[2, 3], [0, 1]]``, along ``[0, 1]`` ``[[3, 2], [1, 0]]``.

    Args:
        tensor: A torch / TF tensor or numpy array with n axes.
        axis: The axis, or list of axes, to reverse, each in ``[-n, n)``.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If an axis does not exist.
    """
    ops, shape = _ops(tensor, "flip"), _shape(tensor)
    axes = (int(axis),) if isinstance(axis, numbers.Integral) else tuple(int(a) for a in axis)
    if shape is not None and any(not -len(shape) <= a < len(shape) for a in axes):
        raise ValueError(f"flip: axis {axis!r} does not exist in a tensor of shape {list(shape)}; valid choices are "
                         f"{list(range(-len(shape), len(shape)))}.")
    return ops.flip(tensor, axes)


def transpose(tensor: Tensor) -> Tensor:
    """Return ``tensor`` with its axes in reverse order (the matrix transpose for 2 axes): ``[[0, 1, 2], [3, 4, 5]]``
    gives ``[[0, 3], [1, 4], [2, 5]]``, and shape (2, 3, 4) becomes (4, 3, 2).

    Args:
        tensor: A torch / TF tensor or numpy array.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If the rank of a traced TF tensor is unknown.
    """
    ops, shape = _ops(tensor, "transpose"), _shape(tensor)
    if shape is None:
        raise ValueError("transpose: the tensor's rank is unknown (a traced TF tensor); give it a static rank with "
                         "tf.ensure_shape, or use fe_ray.backend.permute with an explicit order.")
    return ops.permute(tensor, list(range(len(shape)))[::-1])
