"""MCC: the Matthews correlation coefficient between labels and predictions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.trace.metric._label_metric import LabelMetric


class MCC(LabelMetric):
    """Matthews correlation coefficient over each epoch's samples (sklearn's ``matthews_corrcoef``).

    One number in [-1, 1] that accounts for every cell of the confusion matrix, so class imbalance does not inflate
    it: 1 is perfect, 0 no better than chance, below 0 anti-correlated.

    Args:
        output_name: Key under which the coefficient is logged.
        **kwargs: Further arguments of ``sklearn.metrics.matthews_corrcoef`` (``sample_weight``).

    The other arguments, the labels and predictions it reads, and the errors it raises are those of every
    :class:`~fe_ray.trace.metric._label_metric.LabelMetric`.
    """

    score_fn = "matthews_corrcoef"

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "mcc", per_ds: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(true_key, pred_key, mode=mode, ds_id=ds_id, output_name=output_name, per_ds=per_ds,
                         kwargs=kwargs)
