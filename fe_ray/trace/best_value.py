"""What the traces that watch an evaluation metric for its best value (BestModelSaver, ReduceLROnPlateau) share:
the default metric (the model's loss), the 'min' / 'max' choice, and what counts as an improvement."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.summary.summary import ValWithError
from fe_ray.trace.trace import Data

#: Whether smaller ('min') or larger ('max') values of the metric are better.
BEST_MODES = ("min", "max")


def check_best_mode(trace: str, argument: str, value: Any) -> None:
    """Raise ValueError, naming ``trace`` and its ``argument``, unless ``value`` is 'min' or 'max'."""
    if value not in BEST_MODES:
        raise ValueError(f"{trace} {argument} must be one of {list(BEST_MODES)}, got {value!r}: 'min' when smaller "
                         "values of the metric are better (a loss), 'max' when larger ones are (an accuracy).")


def loss_metric(model: Any, trace: str) -> str:
    """The key of ``model``'s loss (the ``loss_name`` of the UpdateOp that trains it), the metric a trace watches
    when given none.

    Raises:
        ValueError: If the model has no loss key or several.
    """
    losses = sorted(getattr(model, "loss_name", set()) or [])
    if len(losses) != 1:
        raise ValueError(f"{trace} cannot pick a metric for model "
                         f"{getattr(model, 'model_name', type(model).__name__)!r}: it has loss keys {losses} "
                         "(a model gets its loss key from the UpdateOp that trains it). Pass metric='<key>'.")
    return losses[0]


def worst_value(best_mode: str) -> float:
    """The starting 'best' value, which any finite value improves on."""
    return math.inf if best_mode == "min" else -math.inf


def improves(value: float, best: float, best_mode: str) -> bool:
    """Whether ``value`` is strictly better than ``best``."""
    return value < best if best_mode == "min" else value > best


def epoch_value(data: Data, metric: str) -> float:
    """The metric's value at an epoch's end, as one float (the mean of an array-valued metric; a ValWithError's value
    ``y``, as FastEstimator's comparisons read it)."""
    value = data[metric]
    if isinstance(value, ValWithError):
        return float(value.y)
    return float(np.mean(to_number(value)))
