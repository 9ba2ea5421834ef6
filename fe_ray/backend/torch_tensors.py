"""Conversions between torch tensors and numpy arrays (nested in dicts, lists and tuples) for the torch backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fe_ray.util import map_nested


def to_tensor(data: Any) -> Any:
    """Convert numpy arrays / TF tensors (nested in dicts, lists, tuples) to torch tensors.

    Values torch cannot represent (strings, object arrays, plain Python objects) are passed through unchanged.
    """
    if type(data) is dict:
        # The usual input, a step's batch: a flat dict of arrays. Its values are converted here, each nested one
        # walked as map_nested would: the generic walk's call and type checks per key cost a step 0.3 us a key.
        return {key: map_nested(_to_tensor_leaf, value) if isinstance(value, _CONTAINERS) else _to_tensor_leaf(value)
                for key, value in data.items()}
    return map_nested(_to_tensor_leaf, data)


#: The containers :func:`~fe_ray.util.map_nested` walks into.
_CONTAINERS = (dict, list, tuple)


def _to_tensor_leaf(data: Any) -> Any:
    if isinstance(data, torch.Tensor):
        return data
    if not isinstance(data, (np.ndarray, np.generic)):
        if not hasattr(data, "numpy"):
            return data  # strings, numbers and other Python objects
        data = data.numpy()  # a TF tensor (or similar): go through numpy
    if isinstance(data, (np.ndarray, np.generic)):
        if data.dtype.kind in "OUS":
            return data
        # Both share the array's memory. ascontiguousarray fixes negative strides that torch rejects, but turns a
        # 0-d value into shape (1,), so scalars (a replica's loss) keep their shape through asarray. from_numpy
        # is a third of as_tensor's cost (0.6 against 1.6 us), which every key of every batch pays.
        data = np.ascontiguousarray(data) if data.ndim else np.asarray(data)
        if not data.dtype.isnative:  # e.g. big-endian arrays read from files: torch takes native byte order only
            data = data.astype(data.dtype.newbyteorder("="))
        try:
            return torch.from_numpy(data)
        except TypeError:  # a dtype from_numpy does not take
            return torch.as_tensor(data)
    return data


def to_numpy(data: Any) -> Any:
    """Convert torch tensors (nested in dicts, lists, tuples) to numpy arrays on the CPU."""
    return map_nested(_to_numpy_leaf, data)


def _to_numpy_leaf(data: Any) -> Any:
    if isinstance(data, torch.Tensor):
        tensor = data.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()  # numpy has no bfloat16; float32 holds every bfloat16 value exactly
        return tensor.numpy()
    return data


__all__ = ["to_numpy", "to_tensor"]
