"""F1Score: the harmonic mean of precision and recall."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.trace.metric._label_metric import AveragedScore


class F1Score(AveragedScore):
    """F1 score over each epoch's samples (sklearn's ``f1_score``), logged at the epoch's end: with
    ``average="auto"``, as in FastEstimator, one float for single-column predictions, else one F1 score per class.
    :class:`MCC` is often the more telling single number for imbalanced classes.

    Args:
        output_name: Key under which the score is logged.
        **kwargs: Further arguments of ``sklearn.metrics.f1_score``.

    Other arguments (``average`` included), inputs and errors: see
    :class:`~fe_ray.trace.metric._label_metric.AveragedScore`.
    """

    score_fn = "f1_score"

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "f1_score", per_ds: bool = True,
                 average: str | None = "auto", **kwargs: Any) -> None:
        super().__init__(true_key, pred_key, mode=mode, ds_id=ds_id, output_name=output_name, per_ds=per_ds,
                         average=average, kwargs=kwargs)
