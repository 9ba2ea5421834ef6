"""The Platt-binner marginal calibrator (the scaling-binning calibrator of Kumar, Liang and Ma, "Verified Uncertainty
Calibration", NeurIPS 2019), fitted in numpy: what :class:`~fe_ray.trace.adapt.pbm_calibrator.PBMCalibrator` trains
and :class:`~fe_ray.op.numpyop.univariate.calibrate.Calibrate` applies.

FastEstimator builds it with the ``uncertainty-calibration`` package (``PlattBinnerMarginalCalibrator`` with 10
bins). This module follows that package's documented recipe without depending on it, and its fitted calibrator is
a plain picklable object (numbers and arrays), so a saved file loads with the standard ``pickle`` module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Probabilities are clipped to [EPS, 1 - EPS] before taking their logit (the package's margin).
EPS = 1e-12
#: The package's logistic regression is ``sklearn.linear_model.LogisticRegression(C=1e10)``: an L2 penalty of
#: ``0.5 * slope**2 / C`` on the slope only, practically none, but it keeps the Newton system solvable.
INVERSE_C = 1e-10
#: Newton iterations per class; a fit on separable data never converges (its slope grows without bound) and stops
#: here with a steep, finite map, as sklearn's solver stops at its iteration limit.
MAX_ITERATIONS = 100


def logit(probs: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))`` of ``probs`` clipped into [EPS, 1 - EPS], as float64."""
    clipped = np.clip(np.asarray(probs, dtype=np.float64), EPS, 1.0 - EPS)
    return np.log(clipped / (1.0 - clipped))


def sigmoid(values: np.ndarray) -> np.ndarray:
    """The logistic function, without overflow for large ``|values|`` (infinite values give exactly 0 or 1)."""
    return 0.5 * (1.0 + np.tanh(0.5 * values))


def fit_platt(probs: np.ndarray, outcomes: np.ndarray) -> tuple[float, float]:
    """Fit ``sigmoid(slope * logit(p) + intercept)`` to the 0/1 ``outcomes`` by maximum likelihood (Platt scaling).

    Newton's method with step halving on the log-loss plus the package's negligible slope penalty. When every
    outcome is the same the likelihood has no maximum (the map tends to that constant): the result is slope 0 and
    an infinite intercept of that sign.

    Returns:
        ``(slope, intercept)``.
    """
    x = logit(probs)
    y = np.asarray(outcomes, dtype=np.float64)
    if np.all(y == y[0]):
        return 0.0, (np.inf if y[0] > 0.5 else -np.inf)

    def objective(params: np.ndarray) -> float:
        z = params[0] * x + params[1]
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * INVERSE_C * params[0] ** 2)

    params = np.zeros(2)
    loss = objective(params)
    for _ in range(MAX_ITERATIONS):
        p = sigmoid(params[0] * x + params[1])
        residual, weight = p - y, p * (1.0 - p)
        gradient = np.array([np.dot(residual, x) + INVERSE_C * params[0], np.sum(residual)])
        hessian = np.array([[np.dot(weight, x * x) + INVERSE_C, np.dot(weight, x)],
                            [np.dot(weight, x), np.sum(weight) + INVERSE_C]])
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        # Halve the step until the loss does not rise: a full Newton step can overshoot far from the optimum.
        scale = 1.0
        while scale > 1e-10:
            candidate = params - scale * step
            new_loss = objective(candidate)
            if new_loss <= loss:
                break
            scale *= 0.5
        else:
            break
        converged = loss - new_loss <= 1e-12 * max(1.0, abs(loss))
        params, loss = candidate, new_loss
        if converged:
            break
    return float(params[0]), float(params[1])


def equal_mass_bounds(values: np.ndarray, num_bins: int) -> np.ndarray:
    """Upper bin bounds putting (nearly) the same number of ``values`` in each of ``num_bins`` bins (fewer when
    there are fewer values): the midpoints between consecutive runs of the sorted values, then 1.0, duplicates
    merged (the package's ``get_equal_bins``)."""
    runs = np.array_split(np.sort(values), min(num_bins, values.size))
    bounds = [(runs[i][-1] + runs[i + 1][0]) / 2.0 for i in range(len(runs) - 1)]
    return np.unique(np.array([*bounds, 1.0], dtype=np.float64))


def bin_means(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """The mean of ``values`` in each bin of ``bounds`` (a value on a bound belongs to the bin below it); an empty
    bin takes the middle of its range (the package's histogram calibrator applied to the values themselves)."""
    index = np.searchsorted(bounds, values)
    counts = np.bincount(index, minlength=bounds.size)[:bounds.size]
    sums = np.bincount(index, weights=values, minlength=bounds.size)[:bounds.size]
    lower = np.concatenate([[0.0], bounds[:-1]])
    return np.where(counts > 0, sums / np.maximum(counts, 1), (lower + bounds) / 2.0)


class PlattBinnerMarginal:
    """A fitted Platt-binner marginal calibrator: call it on ``(n, k)`` class probabilities to get calibrated ones.

    Each class column ``c`` is mapped on its own ("marginal"): first through its Platt map
    ``sigmoid(slopes[c] * logit(p) + intercepts[c])``, then to the mean mapped value of the bin it falls in, the
    bins splitting the fitting data's mapped values into equal-mass groups. The calibrated columns are not
    renormalized to sum to 1 (as in FastEstimator). Outputs are float64.

    A calibrator fitted on one column or a flat vector (positive-class probabilities of a binary task) takes and
    returns that shape; FastEstimator's package accepts ``(n, k)`` inputs with ``k >= 2`` only.

    Args:
        slopes: The Platt slope per class.
        intercepts: The Platt intercept per class (+-inf for a class that was always / never the label).
        bounds: Per class, the ascending upper bin bounds (the last one 1.0).
        values: Per class, the calibrated value of each bin.
        columns: The number of columns of the fitted predictions; 0 for a flat vector.
    """

    def __init__(self, slopes: Any, intercepts: Any, bounds: list[Any], values: list[Any], columns: int) -> None:
        self.slopes = np.asarray(slopes, dtype=np.float64).reshape(-1)
        self.intercepts = np.asarray(intercepts, dtype=np.float64).reshape(-1)
        self.bounds = [np.asarray(b, dtype=np.float64).reshape(-1) for b in bounds]
        self.values = [np.asarray(v, dtype=np.float64).reshape(-1) for v in values]
        self.columns = int(columns)
        classes = self.slopes.size
        assert self.intercepts.size == len(self.bounds) == len(self.values) == classes, "one entry per class"
        assert all(b.size == v.size for b, v in zip(self.bounds, self.values)), "one value per bin"

    @classmethod
    def fit(cls, probs: np.ndarray, labels: np.ndarray, num_bins: int = 10) -> PlattBinnerMarginal:
        """Fit on ``probs`` (``(n, k)``, or ``(n, 1)`` / ``(n,)`` for a binary task) and class indices ``labels``
        (``(n,)``, already checked to be classes of ``probs``)."""
        probs = np.asarray(probs, dtype=np.float64)
        columns = 0 if probs.ndim == 1 else probs.shape[1]
        matrix = probs.reshape(probs.shape[0], -1)
        labels = np.asarray(labels).reshape(-1)
        binary = matrix.shape[1] == 1
        slopes, intercepts, bounds, values = [], [], [], []
        for c in range(matrix.shape[1]):
            outcomes = labels == (1 if binary else c)
            slope, intercept = fit_platt(matrix[:, c], outcomes)
            mapped = sigmoid(slope * logit(matrix[:, c]) + intercept)
            column_bounds = equal_mass_bounds(mapped, num_bins)
            slopes.append(slope)
            intercepts.append(intercept)
            bounds.append(column_bounds)
            values.append(bin_means(mapped, column_bounds))
        return cls(slopes, intercepts, bounds, values, columns)

    def __call__(self, probs: Any) -> np.ndarray:
        """Calibrate ``probs``: ``(n, k)`` (or ``(k,)`` for one sample) with the fitted number of classes; for a
        binary calibrator, any shape of positive-class probabilities.

        Raises:
            ValueError: If the number of classes differs from the fitted one.
        """
        probs = np.asarray(probs, dtype=np.float64)
        classes = self.slopes.size
        if classes == 1:
            flat = probs.reshape(-1, 1)
        elif probs.ndim >= 1 and probs.shape[-1] == classes:
            flat = probs.reshape(-1, classes)
        else:
            raise ValueError(f"This calibrator was fitted on predictions with {classes} classes, but got an array of "
                             f"shape {list(probs.shape)}; calibrate predictions of the same model (classes on the "
                             "last axis).")
        result = np.empty_like(flat)
        for c in range(classes):
            mapped = sigmoid(self.slopes[c] * logit(flat[:, c]) + self.intercepts[c])
            index = np.minimum(np.searchsorted(self.bounds[c], mapped), self.bounds[c].size - 1)
            result[:, c] = self.values[c][index]
        return result.reshape(probs.shape)

    def state_dict(self) -> dict[str, Any]:
        """The fitted parameters as plain arrays and numbers (copies)."""
        return {"slopes": self.slopes.copy(), "intercepts": self.intercepts.copy(),
                "bounds": [b.copy() for b in self.bounds], "values": [v.copy() for v in self.values],
                "columns": self.columns}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> PlattBinnerMarginal:
        """Rebuild a calibrator from :meth:`state_dict`."""
        return cls(state["slopes"], state["intercepts"], list(state["bounds"]), list(state["values"]),
                   state["columns"])

    def __repr__(self) -> str:
        return f"PlattBinnerMarginal(classes={self.slopes.size}, bins={[b.size for b in self.bounds]})"
