"""What the TensorOps scoring a prediction against a ground truth share: checking that they read the pair of keys,
and the optional batch mean of their per-sample losses."""

from __future__ import annotations

from typing import Any

from fe_ray.backend import reduce_mean
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.tensorop import TensorOp


def check_pair(op: TensorOp, name: str) -> None:
    """Raise a ValueError unless ``op`` reads exactly ``(prediction_key, ground_truth_key)``."""
    if len(op.inputs) != 2 or not op.in_list:
        raise ValueError(f"{name} needs inputs (prediction_key, ground_truth_key), got {op.inputs}; pass a tuple of "
                         "two keys, e.g. inputs=('y_pred', 'y').")


def average_if(op: LossOp, loss: Any) -> Any:
    """``loss`` averaged over every element when the op's ``average_loss`` is set, else as it is."""
    if not op.average_loss:
        return loss
    return reduce_mean(loss)
