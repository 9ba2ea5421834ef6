"""Tensor and batch helpers of FastEstimator's ``fe.util``: conversion to numpy, detaching and moving torch tensors
inside nested containers, type and shape descriptions, and padding ragged samples.

torch and TensorFlow are never imported here: a tensor of either can only exist once its framework is loaded, so
the checks look the framework up in ``sys.modules``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import numpy as np

from fe_ray.util.text import strip_prefix, strip_suffix


def _torch_tensor_type() -> type | None:
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else None


def _is_framework_tensor(data: Any) -> bool:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor):
        return True
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(data, (tf.Tensor, tf.Variable))


def to_number(data: Any) -> np.ndarray:
    """Convert one value to a numpy array: a torch tensor (detached, moved to the CPU), a TF tensor, a numpy array
    (copied), or a Python number / list / string (``to_number(5)`` is ``np.array(5)``, ``to_number("a")`` a 0-d
    string array whose ``.item()`` gives the string back).

    Unlike :func:`fe_ray.backend.to_number`, which converts the tensors inside nested dicts / lists and leaves
    everything else alone, this always returns an ndarray, as FastEstimator's ``fe.util.to_number`` does.
    """
    if _is_framework_tensor(data):
        from fe_ray.backend import to_number as backend_to_number

        data = backend_to_number(data)
    return np.array(data)


def _map_containers(fn: Callable[[Any], Any], data: Any) -> Any:
    """Apply ``fn`` to each leaf of nested dicts, lists, tuples and sets, rebuilding the containers."""
    if isinstance(data, dict):
        return {key: _map_containers(fn, value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple takes its fields as arguments
        return type(data)(*(_map_containers(fn, value) for value in data))
    if isinstance(data, (list, tuple, set)):
        return type(data)(_map_containers(fn, value) for value in data)
    return fn(data)


def detach_tensors(data: Any) -> Any:
    """Return ``data`` with every torch tensor inside it (nested dicts, lists, tuples, sets) detached from the
    autograd graph; other values are kept as they are.

    TensorFlow tensors keep no link to a graph outside a ``GradientTape``'s recording, so they pass unchanged.
    """
    tensor_type = _torch_tensor_type()
    if tensor_type is None:  # torch not loaded: there is no torch tensor to detach
        return data
    return _map_containers(lambda leaf: leaf.detach() if isinstance(leaf, tensor_type) else leaf, data)


def move_tensors_to_device(data: Any, device: Any) -> Any:
    """Return ``data`` with every torch tensor inside it (nested dicts, lists, tuples, sets) moved to ``device``
    (``"cpu"``, ``"cuda:0"``, a ``torch.device``); other values are kept as they are.

    TensorFlow places tensors itself (``tf.device`` scopes), so TF tensors pass unchanged.
    """
    tensor_type = _torch_tensor_type()
    if tensor_type is None:
        return data
    return _map_containers(lambda leaf: leaf.to(device) if isinstance(leaf, tensor_type) else leaf, data)


def get_type(obj: Any) -> str:
    """Describe the data type of ``obj`` for a summary: a tensor's or array's dtype, ``List[...]`` of the first
    element for a non-empty list / tuple, else the class name.

    ``get_type(np.ones(3, dtype="int32"))`` is ``"int32"``, ``get_type(torch.ones(2))`` ``"torch.float32"``,
    ``get_type([[1]])`` ``"List[List[int]]"``, ``get_type({"a": 1})`` ``"dict"``. Only the first element of a
    list is inspected, so ``[1, "a"]`` gives ``"List[int]"``.
    """
    if hasattr(obj, "dtype"):
        return str(obj.dtype)
    if isinstance(obj, (list, tuple)) and obj:
        return f"List[{get_type(obj[0])}]"
    # str(type) is "<class 'module.Name'>" (no module for builtins): keep the dotted name.
    return strip_suffix(strip_prefix(str(type(obj)), "<class '"), "'>") or ""


def get_shape(obj: Any) -> list[int | None]:
    """Describe the shape of ``obj``, treating a list / tuple of arrays as a batch with a ragged first axis.

    * An array or tensor: its shape as a list (``[12, 22, 11]``; TF's unknown sizes are None).
    * A list / tuple: ``[None]`` followed by its elements' common shape, where each axis on which the elements
      disagree is None (``[ones((12, 22, 11)), ones((12, 22, 4))]`` gives ``[None, 12, 22, None]``). Elements of
      different ranks give just ``[None]``.
    * Anything else (a number, a dict): ``[]``.

    This is FastEstimator's ``fe.util.get_shape``; :func:`fe_ray.backend.get_shape` is the different
    ``fe.backend.get_shape`` (one tensor, a tuple).
    """
    if hasattr(obj, "shape"):
        return [None if size is None else int(size) for size in obj.shape]
    if not isinstance(obj, (list, tuple)):
        return []
    shapes = [get_shape(item) for item in obj]
    if not shapes or len({len(shape) for shape in shapes}) > 1:
        return [None]
    common: list[int | None] = list(shapes[0])
    for shape in shapes[1:]:
        common = [size if size == other else None for size, other in zip(common, shape)]
    return [None, *common]


def pad_data(data: np.ndarray, target_shape: Sequence[int], pad_value: float) -> np.ndarray:
    """Pad ``data`` with ``pad_value`` at the end of every axis up to ``target_shape``.

    ``pad_data(np.ones((1, 2)), (3, 3), -2)`` gives ``[[1, 1, -2], [-2, -2, -2], [-2, -2, -2]]``.

    Raises:
        ValueError: If ``target_shape`` has another rank than ``data``, or is smaller on some axis (padding only
            grows an array; crop it first).
    """
    data = np.asarray(data)
    target = tuple(int(size) for size in target_shape)
    if len(target) != data.ndim or any(want < have for have, want in zip(data.shape, target)):
        raise ValueError(f"pad_data: cannot pad an array of shape {list(data.shape)} to {list(target)}; the target "
                         f"needs the same number of axes and at least the array's size on each.")
    return np.pad(data, [(0, want - have) for have, want in zip(data.shape, target)], mode="constant",
                  constant_values=pad_value)


def pad_batch(batch: list[MutableMapping[str, Any]], pad_value: float) -> None:
    """Pad the samples of a batch in place so that each key's arrays share one shape (the largest on each axis).

    ``[{"x": ones((2, 2))}, {"x": ones((3, 1))}]`` becomes two ``(3, 2)`` arrays, filled with ``pad_value`` at the
    end of each axis. Keys whose values already agree, and values without a shape (numbers), are left alone.

    Args:
        batch: The samples, dicts with the same keys holding numpy arrays. Modified in place.
        pad_value: The fill value.

    Raises:
        ValueError: If the samples have different keys, or one key's arrays differ in rank (FastEstimator raises
            AssertionError for both).
        TypeError: If a value that needs padding is not a numpy array (convert torch / TF tensors first).
    """
    if not batch:
        return
    keys = batch[0].keys()
    for position, sample in enumerate(batch):
        if sample.keys() != keys:
            raise ValueError(f"pad_batch: samples have different keys, {sorted(keys)} vs {sorted(sample.keys())} "
                             f"(sample {position}); every sample must hold the same keys.")
    for key in keys:
        shapes = [tuple(sample[key].shape) for sample in batch if hasattr(sample[key], "shape")]
        if len(set(shapes)) < 2:
            continue
        if len({len(shape) for shape in shapes}) > 1:
            raise ValueError(f"pad_batch: key {key!r} holds arrays of different ranks {sorted(set(shapes))}; "
                             f"padding only fills axes, reshape them to one rank first.")
        target = np.max(np.array(shapes), axis=0)
        for position, sample in enumerate(batch):
            value = sample[key]
            if not isinstance(value, np.ndarray):
                raise TypeError(f"pad_batch: key {key!r} of sample {position} is a {type(value).__name__}, not a "
                                f"numpy array; convert it first (e.g. fe_ray.util.to_number).")
            sample[key] = pad_data(value, target, pad_value)
