"""AUCScore: the area under the ROC curve of an epoch's prediction scores (scikit-learn's ``roc_auc_score``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.metric._epoch_metric import EpochMetric

AVERAGES = ("micro", "macro", "samples", "weighted")
MULTI_CLASS = ("raise", "ovr", "ovo")


class AUCScore(EpochMetric):
    """Log the area under the ROC curve of the epoch's scores, as ``sklearn.metrics.roc_auc_score`` computes it.

    Labels and scores of every batch are kept until the epoch ends (and in checkpoints), since the AUC of an epoch is
    not a function of per-batch sums. The arguments after ``output_name`` go to ``roc_auc_score`` unchanged.

    Args:
        true_key: Key of the ground truth: ``(n,)`` labels (binary or multiclass), or ``(n, n_classes)`` binary
            indicators (multilabel).
        pred_key: Key of the scores: ``(n,)`` for binary problems, ``(n, n_classes)`` otherwise.
        mode: Mode(s) in which to compute it.
        ds_id: Dataset id(s) in which to compute it; None for all.
        output_name: Key to log the score under.
        average: One of ``"micro"``, ``"macro"``, ``"samples"``, ``"weighted"``, or None (one score per class).
        sample_weight: One weight per sample of the epoch, in order, or None.
        max_fpr: If set, in (0, 1]: the standardized partial AUC over false-positive rates [0, max_fpr].
        multi_class: ``"raise"`` (scikit-learn's default: multiclass scores raise), ``"ovr"`` or ``"ovo"``.
        labels: The classes, for multiclass scores whose epoch lacks some of them.
        per_ds: With several datasets in a mode, also log ``<output_name>|<ds_id>`` per dataset.

    Raises:
        ValueError: If ``average``, ``max_fpr`` or ``multi_class`` is not one of the values above (FastEstimator's
            ``max_fpr`` check never fires; this one does); at an epoch's end, whatever ``roc_auc_score`` refuses
            (e.g. multiclass scores with ``multi_class="raise"``), with the trace named.
    """

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "auc", average: str | None = "macro",
                 sample_weight: Sequence[float] | None = None, max_fpr: float | None = None,
                 multi_class: str = "raise", labels: Sequence[Any] | None = None, per_ds: bool = True) -> None:
        if average is not None and average not in AVERAGES:
            raise ValueError(f"AUCScore average must be None or one of {list(AVERAGES)}, got {average!r}.")
        if multi_class not in MULTI_CLASS:
            raise ValueError(f"AUCScore multi_class must be one of {list(MULTI_CLASS)}, got {multi_class!r}.")
        if max_fpr is not None and not (isinstance(max_fpr, (int, float)) and 0 < max_fpr <= 1):
            raise ValueError(f"AUCScore max_fpr must be None or a number in (0, 1], got {max_fpr!r}.")
        self.average, self.max_fpr, self.multi_class = average, max_fpr, multi_class
        self.sample_weight = None if sample_weight is None else list(sample_weight)
        self.labels = None if labels is None else list(labels)
        super().__init__(true_key, pred_key, outputs=output_name, mode=mode, ds_id=ds_id, per_ds=per_ds)

    def empty(self) -> dict[str, list[np.ndarray]]:
        return {"y_true": [], "y_pred": []}

    def reduce_batch(self, y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(to_number(y_true)), np.asarray(to_number(y_pred), dtype=np.float64)

    def add(self, totals: dict[str, list[np.ndarray]], part: tuple[np.ndarray, np.ndarray]) -> None:
        totals["y_true"].append(part[0])
        totals["y_pred"].append(part[1])

    def has_data(self, totals: dict[str, list[np.ndarray]]) -> bool:
        return sum(len(part) for part in totals["y_true"]) > 0

    def compute(self, totals: dict[str, list[np.ndarray]]) -> list[Any]:
        from sklearn.metrics import roc_auc_score  # scikit-learn is a dependency; imported when an epoch ends

        y_true, y_pred = np.concatenate(totals["y_true"]), np.concatenate(totals["y_pred"])
        try:
            score = roc_auc_score(y_true, y_pred, average=self.average, sample_weight=self.sample_weight,
                                  max_fpr=self.max_fpr, multi_class=self.multi_class, labels=self.labels)
        except ValueError as err:
            raise ValueError(f"AUCScore ({self.true_key!r}, {self.pred_key!r}) could not compute the epoch's AUC over "
                             f"{len(y_true)} samples: {err}") from err
        return [score]

    def pack(self, totals: dict[str, list[np.ndarray]]) -> dict[str, Any]:
        # Joined copies: a checkpoint must not share arrays with lists that later batches keep growing.
        if not totals["y_true"]:
            return {"y_true": None, "y_pred": None}
        return {"y_true": np.concatenate(totals["y_true"]), "y_pred": np.concatenate(totals["y_pred"])}

    def unpack(self, state: Mapping[str, Any]) -> dict[str, list[np.ndarray]]:
        if state["y_true"] is None:
            return self.empty()
        return {"y_true": [np.array(state["y_true"])], "y_pred": [np.array(state["y_pred"])]}
