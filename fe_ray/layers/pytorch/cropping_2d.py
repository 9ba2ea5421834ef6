"""Cropping2D: trim rows and columns off the edges of channels-first image batches (PyTorch)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any, Union

import torch
from torch import nn

_Side = Union[int, Sequence[int]]


def _amount(value: Any) -> bool:
    """Whether ``value`` is a non-negative int (the amount cut off one side)."""
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= 0


def _pair(value: Any, what: str, cropping: Any) -> tuple[int, int]:
    """One axis's (before, after) amounts from an int n (n, n) or a pair of ints."""
    if _amount(value):
        return int(value), int(value)
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2 and all(
            _amount(v) for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"Cropping2D {what} cropping must be a non-negative int or a pair of them (before, after), got "
                     f"{value!r} in cropping={cropping!r}; e.g. cropping=2, (1, 3) or ((1, 2), (0, 3)).")


class Cropping2D(nn.Module):
    """Cut rows off the top and bottom and columns off the left and right of ``(batch, channels, height, width)``
    tensors, as FastEstimator's ``fe.layers.pytorch.Cropping2D`` (the PyTorch counterpart of Keras' Cropping2D).

    ``cropping`` gives the amounts: an int ``n`` cuts ``n`` from all four sides; ``(h, w)`` cuts ``h`` rows from the
    top and from the bottom and ``w`` columns from the left and from the right; ``((top, bottom), (left, right))``
    gives each side, and either half may be a single int for both of its sides. For a 10x10 input,
    ``Cropping2D(((1, 4), 4))`` keeps rows 1-5 and columns 4-5.

    Differences from FastEstimator: a zero amount cuts nothing (FastEstimator's slice ``x[a:-0]`` returned an empty
    tensor, so ``Cropping2D()`` emptied its input); negative or non-int amounts raise a ValueError, and so do inputs
    that are not 4-D or smaller than the crop, where FastEstimator returned an empty or wrongly cut tensor.

    Args:
        cropping: How much to cut off each side, as above.

    Raises:
        ValueError: If ``cropping`` is not one of the forms above with non-negative ints; when called, if the input
            is not 4-D or the crop leaves no rows or columns.
    """

    def __init__(self, cropping: int | tuple[_Side, _Side] = 0) -> None:
        super().__init__()
        if _amount(cropping):
            self.cropping = ((int(cropping), int(cropping)), (int(cropping), int(cropping)))
        elif isinstance(cropping, Sequence) and not isinstance(cropping, str) and len(cropping) == 2:
            self.cropping = (_pair(cropping[0], "height", cropping), _pair(cropping[1], "width", cropping))
        else:
            raise ValueError(f"Cropping2D cropping must be an int, a pair (height, width) or a pair of pairs "
                             f"((top, bottom), (left, right)) of non-negative ints, got {cropping!r}.")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(f"Cropping2D needs (batch, channels, height, width) inputs, got shape {list(x.shape)}.")
        (top, bottom), (left, right) = self.cropping
        height, width = x.shape[2], x.shape[3]
        if top + bottom >= height or left + right >= width:
            raise ValueError(f"Cropping2D cropping {self.cropping} leaves nothing of a {height}x{width} input; "
                             "crop less or feed larger images.")
        # Explicit end indices: x[a:-0] would be empty.
        return x[:, :, top:height - bottom, left:width - right]

    def extra_repr(self) -> str:
        return f"cropping={self.cropping}"
