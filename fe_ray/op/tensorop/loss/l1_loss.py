"""L1_Loss: mean absolute error, or its smooth (Smooth L1, Huber) variants (FastEstimator's class name)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import huber, l1_loss, smooth_l1_loss
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.loss.pair import average_if, check_pair

#: The accepted ``loss_type`` values (FastEstimator's spelling).
LOSS_TYPES = ("L1", "Smooth", "Huber")


class L1_Loss(LossOp):  # noqa: N801 - FastEstimator's class name, kept so that programs port unchanged
    """The L1 loss family between a prediction and a target, averaged over the last axis into per-sample losses.

    With ``e = y_pred - y_true``, each element costs:

    * ``'L1'``: ``|e|``;
    * ``'Smooth'`` (torch's SmoothL1Loss): ``0.5 * e**2 / beta`` where ``|e| < beta``, else ``|e| - beta / 2``;
    * ``'Huber'``: ``0.5 * e**2`` where ``|e| <= beta``, else ``beta * (|e| - beta / 2)``.

    The loss is computed and returned in float32, also for float16 / bfloat16 (mixed-precision) predictions.

    Args:
        inputs: Keys ``(prediction, ground_truth)``.
        outputs: Key of the loss.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all.
        average_loss: Return the batch mean; False returns one loss per sample.
        loss_type: 'L1', 'Smooth' or 'Huber'.
        beta: Where 'Smooth' and 'Huber' turn from quadratic to linear; must be positive (unused by 'L1').

    Raises:
        ValueError: If ``inputs`` is not a pair of keys, ``loss_type`` is unknown or ``beta`` is not positive.
    """

    def __init__(self, inputs: Iterable[str], outputs: str, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None, average_loss: bool = True, loss_type: str = "L1",
                 beta: float = 1.0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, average_loss=average_loss)
        check_pair(self, "L1_Loss")
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"L1_Loss loss_type {loss_type!r} is unknown; valid choices are {list(LOSS_TYPES)} "
                             "(case-sensitive).")
        # Checked here, not at the first step, so a bad value fails when the program is built.
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
            raise ValueError(f"L1_Loss beta must be a positive number, got {beta!r}; it is the error size where the "
                             "loss turns from quadratic to linear (1.0 by default).")
        self.loss_type = loss_type
        self.beta = float(beta)

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        if self.loss_type == "L1":
            loss = l1_loss(y_true=y_true, y_pred=y_pred)
        elif self.loss_type == "Smooth":
            loss = smooth_l1_loss(y_true=y_true, y_pred=y_pred, beta=self.beta)
        else:
            loss = huber(y_true=y_true, y_pred=y_pred, beta=self.beta)
        return average_if(self, loss)
