"""Accuracy: the fraction of correctly classified samples over an epoch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.trace import Data, Trace, per_ds_keys


class Accuracy(Trace):
    """Classification accuracy, accumulated over the batches of an epoch and logged at its end.

    Labels may be class indices or one-hot/probability vectors; predictions may be class scores (argmax over the
    last axis) or, for binary tasks, a single probability (rounded) or logit (with ``from_logits``).

    When a mode has several datasets (a ``{ds_id: dataset}`` dict in the Pipeline), the accuracy of each is also
    logged as ``<output_name>|<ds_id>``, next to the one over all of them.

    Args:
        true_key: Key of the ground-truth labels.
        pred_key: Key of the predictions.
        mode: Mode(s) in which to compute it.
        ds_id: Dataset id(s) in which to compute it; None for all.
        from_logits: Whether single-column (binary) predictions are logits: a sigmoid is applied before rounding.
        output_name: Key under which the accuracy is logged.
        per_ds: Whether to log the per-dataset accuracies too (never when ``output_name`` contains '|').

    Raises:
        ValueError: At a batch where labels and predictions hold different numbers of samples.
    """

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, from_logits: bool = False, output_name: str = "accuracy",
                 per_ds: bool = True) -> None:
        super().__init__(inputs=[true_key, pred_key], outputs=output_name, mode=mode, ds_id=ds_id)
        self.true_key = true_key
        self.pred_key = pred_key
        self.from_logits = from_logits
        # A '|' in the name already reads as '<key>|<ds_id>': a per-dataset key would be ambiguous.
        self.per_ds = bool(per_ds) and "|" not in output_name
        self.correct = 0
        self.total = 0
        self.ds_counts: dict[str, list[int]] = {}  # ds_id -> [correct, total] in this epoch

    def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
        outputs = super().get_outputs(ds_ids)
        if self.per_ds:
            outputs += per_ds_keys(self.outputs[:1], ds_ids)
        return outputs

    def on_epoch_begin(self, data: Data) -> None:
        self.correct = 0
        self.total = 0
        self.ds_counts = {}

    def on_batch_end(self, data: Data) -> None:
        y_true = np.asarray(to_number(data[self.true_key]))
        y_pred = np.asarray(to_number(data[self.pred_key]))
        if y_true.ndim > 1 and y_true.shape[-1] > 1:
            y_true = np.argmax(y_true, axis=-1)
        if y_pred.ndim > 1 and y_pred.shape[-1] > 1:
            y_pred = np.argmax(y_pred, axis=-1)
        else:
            if self.from_logits:
                y_pred = 1.0 / (1.0 + np.exp(-y_pred.astype(np.float64)))
            y_pred = np.round(y_pred)
        if y_pred.size != y_true.size:
            raise ValueError(f"Accuracy got {y_true.size} labels ({self.true_key!r}) but {y_pred.size} predictions "
                             f"({self.pred_key!r}); they must describe the same samples.")
        hits = y_pred.ravel() == y_true.ravel()
        correct, total = int(np.sum(hits)), int(y_pred.size)
        self.correct += correct
        self.total += total
        # '' is the only dataset of a mode without a ds_id dict: the overall value says it all.
        ds_id = getattr(getattr(self, "system", None), "ds_id", "")
        per_ds = self.per_ds and bool(ds_id)
        if per_ds:
            counts = self.ds_counts.setdefault(ds_id, [0, 0])
            counts[0] += correct
            counts[1] += total
        # Each sample's 0/1 for detailed loggers (CSVLogger's instance rows), as FastEstimator writes it: under the
        # per-dataset key when there are several datasets (the more precise name).
        data.write_per_instance_log(f"{self.outputs[0]}|{ds_id}" if per_ds else self.outputs[0],
                                    hits.astype(np.int8))

    def on_epoch_end(self, data: Data) -> None:
        for ds_id, (correct, total) in self.ds_counts.items():
            data.write_with_log(f"{self.outputs[0]}|{ds_id}", correct / total if total else float("nan"))
        data.write_with_log(self.outputs[0], self.correct / self.total if self.total else float("nan"))

    def state_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "total": self.total,
                "ds_counts": {ds_id: list(counts) for ds_id, counts in self.ds_counts.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.correct = int(state["correct"])
        self.total = int(state["total"])
        self.ds_counts = {str(ds_id): [int(c) for c in counts] for ds_id, counts in state.get("ds_counts", {}).items()}
