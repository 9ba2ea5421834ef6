"""Average: the element-wise mean of several tensors."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.op.tensorop.tensorop import TensorOp


class Average(TensorOp):
    """Write the element-wise mean of the input tensors (e.g. several models' predictions, or several losses).

    The tensors must share a framework and broadcast against each other. The sum is divided with each framework's
    true division, so integer inputs give a floating-point mean (float32 in torch, float64 in TF), one input key
    included, as in FastEstimator.

    Args:
        inputs: The keys of the tensors to average.
        outputs: The key of the mean.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If there is no input key or not exactly one output key.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not self.inputs or len(self.outputs) != 1:
            raise ValueError(f"Average needs at least one input key and exactly one output key, got inputs="
                             f"{self.inputs} and outputs={self.outputs}.")
        # Always a list in, one value out, however the keys were given.
        self.in_list, self.out_list = True, False

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        total = data[0]
        for tensor in data[1:]:
            total = total + tensor
        return total / len(data)
