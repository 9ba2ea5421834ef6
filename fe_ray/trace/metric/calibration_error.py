"""CalibrationError: how far a classifier's predicted probabilities are from the frequencies they claim, over an
epoch (the l2 calibration error of Kumar, Liang and Ma, "Verified Uncertainty Calibration", NeurIPS 2019)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.summary.summary import ValWithError
from fe_ray.trace.metric._epoch_metric import EpochMetric

METHODS = ("marginal", "top-label")
#: Equal-mass bins used for continuous (scaling-model) probabilities.
NUM_BINS = 15
#: Bootstrap resamples drawn for the confidence interval.
NUM_RESAMPLES = 100


class CalibrationError(EpochMetric):
    """The l2 calibration error of an epoch's predicted class probabilities, logged at its end.

    The estimate follows the ``uncertainty-calibration`` package that FastEstimator calls
    (``calibration.get_calibration_error`` with its defaults: p=2, debiased), reimplemented here in numpy:

    * Probabilities are binned per column. When every column takes few distinct values (fewer than a quarter of the
      samples), as a binned (histogram) model's outputs do, each distinct value is its own bin; otherwise the values
      are split into 15 bins holding equal numbers of samples.
    * In a bin of ``m >= 2`` samples with mean probability ``p`` and label frequency ``y``, the squared error is
      estimated without bias as ``(p - y)^2 - y (1 - y) / (m - 1)``; the bins' estimates are averaged with weights
      ``m / n``, floored at 0 and square-rooted. Bins of one sample count 0.
    * ``method="marginal"`` computes that per class (probability of class k against "label is k") and reports the
      root of the mean of the squared per-class errors; ``"top-label"`` compares each sample's highest probability
      with whether its argmax is right.

    With ``confidence_interval`` the value is a :class:`~fe_ray.summary.summary.ValWithError` ``(low, error, high)``:
    ``error`` as above and ``low`` / ``high`` the ends of a basic-bootstrap interval over 100 resamples of the
    epoch's samples (of the plain, not debiased, estimate), drawn with a generator seeded from numpy's global one
    (so ``np.random.seed`` / ``fe.enable_deterministic`` make it repeatable). Values are rounded to 4 decimals, as
    FastEstimator does.

    Predictions are ``(batch, num_classes)`` probabilities (apply a softmax to logits), or one column / a flat vector
    of positive-class probabilities for a binary task. Labels are class indices (any shape holding one per sample)
    or one-hot rows.

    Differences from FastEstimator: single-column predictions are read as a binary task (FastEstimator's package
    rejects label 1 for them); the interval covers the requested ``confidence_interval`` percent (FastEstimator
    hands the level to the package in a unit it reads as a far wider, near min-max band); invalid inputs raise
    ValueError at the batch, naming the key, rather than an assertion or a failure at the epoch's end.

    Args:
        true_key: Key of the ground-truth labels.
        pred_key: Key of the predicted probabilities.
        mode: Mode(s) in which to compute it ('train', 'eval', 'test'; '!mode' excludes one).
        ds_id: Dataset id(s) in which to compute it; None for all, '!id' excludes one.
        output_name: Key under which the error is logged.
        method: 'marginal' or 'top-label' (see above).
        confidence_interval: Percent coverage of the bootstrap interval, in (0, 100); None for the error alone.
        per_ds: With several datasets in a mode, also log ``<output_name>|<ds_id>`` per dataset (never when
            ``output_name`` contains '|').

    Raises:
        ValueError: If ``method`` or ``confidence_interval`` is invalid (when made), or at a batch whose labels and
            predictions differ in number, whose probabilities are outside [0, 1] or whose labels are not classes of
            the predictions.
    """

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "calibration_error",
                 method: str = "marginal", confidence_interval: float | None = None, per_ds: bool = True) -> None:
        if method not in METHODS:
            raise ValueError(f"CalibrationError method must be one of {list(METHODS)}, got {method!r}.")
        if confidence_interval is not None and (
                isinstance(confidence_interval, bool) or not isinstance(confidence_interval, numbers.Real)
                or not 0 < confidence_interval < 100):
            raise ValueError(f"CalibrationError confidence_interval must be a percentage strictly between 0 and 100 "
                             f"(e.g. 95) or None, got {confidence_interval!r}.")
        self.method = method
        self.confidence_interval = None if confidence_interval is None else float(confidence_interval)
        super().__init__(true_key, pred_key, outputs=output_name, mode=mode, ds_id=ds_id, per_ds=per_ds)

    def empty(self) -> dict[str, list[np.ndarray]]:
        return {"probs": [], "labels": []}

    def reduce_batch(self, y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
        labels = np.asarray(to_number(y_true))
        probs = np.asarray(to_number(y_pred), dtype=np.float64)
        if labels.ndim > 1 and labels.shape[-1] > 1:
            labels = np.argmax(labels, axis=-1)
        labels = labels.reshape(-1)
        if (probs.ndim == 2 and probs.shape[1] == 1) or probs.ndim == 0:
            probs = probs.reshape(-1)
        if probs.ndim not in (1, 2):
            raise ValueError(f"CalibrationError needs (batch, num_classes) probabilities under {self.pred_key!r}, "
                             f"got shape {list(probs.shape)}.")
        if probs.shape[0] != labels.size:
            raise ValueError(f"CalibrationError got {labels.size} labels ({self.true_key!r}) but {probs.shape[0]} "
                             f"predictions ({self.pred_key!r}); they must describe the same samples.")
        if not np.all((probs >= 0.0) & (probs <= 1.0)):  # also refuses NaN
            raise ValueError(f"CalibrationError needs probabilities in [0, 1] under {self.pred_key!r}, got values "
                             f"from {np.nanmin(probs):.6g} to {np.nanmax(probs):.6g} (or NaN); apply a softmax / "
                             "sigmoid to logits.")
        n_classes = 2 if probs.ndim == 1 else probs.shape[1]
        if labels.size and (not np.array_equal(labels, np.round(labels)) or labels.min() < 0
                            or labels.max() >= n_classes):
            raise ValueError(f"CalibrationError needs class indices in 0..{n_classes - 1} (or one-hot rows) under "
                             f"{self.true_key!r} for predictions with {n_classes} classes, got values such as "
                             f"{np.unique(labels)[:5].tolist()}.")
        return probs, labels.astype(np.int64)

    def add(self, totals: dict[str, list[np.ndarray]], part: tuple[np.ndarray, np.ndarray]) -> None:
        probs, labels = part
        if totals["probs"] and totals["probs"][0].shape[1:] != probs.shape[1:]:
            raise ValueError(f"CalibrationError got predictions of shape {list(probs.shape[1:])} per sample under "
                             f"{self.pred_key!r} after {list(totals['probs'][0].shape[1:])} earlier in the epoch; "
                             "every batch must have the same classes.")
        totals["probs"].append(probs)
        totals["labels"].append(labels)

    def has_data(self, totals: dict[str, list[np.ndarray]]) -> bool:
        return sum(part.size for part in totals["labels"]) > 0

    def compute(self, totals: dict[str, list[np.ndarray]]) -> list[Any]:
        probs, labels = np.concatenate(totals["probs"]), np.concatenate(totals["labels"])
        error = round(calibration_error(probs, labels, self.method), 4)
        if self.confidence_interval is None:
            return [error]
        low, high = bootstrap_interval(probs, labels, self.method, self.confidence_interval)
        return [ValWithError(round(low, 4), error, round(high, 4))]

    def pack(self, totals: dict[str, list[np.ndarray]]) -> dict[str, Any]:
        # Joined copies: a checkpoint must not share arrays with lists that later batches keep growing.
        if not totals["labels"]:
            return {"probs": None, "labels": np.zeros(0, np.int64)}
        return {"probs": np.concatenate(totals["probs"]), "labels": np.concatenate(totals["labels"])}

    def unpack(self, state: Mapping[str, Any]) -> dict[str, list[np.ndarray]]:
        labels = np.array(state["labels"], dtype=np.int64).ravel()
        if state["probs"] is None or not labels.size:
            return self.empty()
        return {"probs": [np.array(state["probs"], dtype=np.float64)], "labels": [labels]}


def calibration_error(probs: np.ndarray, labels: np.ndarray, method: str, debias: bool = True) -> float:
    """The l2 calibration error of ``probs`` (``(n,)`` positive-class or ``(n, k)`` class probabilities) against
    class indices ``labels``, as :class:`CalibrationError` describes it (``debias=False``: the plain estimate)."""
    columns = [probs] if probs.ndim == 1 else [probs[:, k] for k in range(probs.shape[1])]
    # The package's test for a binned model's outputs: few distinct values in every column.
    discrete = all(np.unique(column).size < column.size / 4.0 for column in columns)
    if probs.ndim == 1:
        return _error_1d(probs, labels.astype(np.float64), discrete, debias)
    if method == "marginal":
        squares = [_error_1d(probs[:, k], (labels == k).astype(np.float64), discrete, debias) ** 2
                   for k in range(probs.shape[1])]
        return float(np.mean(squares) ** 0.5)
    correct = (np.argmax(probs, axis=1) == labels).astype(np.float64)
    return _error_1d(np.max(probs, axis=1), correct, discrete, debias)


def _error_1d(probs: np.ndarray, outcomes: np.ndarray, discrete: bool, debias: bool) -> float:
    """The l2 calibration error of probabilities ``probs`` for the 0/1 ``outcomes``."""
    bounds = _discrete_bounds(probs) if discrete else _equal_mass_bounds(probs, NUM_BINS)
    # A value on a boundary belongs to the bin below it (the package's searchsorted, side='left').
    index = np.searchsorted(bounds, probs)
    sizes = np.bincount(index, minlength=len(bounds)).astype(np.float64)
    filled = sizes > 0
    mean_prob = np.bincount(index, weights=probs, minlength=len(bounds))[filled] / sizes[filled]
    mean_outcome = np.bincount(index, weights=outcomes, minlength=len(bounds))[filled] / sizes[filled]
    sizes = sizes[filled]
    squares = (mean_prob - mean_outcome) ** 2
    weights = sizes / probs.size
    if not debias:
        return float(np.dot(weights, squares) ** 0.5)
    # The squared gap of a bin's frequency overestimates the true one by the frequency's variance, y(1-y)/(m-1)
    # unbiasedly estimated; bins of one sample cannot estimate it and count 0.
    several = sizes >= 2
    variance = np.zeros_like(squares)
    variance[several] = mean_outcome[several] * (1.0 - mean_outcome[several]) / (sizes[several] - 1.0)
    estimate = float(np.dot(weights, np.where(several, squares - variance, 0.0)))
    return max(estimate, 0.0) ** 0.5


def _discrete_bounds(values: np.ndarray) -> np.ndarray:
    """Upper bin bounds giving each distinct value its own bin: midpoints between neighbours, then 1.0."""
    distinct = np.unique(values)
    return np.append((distinct[:-1] + distinct[1:]) / 2.0, 1.0)


def _equal_mass_bounds(values: np.ndarray, num_bins: int) -> np.ndarray:
    """Upper bin bounds splitting the sorted values into ``num_bins`` runs of (nearly) equal size: the midpoints
    between consecutive runs, then 1.0, duplicates merged."""
    runs = np.array_split(np.sort(values), min(num_bins, values.size))
    bounds = [(runs[i][-1] + runs[i + 1][0]) / 2.0 for i in range(len(runs) - 1)]
    return np.unique(np.array([*bounds, 1.0]))


def bootstrap_interval(probs: np.ndarray, labels: np.ndarray, method: str, coverage: float) -> tuple[float, float]:
    """The ``coverage`` percent basic-bootstrap interval of the plain calibration error: ``2 e - q_hi`` to
    ``2 e - q_lo``, with ``e`` the estimate over all samples and ``q`` percentiles of 100 resampled estimates."""
    rng = np.random.default_rng(int(np.random.randint(0, 2**31 - 1)))
    plugin = calibration_error(probs, labels, method, debias=False)
    estimates = []
    for _ in range(NUM_RESAMPLES):
        pick = rng.integers(0, labels.size, labels.size)
        estimates.append(calibration_error(probs[pick], labels[pick], method, debias=False))
    tail = (100.0 - coverage) / 2.0
    q_low, q_high = np.percentile(estimates, [tail, 100.0 - tail])
    return 2.0 * plugin - float(q_high), 2.0 * plugin - float(q_low)

