"""Precision: of the samples predicted as a class, the fraction that belong to it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.trace.metric._label_metric import AveragedScore


class Precision(AveragedScore):
    """Precision over each epoch's samples (sklearn's ``precision_score``), logged at the epoch's end: with
    ``average="auto"``, as in FastEstimator, one float for single-column predictions, else one precision per class.

    Args:
        output_name: Key under which the precision is logged.
        **kwargs: Further arguments of ``sklearn.metrics.precision_score``.

    Other arguments (``average`` included), inputs and errors: see
    :class:`~fe_ray.trace.metric._label_metric.AveragedScore`.
    """

    score_fn = "precision_score"

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "precision", per_ds: bool = True,
                 average: str | None = "auto", **kwargs: Any) -> None:
        super().__init__(true_key, pred_key, mode=mode, ds_id=ds_id, output_name=output_name, per_ds=per_ds,
                         average=average, kwargs=kwargs)
