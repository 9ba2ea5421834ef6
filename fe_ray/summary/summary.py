"""Summary: the per-mode, per-key, per-step history of a training run."""

from __future__ import annotations

import numbers
import re
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np


def _key_history() -> defaultdict[str, dict[int, Any]]:
    # A module-level factory (not a lambda) keeps the nested defaultdicts picklable.
    return defaultdict(dict)



class ValWithError(NamedTuple):
    """A value logged with an error band, as FastEstimator's ``ValWithError``: ``(y_min, y, y_max)``.

    :class:`fe_ray.trace.metric.Dice` logs one per key when ``include_std`` is set, with ``y`` the mean and the band
    one standard deviation either side; :class:`fe_ray.trace.metric.CalibrationError` logs one when given a
    ``confidence_interval``, with the band a bootstrap interval around the error. It prints as ``(y_min, y, y_max)``
    (CSVLogger: ``(y_min; y; y_max)``) and, as FastEstimator's, compares, adds, subtracts and multiplies by its value
    ``y`` (``ValWithError(1, 2, 3) > 1.5``, ``max`` of several picks the largest ``y``), so that traces such as
    BestModelSaver or EarlyStopping can watch it; being a tuple it still indexes and unpacks as ``(y_min, y, y_max)``
    and pickles into checkpoints.

    Attributes:
        y_min: The lower end of the band.
        y: The value itself.
        y_max: The upper end of the band.
    """

    y_min: float
    y: float
    y_max: float

    def __str__(self) -> str:
        # The Logger prints it with str(), FastEstimator's text: each number in full.
        return f"({self.y_min}, {self.y}, {self.y_max})"

    def as_tuple(self) -> tuple[float, float, float]:
        """``(y_min, y, y_max)`` as a plain tuple."""
        return self.y_min, self.y, self.y_max

    # FastEstimator's operators: comparisons and arithmetic act on the value y (another ValWithError's y too).
    def __lt__(self, other: Any) -> Any:
        return self.y < _value(other)

    def __le__(self, other: Any) -> Any:
        return self.y <= _value(other)

    def __gt__(self, other: Any) -> Any:
        return self.y > _value(other)

    def __ge__(self, other: Any) -> Any:
        return self.y >= _value(other)

    def __eq__(self, other: object) -> Any:
        return self.y == _value(other)

    def __ne__(self, other: object) -> Any:
        return self.y != _value(other)

    def __hash__(self) -> int:  # equal values hash alike, as __eq__ compares the values
        return hash(self.y)

    def __add__(self, other: Any) -> Any:  # type: ignore[override]
        return self.y + _value(other)

    def __radd__(self, other: Any) -> Any:
        return _value(other) + self.y

    def __sub__(self, other: Any) -> Any:
        return self.y - _value(other)

    def __rsub__(self, other: Any) -> Any:
        return _value(other) - self.y

    def __mul__(self, other: Any) -> Any:  # type: ignore[override]
        return self.y * _value(other)

    def __rmul__(self, other: Any) -> Any:  # type: ignore[override]
        return _value(other) * self.y

    def __abs__(self) -> Any:
        return abs(self.y)


def _value(other: Any) -> Any:
    return other.y if isinstance(other, ValWithError) else other


class Summary:
    """The recorded values of an experiment: ``history[mode][key][step] = value``.

    Unlike FastEstimator, an unnamed Summary (``name=None``) still records everything, so ``Estimator.fit()``
    always returns the history; the name only labels the experiment.

    Args:
        name: The experiment name, or None.
        system_config: An optional description of the configuration that produced this summary.

    Attributes:
        history: ``mode -> key -> {global_step: value}``. Missing modes/keys are created on first write.
    """

    def __init__(self, name: str | None, system_config: Any = None) -> None:
        self.name = name
        self.system_config = system_config
        self.history: defaultdict[str, defaultdict[str, dict[int, Any]]] = defaultdict(_key_history)

    def merge(self, other: Summary) -> None:
        """Add ``other``'s entries into this summary (``other`` wins where both hold a step)."""
        for mode, keys in other.history.items():
            for key, steps in keys.items():
                self.history[mode][key].update(steps)

    def state_dict(self) -> dict[str, Any]:
        """A plain-dict (no defaultdict) copy of the summary, safe to pickle or compare."""
        return {"name": self.name, "system_config": self.system_config,
                "history": {mode: {key: dict(steps) for key, steps in keys.items()}
                            for mode, keys in self.history.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace this summary's contents with a :meth:`state_dict` snapshot.

        Raises:
            ValueError: If ``state`` lacks the ``history`` entry.
        """
        if "history" not in state:
            raise ValueError(f"Summary state needs a 'history' entry, got keys {sorted(state)}.")
        self.name = state.get("name", self.name)
        self.system_config = state.get("system_config", self.system_config)
        self.history = defaultdict(_key_history)
        for mode, keys in state["history"].items():
            for key, steps in keys.items():
                self.history[mode][key] = dict(steps)

    def __repr__(self) -> str:
        keys = {mode: sorted(keys) for mode, keys in self.history.items()}
        return f"Summary(name={self.name!r}, keys={keys})"


def average_summaries(name: str, summaries: Sequence[Summary]) -> Summary:
    """Combine the histories of several runs of one experiment into their mean and spread, as FastEstimator's
    ``fe.summary.summary.average_summaries``.

    Every (mode, key, step) that at least one summary holds becomes, in the result, the mean of the values the
    summaries hold there, stored as ``ValWithError(mean - std, mean, mean + std)`` (sample standard deviation) when
    two or more values differ, and as the value itself when there is only one value or all are equal. A
    ValWithError contributes its middle value; a string contributes the one number written in it (none or several:
    skipped); other non-numeric values (arrays of several elements, lists) are skipped. The ``epoch`` key is not
    averaged (runs may stop at different epochs), and the ``test`` mode is pooled over its steps into one entry at
    the largest step, since early stopping makes runs test at different steps.

    Unlike FastEstimator, numpy scalars and one-element arrays (what ``Estimator.fit`` records) count as numbers
    rather than being dropped.

    Args:
        name: The name of the combined summary.
        summaries: The summaries to combine. One summary is renamed to ``name`` and returned as it is (not a copy),
            as in FastEstimator; none gives an empty summary.

    Returns:
        The combined summary.

    Raises:
        TypeError: If an element of ``summaries`` is not a Summary.
    """
    summaries = list(summaries)
    for summary in summaries:
        if not isinstance(summary, Summary):
            raise TypeError(f"average_summaries needs Summary objects, got {type(summary).__name__} {summary!r}.")
    if not summaries:
        return Summary(name=name)
    if len(summaries) == 1:
        summaries[0].name = name
        return summaries[0]
    combined = Summary(name=name)
    modes = list(dict.fromkeys(mode for summary in summaries for mode in summary.history))
    for mode in modes:
        keys = list(dict.fromkeys(key for summary in summaries for key in summary.history.get(mode, {})))
        for key in keys:
            if key == "epoch":
                continue
            per_step: dict[int, list[float]] = {}
            for summary in summaries:
                for step, value in summary.history.get(mode, {}).get(key, {}).items():
                    number = _as_number(value)
                    if number is not None:
                        per_step.setdefault(step, []).append(number)
            if not per_step:
                continue
            if mode == "test":
                # Pool every run's test values into one point at the last step any run tested at.
                per_step = {max(per_step): [value for values in per_step.values() for value in values]}
            for step in sorted(per_step):
                combined.history[mode][key][step] = _reduce_list(per_step[step])
    return combined


def _as_number(value: Any) -> float | None:
    """The number a history value stands for in an average, or None when it stands for none."""
    if isinstance(value, ValWithError):
        return float(value.y)
    if isinstance(value, str):
        found = re.findall(r"(\d+\.\d+|\.?\d+)", value)  # FastEstimator's rule: exactly one unsigned number
        return float(found[0]) if len(found) == 1 else None
    if isinstance(value, np.ndarray):
        if value.size != 1 or not np.issubdtype(value.dtype, np.number):
            return None
        value = value.reshape(-1)[0]
    if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, np.complexfloating):
        return value if isinstance(value, int) else float(value)
    return None


def _reduce_list(values: list[float]) -> float | ValWithError:
    """One value for a non-empty list: itself when all are equal, else mean +- one sample standard deviation."""
    if all(value == values[0] for value in values[1:]):
        return values[0]
    mean = statistics.mean(values)
    std = statistics.stdev(values)
    return ValWithError(mean - std, mean, mean + std)
