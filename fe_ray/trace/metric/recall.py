"""Recall: of the samples of a class, the fraction predicted as that class."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.trace.metric._label_metric import AveragedScore


class Recall(AveragedScore):
    """Recall over each epoch's samples (sklearn's ``recall_score``), logged at the epoch's end: with
    ``average="auto"``, as in FastEstimator, one float for single-column predictions, else one recall per class.

    Args:
        output_name: Key under which the recall is logged.
        **kwargs: Further arguments of ``sklearn.metrics.recall_score``.

    Other arguments (``average`` included), inputs and errors: see
    :class:`~fe_ray.trace.metric._label_metric.AveragedScore`.
    """

    score_fn = "recall_score"

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "recall", per_ds: bool = True,
                 average: str | None = "auto", **kwargs: Any) -> None:
        super().__init__(true_key, pred_key, mode=mode, ds_id=ds_id, output_name=output_name, per_ds=per_ds,
                         average=average, kwargs=kwargs)
