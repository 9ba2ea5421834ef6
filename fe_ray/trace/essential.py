"""Traces the Estimator adds by itself: timing and monitored values in training, epoch means in evaluation and
testing."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_lr, to_number
from fe_ray.schedule import get_current_items
from fe_ray.trace.trace import Data, Trace, per_ds_keys, trace_writes


def requested_monitor_names(traces: Iterable[Any]) -> set[str]:
    """The keys ``traces`` (or Schedulers of them) ask to be monitored (:attr:`Trace.fe_monitor_names`), less the
    keys a trace writes itself (those are the writer's to log). The essential traces themselves are left out: they
    only re-log monitored keys."""
    items = [trace for trace in get_current_items(traces) if not isinstance(trace, (TrainEssential, EvalEssential))]
    requested = {key for trace in items for key in getattr(trace, "fe_monitor_names", ())}
    return {key for key in requested if not any(trace_writes(trace, key) for trace in items)}


def _monitor_requested(trace: Trace, also_outputs: bool) -> None:
    """Add the keys the run's traces ask to be monitored to an essential trace's inputs (and outputs).

    Done at ``on_begin``, when ``system.traces`` holds the run's traces: the Estimator builds the essential traces
    from its ``monitor_names`` and the network's losses only.
    """
    extra = sorted(requested_monitor_names(getattr(trace.system, "traces", ())) - set(trace.inputs))
    trace.inputs.extend(extra)
    if also_outputs:
        trace.outputs.extend(key for key in extra if key not in trace.outputs)


class TrainEssential(Trace):
    """Logs the monitored keys every ``log_steps`` training steps (and at step 1), steps/sec and epoch times.

    Args:
        monitor_names: Keys (losses and user-chosen extras) to log during training.
    """

    def __init__(self, monitor_names: Iterable[str]) -> None:
        super().__init__(inputs=sorted(monitor_names), mode="train",
                         outputs=["steps/sec", "epoch_time(sec)", "total_time(sec)"])
        self.train_start = 0.0
        self.epoch_start = 0.0
        self.step_start = 0.0

    def on_begin(self, data: Data) -> None:
        _monitor_requested(self, also_outputs=False)
        # Timers start here too so a run resumed mid-epoch (no on_epoch_begin) has them.
        self.train_start = self.epoch_start = self.step_start = time.perf_counter()
        data.write_with_log("num_device", self.system.num_devices)
        data.write_with_log("logging_interval", self.system.log_steps)

    def on_epoch_begin(self, data: Data) -> None:
        self.epoch_start = self.step_start = time.perf_counter()

    def on_batch_end(self, data: Data) -> None:
        log_steps = self.system.log_steps
        step = self.system.global_step or 0
        if not log_steps or not (step % log_steps == 0 or step == 1):
            return
        # With several training datasets each value is logged as '<key>|<ds_id>', as FastEstimator does.
        ds_id = self.system.ds_id
        suffix = f"|{ds_id}" if ds_id else ""
        for key in self.inputs:
            if key in data:
                data.write_with_log(f"{key}{suffix}", data[key])
        now = time.perf_counter()
        if step > 1:
            data.write_with_log(f"steps/sec{suffix}", round(log_steps / max(now - self.step_start, 1e-9), 2))
        self.step_start = now

    def on_epoch_end(self, data: Data) -> None:
        if self.system.log_steps:
            data.write_with_log("epoch_time(sec)", round(time.perf_counter() - self.epoch_start, 2))

    def on_end(self, data: Data) -> None:
        data.write_with_log("total_time(sec)", round(time.perf_counter() - self.train_start, 2))
        for model in self.system.network.models:  # the final learning rates, as FastEstimator logs them
            if getattr(model, "current_optimizer", None) is not None:
                data.write_with_log(f"{model.model_name}_lr", _as_logged_lr(get_lr(model)))


def _as_logged_lr(lr: Any) -> Any:
    """A learning rate as FastEstimator's final log line shows it: a float32 where the optimizer holds one.

    FastEstimator's ``LRScheduler`` sets float32 rates, which it logs as numpy float32s (``0.0009``); a torch
    optimizer keeps fe_ray's rate as a Python float, whose repr would show the float32's binary expansion
    (``0.0008999999845400453``). A float that float32 represents exactly is logged as that float32, which prints the
    same digits FastEstimator does; any other float (a torch rate set from Python) stays as it is. (TF's ``get_lr``
    already returns the rate variable's float32.)
    """
    if isinstance(lr, float) and math.isfinite(lr) and float(np.float32(lr)) == lr:
        return np.float32(lr)
    return lr


def epoch_mean(values: list[Any]) -> Any:
    """The element-wise mean over the batches of one monitored key.

    Values of one shape average element by element (a scalar loss stays a scalar, a per-class array stays an array), as
    FastEstimator does. Per-sample arrays whose last batch is shorter cannot stack; they average over all their samples,
    and values of other mixed shapes fall back to the mean of each batch's mean.

    Args:
        values: One value (a number or an array) per batch.

    Returns:
        The mean: a numpy scalar or array.
    """
    arrays = [np.asarray(value) for value in values]
    if len({array.shape for array in arrays}) <= 1:
        return np.mean(np.array(arrays), axis=0)
    if all(array.ndim >= 1 for array in arrays) and len({array.shape[1:] for array in arrays}) == 1:
        return np.mean(np.concatenate(arrays), axis=0)
    return np.mean([np.mean(array) for array in arrays])


class EvalEssential(Trace):
    """Logs the mean over the evaluation batches of each monitored key at the end of each evaluation epoch, and with
    several datasets each dataset's mean as ``<key>|<ds_id>`` too; ``steps/sec`` on the evaluation log steps.

    Args:
        monitor_names: Keys (usually the losses) to average.
        mode: The mode whose epochs it averages (:class:`TestEssential` uses "test").
    """

    def __init__(self, monitor_names: Iterable[str], mode: str = "eval") -> None:
        names = sorted(monitor_names)
        super().__init__(inputs=names, outputs=names, mode=mode)
        self.eval_results: dict[str, dict[str, list[Any]]] = {}  # key -> ds_id ('' without datasets) -> batch values
        self.step_start = 0.0
        self.logged_step = 0  # the batch of the dataset at which steps/sec was last written

    def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
        return list(self.outputs) + per_ds_keys(self.outputs, ds_ids)

    def on_begin(self, data: Data) -> None:
        _monitor_requested(self, also_outputs=True)

    def on_epoch_begin(self, data: Data) -> None:
        self.eval_results = {}
        self.step_start = time.perf_counter()
        self.logged_step = 0

    def on_batch_end(self, data: Data) -> None:
        ds_id = self.system.ds_id
        for key in self.inputs:
            if key in data:
                self.eval_results.setdefault(key, {}).setdefault(ds_id, []).append(np.asarray(to_number(data[key])))
        if self.mode == {"eval"}:
            self._log_speed(data)

    def _log_speed(self, data: Data) -> None:
        """``steps/sec`` since the last evaluation log step, on each of them after the first (FastEstimator's)."""
        step = self.system.batch_idx
        if step < self.logged_step:  # the next dataset of the epoch: its own count
            self.logged_step = 0
        if step in self.system.eval_log_steps[0]:
            now = time.perf_counter()
            if step > 1:
                data.write_with_log("steps/sec", round((step - self.logged_step) / max(now - self.step_start, 1e-9),
                                                       2))
            self.logged_step, self.step_start = step, now

    def on_epoch_end(self, data: Data) -> None:
        for key, per_ds in self.eval_results.items():
            for ds_id, values in per_ds.items():
                if ds_id:
                    data.write_with_log(f"{key}|{ds_id}", epoch_mean(values))
            every = [value for values in per_ds.values() for value in values]
            data.write_with_log(key, epoch_mean(every))

    def state_dict(self) -> dict[str, Any]:
        return {"eval_results": {key: {ds_id: list(values) for ds_id, values in per_ds.items()}
                                 for key, per_ds in self.eval_results.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # A list per key: a checkpoint written before the per-dataset means (one dataset's values, or all of them).
        self.eval_results = {key: ({"": list(per_ds)} if isinstance(per_ds, list) else
                                   {str(ds_id): list(values) for ds_id, values in per_ds.items()})
                             for key, per_ds in state.get("eval_results", {}).items()}


class TestEssential(EvalEssential):
    """Logs the mean over the test batches of each monitored key at the end of the test epoch (``Estimator.test``).

    Args:
        monitor_names: Keys (usually the losses) to average.
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, monitor_names: Iterable[str]) -> None:
        super().__init__(monitor_names, mode="test")
