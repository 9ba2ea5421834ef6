"""Hinge: the hinge loss of scores against -1 / 1 labels."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import hinge
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.loss.pair import average_if, check_pair


class Hinge(LossOp):
    """Hinge loss ``max(1 - y_true * y_pred, 0)``, averaged over the last axis into one loss per sample.

    Labels are expected as -1 / 1 (0 / 1 labels would make every negative sample cost 1 whatever its score). The
    loss is computed and returned in float32, also for float16 / bfloat16 (mixed-precision) scores.

    Args:
        inputs: Keys ``(prediction, ground_truth)``.
        outputs: Key of the loss.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all.
        average_loss: Return the batch mean; False returns one loss per sample.

    Raises:
        ValueError: If ``inputs`` is not a pair of keys.
    """

    def __init__(self, inputs: Iterable[str], outputs: str, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None, average_loss: bool = True) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, average_loss=average_loss)
        check_pair(self, "Hinge")

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        return average_if(self, hinge(y_true=y_true, y_pred=y_pred))

