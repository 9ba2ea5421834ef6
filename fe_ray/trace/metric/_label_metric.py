"""Shared machinery of the classification metrics computed from whole-epoch class labels (Precision, Recall,
F1Score, MCC, ConfusionMatrix).

Each batch's labels and predictions are reduced to class indices and kept until the epoch ends, when the metric is
computed once over all of them. Keeping labels rather than per-batch scores is what makes the value exact: these
metrics do not average over batches. It also makes a distributed run agree with an in-process one, since the
driver sees every batch's merged outputs either way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.trace import Data, Trace, per_ds_keys


def sklearn_metric(name: str) -> Callable[..., Any]:
    """``sklearn.metrics.<name>``, imported on first use: sklearn.metrics (with scipy) takes about half a second
    to import, which every ``import fe_ray.trace`` (replicas included) would otherwise pay."""
    import sklearn.metrics

    return getattr(sklearn.metrics, name)


def check_sklearn_kwargs(trace: str, function: str, kwargs: Mapping[str, Any], reserved: Iterable[str]) -> None:
    """Refuse, when the trace is made, keyword arguments that sklearn's ``function`` would reject at the first
    epoch's end, or that the trace sets itself.

    Args:
        trace: The trace's class name, for the message.
        function: The name of the sklearn metric the kwargs are passed to (in ``sklearn.metrics``).
        kwargs: What the user passed.
        reserved: Arguments the trace fills in itself.

    Raises:
        ValueError: Naming the offending keys, the accepted ones and the fix.
    """
    reserved = list(reserved)
    taken = sorted(key for key in kwargs if key in reserved)
    if taken:
        raise ValueError(f"{trace} sets {taken} itself when it calls sklearn.metrics.{function}; remove "
                         f"{taken} from the keyword arguments.")
    accepted = [name for name in inspect.signature(sklearn_metric(function)).parameters if name not in reserved]
    unknown = sorted(key for key in kwargs if key not in accepted)
    if unknown:
        raise ValueError(f"{trace} passes extra keyword arguments to sklearn.metrics.{function}, which does "
                         f"not accept {unknown}; the accepted ones are {accepted}.")


def to_class_labels(y_true: Any, y_pred: Any, trace: str, true_key: str,
                    pred_key: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """Reduce one batch to flat arrays of class indices, as FastEstimator's classification metrics read it.

    Labels may be class indices or one-hot / probability rows (argmax over the last axis). Predictions with several
    columns are class scores (argmax); a single column, or a flat vector, holds probabilities of the positive class
    of a binary task (rounded).

    Returns:
        ``(y_true, y_pred, binary)``: int64 arrays of equal size, and whether the predictions had the binary
        (single-column) form.

    Raises:
        ValueError: If labels and predictions hold different numbers of samples, labels are not whole numbers, or
            binary predictions are NaN.
    """
    y_true = np.asarray(to_number(y_true))
    y_pred = np.asarray(to_number(y_pred))
    if y_true.ndim > 1 and y_true.shape[-1] > 1:
        y_true = np.argmax(y_true, axis=-1)
    binary = y_pred.ndim <= 1 or y_pred.shape[-1] == 1
    y_pred = np.round(y_pred) if binary else np.argmax(y_pred, axis=-1)
    y_true, y_pred = y_true.ravel(), y_pred.ravel()
    if y_true.size != y_pred.size:
        raise ValueError(f"{trace} got {y_true.size} labels ({true_key!r}) but {y_pred.size} predictions "
                         f"({pred_key!r}); they must describe the same samples.")
    if y_true.dtype.kind == "f":
        if not np.all(np.isfinite(y_true)) or not np.array_equal(y_true, np.round(y_true)):
            raise ValueError(f"{trace} needs class indices (or one-hot rows) under {true_key!r}, got non-integer "
                             f"values such as {y_true[y_true != np.round(y_true)][:3].tolist()}; round or argmax "
                             "soft labels before this trace.")
    if y_pred.dtype.kind == "f" and not np.all(np.isfinite(y_pred)):
        # A NaN score rounds to NaN, which is no class (and casts to an arbitrary integer): refuse it here, with
        # the key, rather than let sklearn fail at the epoch's end.
        raise ValueError(f"{trace} got NaN or infinite predictions under {pred_key!r}; the model diverged. Add "
                         "fe.trace.adapt.TerminateOnNaN to stop training when that happens.")
    return y_true.astype(np.int64), y_pred.astype(np.int64), binary


class LabelMetric(Trace):
    """Base class: accumulate an epoch's class labels (overall and per dataset) and compute an sklearn metric over
    them at its end.

    Labels may be class indices or one-hot rows; predictions class scores (argmax) or, for a binary task, one
    probability column (rounded): see :func:`to_class_labels`. When a mode has several datasets (a
    ``{ds_id: dataset}`` dict in the Pipeline), the value over each is also logged as ``<output_name>|<ds_id>``,
    next to the one over all of them (as FastEstimator's ``per_ds`` does).

    Subclasses name the sklearn function (:attr:`score_fn`) and the arguments they fill in themselves
    (:attr:`own_args`, valued by :meth:`sklearn_args`). The arguments below are those of
    every subclass (Precision, Recall, F1Score, MCC, ConfusionMatrix), whose docstrings describe only their own.

    Args:
        true_key: Key of the ground-truth labels.
        pred_key: Key of the predictions.
        mode: Mode(s) in which to compute it.
        ds_id: Dataset id(s) in which to compute it; None for all.
        output_name: Key under which the value is logged.
        per_ds: With several datasets in a mode, also log ``<output_name>|<ds_id>`` per dataset (never when
            ``output_name`` contains '|').
        kwargs: Further arguments of ``sklearn.metrics.<score_fn>`` (``**kwargs`` of the subclasses).

    Raises:
        ValueError: If ``kwargs`` has an argument the sklearn function does not take, or one the trace sets (when
            made), or a batch's labels and predictions differ in size.
    """

    #: The name of the sklearn metric (in ``sklearn.metrics``), set by each subclass.
    score_fn: str
    #: Arguments of :attr:`score_fn` the trace sets itself (besides ``y_true`` and ``y_pred``): refused in ``kwargs``.
    own_args: tuple[str, ...] = ()

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str], ds_id: None | str |
                 Iterable[str], output_name: str, per_ds: bool, kwargs: Mapping[str, Any]) -> None:
        check_sklearn_kwargs(type(self).__name__, self.score_fn, kwargs, reserved=("y_true", "y_pred", *self.own_args))
        super().__init__(inputs=[true_key, pred_key], outputs=output_name, mode=mode, ds_id=ds_id)
        self.true_key = true_key
        self.pred_key = pred_key
        # A '|' in the name already reads as '<key>|<ds_id>': a per-dataset key would be ambiguous.
        self.per_ds = bool(per_ds) and "|" not in output_name
        self.kwargs = dict(kwargs)
        self.binary: bool | None = None  # whether the latest batch's predictions were single-column
        self._reset()

    def _reset(self) -> None:
        self.y_true: list[np.ndarray] = []
        self.y_pred: list[np.ndarray] = []
        self.ds_labels: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def sklearn_args(self) -> dict[str, Any]:
        """The values of :attr:`own_args` for the next :meth:`compute`."""
        return {}

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> Any:
        """The metric over one epoch's (or one dataset's) class indices."""
        return sklearn_metric(self.score_fn)(y_true, y_pred, **self.sklearn_args(), **self.kwargs)

    def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
        outputs = super().get_outputs(ds_ids)
        if self.per_ds:
            outputs += per_ds_keys(self.outputs[:1], ds_ids)
        return outputs

    def on_epoch_begin(self, data: Data) -> None:
        self._reset()

    def on_batch_end(self, data: Data) -> None:
        y_true, y_pred, self.binary = to_class_labels(data[self.true_key], data[self.pred_key], type(self).__name__,
                                                      self.true_key, self.pred_key)
        self.y_true.append(y_true)
        self.y_pred.append(y_pred)
        # '' is the only dataset of a mode without a ds_id dict: the overall value says it all.
        ds_id = getattr(getattr(self, "system", None), "ds_id", "")
        if self.per_ds and ds_id:
            trues, preds = self.ds_labels.setdefault(ds_id, ([], []))
            trues.append(y_true)
            preds.append(y_pred)

    def on_epoch_end(self, data: Data) -> None:
        for ds_id, (trues, preds) in self.ds_labels.items():
            data.write_with_log(f"{self.outputs[0]}|{ds_id}", self.compute(_joined(trues), _joined(preds)))
        if self.y_true:  # an epoch without batches has no value (sklearn would only warn and return 0)
            data.write_with_log(self.outputs[0], self.compute(_joined(self.y_true), _joined(self.y_pred)))

    def state_dict(self) -> dict[str, Any]:
        # Joined copies: a checkpoint must not share arrays with lists that later batches keep growing.
        return {"y_true": _joined(self.y_true), "y_pred": _joined(self.y_pred), "binary": self.binary,
                "ds_labels": {ds_id: (_joined(trues), _joined(preds))
                              for ds_id, (trues, preds) in self.ds_labels.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._reset()
        self.binary = state.get("binary")
        self.y_true, self.y_pred = _split(state["y_true"]), _split(state["y_pred"])
        self.ds_labels = {str(ds_id): (_split(trues), _split(preds))
                          for ds_id, (trues, preds) in state.get("ds_labels", {}).items()}


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _split(array: Any) -> list[np.ndarray]:
    array = np.array(array, dtype=np.int64).ravel()  # a copy: the checkpoint's arrays stay untouched
    return [array] if array.size else []


#: ``average`` values of the Precision / Recall / F1Score traces: "auto" is FastEstimator's rule, the others are
#: sklearn's (its "samples" needs multilabel targets, which these single-label traces never produce).
AVERAGES = ("auto", None, "binary", "micro", "macro", "weighted")


class AveragedScore(LabelMetric):
    """Base class of Precision, Recall and F1Score: an sklearn score over the epoch with FastEstimator's choice of
    ``average``.

    With ``average="auto"`` the value is, as in FastEstimator, one float for single-column predictions and an array
    with one score per class otherwise.

    Args:
        average: "auto" (FastEstimator's rule above), or sklearn's None (per class), "binary", "micro", "macro",
            "weighted". An fe_ray addition: FastEstimator takes no ``average``.
        kwargs: Further arguments of the sklearn function (``labels``, ``pos_label``, ``zero_division``, ...).

    The other arguments are :class:`LabelMetric`'s.

    Raises:
        ValueError: If ``average`` is not one of the choices, or as :class:`LabelMetric` raises.
    """

    own_args = ("average",)

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str], ds_id: None | str |
                 Iterable[str], output_name: str, per_ds: bool, average: str | None, kwargs: Mapping[str, Any]) -> None:
        if average not in AVERAGES:
            raise ValueError(f"{type(self).__name__} average must be one of {list(AVERAGES)}, got {average!r}. 'auto' "
                             "(the default) gives FastEstimator's result: one score for single-column (binary) "
                             "predictions, one per class otherwise.")
        super().__init__(true_key, pred_key, mode=mode, ds_id=ds_id, output_name=output_name, per_ds=per_ds,
                         kwargs=kwargs)
        self.average = average

    def sklearn_args(self) -> dict[str, Any]:
        average = self.average
        if average == "auto":
            # FastEstimator's rule: single-column predictions are a binary task (one score for class 1), class
            # scores a multi-class one (an array with one score per class).
            average = "binary" if self.binary else None
        return {"average": average}
