"""EarlyStopping: end training when a monitored evaluation value stops improving."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_backend, to_number
from fe_ray.trace.trace import Data, Trace


class EarlyStopping(Trace):
    """Set ``system.stop_training`` once ``monitor`` has not improved for ``patience`` epochs.

    Args:
        monitor: The key to watch (e.g. a loss, or 'accuracy').
        min_delta: The smallest change that counts as an improvement.
        patience: How many epochs without improvement to tolerate (0 stops at the first non-improving epoch).
        compare: 'min' or 'max': whether smaller or larger values are better.
        baseline: A value the monitor must beat to count as an improvement at all (None: the first value counts).
        mode: Mode(s) in which to watch the key (evaluation by default).
        restore_best_weights: When stopping, put back the weights of the best epoch (an fe_ray extra, after
            FastEstimator's arguments).

    Raises:
        ValueError: If ``monitor`` is not a single key, ``compare`` is invalid or ``patience`` negative.
    """

    def __init__(self, monitor: str = "loss", min_delta: float = 0.0, patience: int = 0, compare: str = "min",
                 baseline: float | None = None, mode: None | str | Iterable[str] = "eval",
                 restore_best_weights: bool = False) -> None:
        if not isinstance(monitor, str):
            raise ValueError(f"EarlyStopping watches one key; monitor must be a str, got {monitor!r}. Use one "
                             "EarlyStopping per key to watch several.")
        if compare not in ("min", "max"):
            raise ValueError(f"EarlyStopping compare must be 'min' or 'max', got {compare!r}.")
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStopping patience must be a non-negative int, got {patience!r}.")
        super().__init__(inputs=monitor, mode=mode)
        # A network output that is not a loss gets averaged over evaluation too, as FastEstimator asks its
        # essential traces: without it such a monitor was never logged and the run never stopped.
        self.fe_monitor_names.add(monitor)
        self.monitor = monitor
        self.min_delta = abs(float(min_delta))
        self.patience = patience
        self.compare = compare
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self._reset()

    def _reset(self) -> None:
        self.wait = 0
        worst = math.inf if self.compare == "min" else -math.inf
        self.best = float(self.baseline) if self.baseline is not None else worst
        self.best_weights: dict[str, Any] | None = None

    def _improved(self, value: float) -> bool:
        # FastEstimator's expressions: mathematically value - best < -min_delta, but they round differently, and an
        # improvement of exactly min_delta (accuracies k / N with min_delta 1 / N) must decide as there.
        if self.compare == "min":
            return value + self.min_delta < self.best
        return value - self.min_delta > self.best

    def on_begin(self, data: Data) -> None:
        self._reset()

    def on_epoch_end(self, data: Data) -> None:
        if self.monitor not in data:
            return
        value = float(np.mean(to_number(data[self.monitor])))
        if self._improved(value):
            self.best = value
            self.wait = 0
            if self.restore_best_weights:
                self.system.sync_models()
                # The weights alone: copying the optimizer's state (twice the weights' size for Adam) would be
                # thrown away, since the restore keeps the optimizer's current state.
                self.best_weights = {model.model_name: get_backend(model).get_state(model, weights_only=True)["model"]
                                     for model in self.system.network.models}
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        self.system.stop_training = True
        print(f"FastEstimator-EarlyStopping: '{self.monitor}' triggered an early stop. Its best value was "
              f"{self.best} at epoch {self.system.epoch_idx - self.wait}", flush=True)
        if self.restore_best_weights and self.best_weights is not None:
            for model in self.system.network.models:
                get_backend(model).set_state(model, {"model": self.best_weights[model.model_name], "optimizer": None})
            self.system.push_models()
            print("FastEstimator-EarlyStopping: Restoring best weights", flush=True)

    def state_dict(self) -> dict[str, Any]:
        return {"wait": self.wait, "best": self.best, "best_weights": self.best_weights}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.wait = int(state["wait"])
        self.best = float(state["best"])
        self.best_weights = state.get("best_weights")
