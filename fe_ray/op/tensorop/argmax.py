"""Argmax: the index of the largest value along an axis."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import argmax
from fe_ray.op.tensorop.tensorop import TensorOp, check_one_output_each
from fe_ray.util.base import is_int


class Argmax(TensorOp):
    """Write, for each input tensor, the int64 index of its largest value along ``axis`` (the axis is dropped).

    Args:
        inputs: Key(s) of the tensors to search.
        outputs: Key(s) of the indices, one per input.
        axis: The axis to search along. The default 0 is FastEstimator's: for a batch of class scores
            ``(N, classes)`` pass ``axis=-1`` (or 1) to get each sample's class.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the number of output keys differs from the number of input keys.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], axis: int = 0,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_one_output_each(self, "Argmax")
        if not is_int(axis):
            raise TypeError(f"Argmax axis must be an int, got {axis!r}.")
        self.axis = int(axis)
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [argmax(tensor, axis=self.axis) for tensor in data]

