"""ConfusionMatrix: counts of (true class, predicted class) pairs over an epoch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.trace.metric._label_metric import LabelMetric


class ConfusionMatrix(LabelMetric):
    """The ``num_classes`` x ``num_classes`` confusion matrix of each epoch: row = true class, column = predicted.

    Single-column (binary) predictions suit ``num_classes=2``. Samples whose true or predicted class is outside
    ``range(num_classes)`` are not counted (sklearn's rule for its ``labels`` argument).

    Args:
        num_classes: How many classes the matrix covers (classes 0 .. num_classes - 1).
        output_name: Key under which the matrix (a numpy array) is logged.
        **kwargs: Further arguments of ``sklearn.metrics.confusion_matrix`` (``normalize``, ``sample_weight``),
            applied to the whole epoch's matrix; not ``labels``, which the trace sets.

    The other arguments, the labels and predictions it reads, and the errors it raises are those of every
    :class:`~fe_ray.trace.metric._label_metric.LabelMetric`.

    Raises:
        ValueError: If ``num_classes`` is not a positive int.
    """

    score_fn = "confusion_matrix"
    own_args = ("labels",)

    def __init__(self, true_key: str, pred_key: str, num_classes: int,
                 mode: None | str | Iterable[str] = ("eval", "test"), ds_id: None | str | Iterable[str] = None,
                 output_name: str = "confusion_matrix", per_ds: bool = True, **kwargs: Any) -> None:
        if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool) or num_classes < 1:
            raise ValueError(f"ConfusionMatrix num_classes must be a positive int (2 for a binary task), got "
                             f"{num_classes!r}.")
        super().__init__(true_key, pred_key, mode=mode, ds_id=ds_id, output_name=output_name, per_ds=per_ds,
                         kwargs=kwargs)
        self.num_classes = int(num_classes)

    def sklearn_args(self) -> dict[str, Any]:
        return {"labels": list(range(self.num_classes))}
