"""Summary: the per-mode, per-key, per-step history of a training run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, NamedTuple


def _key_history() -> defaultdict[str, dict[int, Any]]:
    # A module-level factory (not a lambda) keeps the nested defaultdicts picklable.
    return defaultdict(dict)



class ValWithError(NamedTuple):
    """A value logged with an error band, as FastEstimator's ``ValWithError``: ``(y_min, y, y_max)``.

    :class:`fe_ray.trace.metric.Dice` logs one per key when ``include_std`` is set, with ``y`` the mean and the band
    one standard deviation either side; :class:`fe_ray.trace.metric.CalibrationError` logs one when given a
    ``confidence_interval``, with the band a bootstrap interval around the error. Being a tuple, it pickles into
    checkpoints, becomes a 3-element array for numpy (so CSVLogger writes ``[y_min;y;y_max]``), and prints as
    ``(y_min, y, y_max)`` in the Logger's output.

    Attributes:
        y_min: The lower end of the band.
        y: The value itself.
        y_max: The upper end of the band.
    """

    y_min: float
    y: float
    y_max: float

    def __str__(self) -> str:
        # The Logger prints anything that is not a number or an array with str(): keep its 7-digit style.
        return f"({self.y_min:.7g}, {self.y:.7g}, {self.y_max:.7g})"

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
