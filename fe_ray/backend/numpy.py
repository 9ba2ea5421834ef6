"""The numpy backend: tensor helpers for CPU arrays (pipelines, pops, slicing on the driver)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fe_ray.util import map_nested


def to_tensor(data: Any) -> Any:
    """Convert (nested) tensors/arrays to numpy arrays."""
    return to_numpy(data)


def to_numpy(data: Any) -> Any:
    """Convert (nested) tensors/arrays to numpy arrays; non-array leaves pass through."""
    return map_nested(_to_numpy_leaf, data)


def _to_numpy_leaf(data: Any) -> Any:
    if isinstance(data, np.ndarray):
        return data
    if hasattr(data, "numpy"):
        detach = getattr(data, "detach", None)
        value = detach().cpu() if detach is not None else data
        if detach is not None and str(value.dtype) == "torch.bfloat16":
            value = value.float()  # numpy has no bfloat16 (torch CPU autocast makes it); float32 holds it exactly
        return value.numpy()
    return data


def reduce_mean(tensor: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    return np.mean(tensor, axis=axis if axis is None or isinstance(axis, int) else tuple(axis), keepdims=keepdims)


def concat(tensors: list[Any], axis: int = 0) -> Any:
    return np.concatenate(tensors, axis=axis)


def stack(tensors: list[Any], axis: int = 0) -> Any:
    return np.stack(tensors, axis=axis)
