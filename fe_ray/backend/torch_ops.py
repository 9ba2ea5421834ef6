"""PyTorch implementations of the FastEstimator-style tensor helpers of :mod:`fe_ray.backend.tensor_ops`.

Imported only when a torch tensor reaches one of those helpers. Arguments arrive validated: axes as an int, a
tuple or None, and dtypes as canonical names such as ``"float32"``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor."""
    return isinstance(value, torch.Tensor)


def _dtype(name: str | None) -> torch.dtype | None:
    return None if name is None else getattr(torch, name)


def known_dtype(name: str) -> bool:
    """Whether torch has a dtype of this name (``torch.bfloat16`` for 'bfloat16', say)."""
    return isinstance(getattr(torch, name, None), torch.dtype)


def _all_axes(tensor: torch.Tensor, axis: int | tuple[int, ...] | None) -> int | tuple[int, ...] | None:
    """``axis``, or every axis of ``tensor`` when None (None again for a 0-d tensor)."""
    if axis is None and tensor.dim() > 0:
        return tuple(range(tensor.dim()))
    return axis


def _no_axes(axis: int | tuple[int, ...] | None) -> bool:
    """Whether ``axis`` lists no axis at all (``[]``).

    ``torch.amax`` / ``amin`` / ``mean`` reduce every axis for ``dim=()``; FastEstimator's reduce_max / min / mean
    (a loop over the listed axes), TF and numpy reduce none. torch's sum and std keep torch's meaning, as
    FastEstimator's pass the empty list on to them.
    """
    return axis == ()


def argmax(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    """Index (int64) of the largest element along ``axis``."""
    return torch.argmax(tensor, dim=axis)


def reduce_sum(tensor: torch.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> torch.Tensor:
    """Sum over ``axis`` (every axis when None)."""
    dims = _all_axes(tensor, axis)
    return tensor.sum() if dims is None else torch.sum(tensor, dim=dims, keepdim=keepdims)


def reduce_max(tensor: torch.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> torch.Tensor:
    """Maximum over ``axis`` (every axis when None, none when empty)."""
    if _no_axes(axis):  # each element is its own extreme
        return tensor.clone()
    dims = _all_axes(tensor, axis)
    return tensor.amax() if dims is None else torch.amax(tensor, dim=dims, keepdim=keepdims)


def reduce_min(tensor: torch.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> torch.Tensor:
    """Minimum over ``axis`` (every axis when None, none when empty)."""
    if _no_axes(axis):  # each element is its own extreme
        return tensor.clone()
    dims = _all_axes(tensor, axis)
    return tensor.amin() if dims is None else torch.amin(tensor, dim=dims, keepdim=keepdims)


def squeeze(tensor: torch.Tensor, axis: int | tuple[int, ...] | None) -> torch.Tensor:
    """Drop ``axis`` (or every axis of length 1 when None); torch keeps the listed axes that are longer than 1."""
    return torch.squeeze(tensor) if axis is None else torch.squeeze(tensor, dim=axis)


def expand_dims(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    """Insert a new axis of length 1 at ``axis``."""
    return torch.unsqueeze(tensor, dim=axis)


def _bound(value: Any) -> Any:
    """A one-element tensor bound as a Python number (``clamp`` then accepts it beside a number)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


def clip_by_value(tensor: torch.Tensor, min_value: Any, max_value: Any) -> torch.Tensor:
    """Limit the values to ``[min_value, max_value]``; a None bound leaves that side open."""
    low, high = _bound(min_value), _bound(max_value)
    if isinstance(low, torch.Tensor) or isinstance(high, torch.Tensor):  # element-wise bounds: one side at a time
        if low is not None:
            tensor = torch.maximum(tensor, torch.as_tensor(low, dtype=tensor.dtype, device=tensor.device))
        if high is not None:
            tensor = torch.minimum(tensor, torch.as_tensor(high, dtype=tensor.dtype, device=tensor.device))
        return tensor
    return torch.clamp(tensor, min=low, max=high)


def cast(data: Any, dtype: str) -> torch.Tensor:
    """``data`` (a torch tensor) converted to the canonical dtype name ``dtype``."""
    return data.to(_dtype(dtype))


def cast_like(data: Any, reference: torch.Tensor) -> torch.Tensor:
    """``data`` as a torch tensor with the dtype and device of ``reference``."""
    if isinstance(data, torch.Tensor):
        return data.to(dtype=reference.dtype)
    return torch.as_tensor(np.asarray(data), device=reference.device).to(reference.dtype)


def zeros_like(tensor: torch.Tensor, dtype: str | None) -> torch.Tensor:
    """Zeros shaped like ``tensor`` on its device, in ``dtype`` (the tensor's own when None)."""
    return torch.zeros_like(tensor, dtype=_dtype(dtype))


def ones_like(tensor: torch.Tensor, dtype: str | None) -> torch.Tensor:
    """Ones shaped like ``tensor`` on its device, in ``dtype`` (the tensor's own when None)."""
    return torch.ones_like(tensor, dtype=_dtype(dtype))


def permute(tensor: torch.Tensor, permutation: list[int]) -> torch.Tensor:
    """Reorder the axes so that output axis ``i`` is input axis ``permutation[i]``."""
    return tensor.permute(*permutation)


def reshape(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """The elements of ``tensor`` in ``shape`` (one entry may be -1)."""
    return torch.reshape(tensor, tuple(shape))


def tensor_round(tensor: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer, halves to even."""
    return torch.round(tensor)


def abs(tensor: torch.Tensor) -> torch.Tensor:  # FastEstimator's name, shadowing the builtin here only
    """Element-wise absolute value."""
    return torch.abs(tensor)


def exp(tensor: torch.Tensor) -> torch.Tensor:
    """Element-wise e ** x (integer input gives float32)."""
    return torch.exp(tensor)


def maximum(tensor1: torch.Tensor, tensor2: torch.Tensor) -> torch.Tensor:
    """Element-wise larger of two tensors (broadcasting)."""
    return torch.maximum(tensor1, tensor2)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Matrix product (batched over leading axes)."""
    return torch.matmul(a, b)


def where(condition: torch.Tensor, yes: Any, no: Any) -> torch.Tensor:
    """``yes`` where ``condition`` holds, else ``no``; a number beside a tensor takes that tensor's dtype."""
    if condition.dtype != torch.bool:
        condition = condition.bool()
    if isinstance(yes, torch.Tensor) and not isinstance(no, torch.Tensor):
        no = cast_like(no, yes)
    elif isinstance(no, torch.Tensor) and not isinstance(yes, torch.Tensor):
        yes = cast_like(yes, no)
    elif isinstance(yes, numbers.Number) and isinstance(no, numbers.Number):
        # Two numbers (numpy scalars as Python ones): torch.where types them as torch does, so 1.0 / 0.0 give its
        # default float dtype (float32), as FastEstimator's plain torch.where does, where numpy would give float64.
        return torch.where(condition, _python_number(yes), _python_number(no))
    elif not isinstance(yes, torch.Tensor):  # arrays: tensors of their own dtype, on the condition's device
        yes = torch.as_tensor(np.asarray(yes), device=condition.device)
        no = torch.as_tensor(np.asarray(no), device=condition.device)
    return torch.where(condition, yes, no)


def _python_number(value: numbers.Number) -> Any:
    """A numpy scalar as the Python number it holds; Python numbers unchanged."""
    return value.item() if isinstance(value, np.generic) else value


# ------------------------------------------------------------- helpers of tensor_math / tensor_random / tensor_info
def sign(tensor: torch.Tensor) -> torch.Tensor:
    """Element-wise -1 / 0 / 1, in the input dtype."""
    return torch.sign(tensor)


def tensor_pow(tensor: torch.Tensor, power: int | float | np.ndarray | torch.Tensor) -> torch.Tensor:
    """Element-wise ``tensor ** power`` (integer input with a fractional power gives float32); ``power`` may be a
    tensor or array broadcasting against ``tensor``."""
    if isinstance(power, np.ndarray):  # torch.pow takes numbers and tensors only
        power = torch.as_tensor(power, device=tensor.device)
    return torch.pow(tensor, power)


def tensor_sqrt(tensor: torch.Tensor) -> torch.Tensor:
    """Element-wise square root (integer input gives float32)."""
    return torch.sqrt(tensor)


def roll(tensor: torch.Tensor, shift: int | tuple[int, ...], axis: int | tuple[int, ...]) -> torch.Tensor:
    """Shift the elements along ``axis`` by ``shift`` places, wrapping around."""
    return torch.roll(tensor, shifts=shift, dims=axis)


def as_indices(indices: Any, reference: torch.Tensor) -> torch.Tensor:
    """``indices`` (any framework, or numpy) as an int64 tensor on ``reference``'s device."""
    if not isinstance(indices, torch.Tensor):  # a copy: TF tensors convert to read-only arrays torch warns about
        indices = torch.as_tensor(np.array(indices))
    return indices.to(device=reference.device, dtype=torch.int64)


def gather(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The rows ``tensor[indices]`` (along axis 0)."""
    return tensor[indices]


def gather_from_batch(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``tensor[i, indices[i]]`` for every sample ``i``."""
    return tensor[torch.arange(tensor.shape[0], device=tensor.device), indices]


def random_normal_like(tensor: torch.Tensor, mean: float, std: float, dtype: str) -> torch.Tensor:
    """Normal noise shaped like ``tensor`` on its device, drawn from torch's global generator."""
    return torch.randn(tensor.shape, dtype=_dtype(dtype), device=tensor.device) * std + mean


def random_uniform_like(tensor: torch.Tensor, minval: float, maxval: float, dtype: str) -> torch.Tensor:
    """Uniform noise in ``[minval, maxval)`` shaped like ``tensor`` on its device."""
    return torch.rand(tensor.shape, dtype=_dtype(dtype), device=tensor.device) * (maxval - minval) + minval


def reduce_std(tensor: torch.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> torch.Tensor:
    """Population standard deviation (divisor n, as numpy) over ``axis``; integer input is computed in float32."""
    if not (tensor.is_floating_point() or tensor.is_complex()):
        tensor = tensor.float()
    dims = _all_axes(tensor, axis)
    if dims is None:
        return tensor.std(correction=0)
    return torch.std(tensor, dim=dims, correction=0, keepdim=keepdims)


def has_nan_or_inf(tensor: torch.Tensor) -> bool:
    """Whether any element is NaN or +-inf (never for integer / boolean tensors)."""
    if not (tensor.is_floating_point() or tensor.is_complex()):
        return False
    return not bool(torch.isfinite(tensor).all())


def is_floating(tensor: torch.Tensor) -> bool:
    """Whether the tensor holds floating-point values."""
    return tensor.is_floating_point()


def dtype_of(tensor: torch.Tensor) -> str:
    """The canonical dtype name, e.g. ``"float32"`` (bfloat16 included)."""
    return str(tensor.dtype).removeprefix("torch.")


def reduce_mean(tensor: torch.Tensor, axis: int | tuple[int, ...] | None, keepdims: bool) -> torch.Tensor:
    """Mean over ``axis`` (every axis when None, none when empty)."""
    if _no_axes(axis):  # each element is its own mean (integers keep their dtype, as in FastEstimator and TF)
        return tensor.clone()
    dims = _all_axes(tensor, axis)
    return tensor.mean() if dims is None else torch.mean(tensor, dim=dims, keepdim=keepdims)


def flip(tensor: torch.Tensor, axes: tuple[int, ...]) -> torch.Tensor:
    """Reverse the element order along ``axes``."""
    return torch.flip(tensor, dims=axes)


def percentile(tensor: torch.Tensor, percentiles: list[float], axes: tuple[int, ...], keepdims: bool) -> torch.Tensor:
    """The 'lower' percentiles over ``axes`` (non-negative, sorted), stacked along a new leading axis."""
    others = [d for d in range(tensor.dim()) if d not in axes]
    kept = [tensor.shape[d] for d in others]
    # Move the reduced axes last and merge them, so one sort serves every percentile.
    ordered = torch.sort(tensor.permute(*others, *axes).reshape(*kept, -1), dim=-1).values
    count = ordered.shape[-1]
    result = torch.stack([ordered[..., math.floor(q / 100.0 * (count - 1))] for q in percentiles])
    if keepdims:
        result = result.reshape(len(percentiles), *[1 if d in axes else tensor.shape[d] for d in range(tensor.dim())])
    return result


def log1p(tensor: torch.Tensor) -> torch.Tensor:
    """Element-wise ``log(1 + x)``, accurate for small ``x``."""
    return torch.log1p(tensor)
