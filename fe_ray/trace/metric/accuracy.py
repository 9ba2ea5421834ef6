"""Accuracy: the fraction of correctly classified samples over an epoch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.trace import Data, Trace


class Accuracy(Trace):
    """Classification accuracy, accumulated over the batches of an epoch and logged at its end.

    Labels may be class indices or one-hot/probability vectors; predictions may be class scores (argmax over the
    last axis) or, for binary tasks, a single probability (rounded).

    Args:
        true_key: Key of the ground-truth labels.
        pred_key: Key of the predictions.
        mode: Mode(s) in which to compute it.
        ds_id: Dataset id(s) in which to compute it; None for all.
        output_name: Key under which the accuracy is logged.

    Raises:
        ValueError: At a batch where labels and predictions hold different numbers of samples.
    """

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "accuracy") -> None:
        super().__init__(inputs=[true_key, pred_key], outputs=output_name, mode=mode, ds_id=ds_id)
        self.true_key = true_key
        self.pred_key = pred_key
        self.correct = 0
        self.total = 0

    def on_epoch_begin(self, data: Data) -> None:
        self.correct = 0
        self.total = 0

    def on_batch_end(self, data: Data) -> None:
        y_true = np.asarray(to_number(data[self.true_key]))
        y_pred = np.asarray(to_number(data[self.pred_key]))
        if y_true.ndim > 1 and y_true.shape[-1] > 1:
            y_true = np.argmax(y_true, axis=-1)
        if y_pred.ndim > 1 and y_pred.shape[-1] > 1:
            y_pred = np.argmax(y_pred, axis=-1)
        else:
            y_pred = np.round(y_pred)
        if y_pred.size != y_true.size:
            raise ValueError(f"Accuracy got {y_true.size} labels ({self.true_key!r}) but {y_pred.size} predictions "
                             f"({self.pred_key!r}); they must describe the same samples.")
        self.correct += int(np.sum(y_pred.ravel() == y_true.ravel()))
        self.total += int(y_pred.size)

    def on_epoch_end(self, data: Data) -> None:
        data.write_with_log(self.outputs[0], self.correct / self.total if self.total else float("nan"))

    def state_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "total": self.total}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.correct = int(state["correct"])
        self.total = int(state["total"])
