"""MeanSquaredError: squared error averaged over the last axis, then (optionally) over the batch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.op.tensorop.loss.loss import LossOp


class MeanSquaredError(LossOp):
    """Mean squared error between a prediction and a target of the same shape.

    The loss is computed and returned in float32, also for float16 / bfloat16 (mixed-precision) predictions, whose
    squared errors could otherwise overflow or lose precision.

    Args:
        inputs: Keys ``(prediction, ground_truth)``.
        outputs: Key of the loss.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all.
        average_loss: Return the batch mean; False returns per-sample losses (mean over the last axis).
    """

    def __init__(self, inputs: Iterable[str], outputs: str, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None, average_loss: bool = True) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, average_loss=average_loss)
        if len(self.inputs) != 2:
            raise ValueError(f"MeanSquaredError needs inputs (prediction_key, ground_truth_key), got {self.inputs}.")

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        return self._get_backend(y_pred).mean_squared_error(y_pred, y_true, average=self.average_loss)
