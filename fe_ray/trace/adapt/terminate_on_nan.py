"""TerminateOnNaN: end training as soon as a monitored value turns NaN or infinite."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.schedule import get_current_items
from fe_ray.trace.trace import Data, Trace, trace_outputs


def has_nan(value: Any) -> bool:
    """Whether ``value`` (a number, array or tensor) holds a NaN or an infinity; non-numeric values hold none."""
    try:
        array = np.asarray(to_number(value))
    except Exception:  # noqa: BLE001 - a value no backend converts (a string, an object) cannot be NaN
        return False
    if array.dtype.kind not in "fc":  # ints, bools and strings have no NaN
        return False
    return bool(not np.all(np.isfinite(array)))


class TerminateOnNaN(Trace):
    """Set ``system.stop_training`` when a monitored value is NaN or infinite after a batch or an epoch.

    Training then ends right after the current event (no further batches, epochs or evaluation); ``on_end`` still
    runs, so savers and loggers finish.

    Args:
        monitor_names: The key(s) to check. None checks the network's losses; ``"*"`` checks the losses and every key
            the traces of the current mode and epoch write (e.g. 'accuracy').
        mode: Mode(s) in which to check; None for all.
        ds_id: Dataset id(s) in which to check; None for all.
    """

    def __init__(self, monitor_names: None | str | Iterable[str] = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=monitor_names, mode=mode, ds_id=ds_id)
        self._keys: list[str] = []
        self._keys_for: tuple[Any, ...] | None = None  # the (mode, epoch) that _keys were worked out for

    def _monitor_keys(self) -> list[str]:
        # Worked out per mode and epoch (scheduled traces and ops may differ), and lazily rather than only at
        # on_epoch_begin: a run resumed in the middle of an epoch skips that event.
        where = (self.system.mode, self.system.epoch_idx)
        if self._keys_for == where:
            return self._keys
        if self.inputs and "*" not in self.inputs:
            keys = list(self.inputs)
        else:
            keys = sorted(self.system.network.get_loss_keys())
            if "*" in self.inputs:
                traces = get_current_items(self.system.traces, run_modes=self.system.mode,
                                           epoch=self.system.epoch_idx)
                ds_ids = self.system.pipeline.get_ds_ids(self.system.epoch_idx, self.system.mode)
                keys += [key for trace in traces if trace is not self for key in trace_outputs(trace, ds_ids)
                         if key not in keys]
        self._keys, self._keys_for = keys, where
        return keys

    def _check(self, data: Data, replicas: bool = False) -> None:
        for key in self._monitor_keys():
            if key not in data:
                continue
            if has_nan(data[key]):
                where = ""
            elif replicas and (ranks := self._non_finite_ranks(key)):
                where = f" (on replica rank(s) {ranks})"
            else:
                continue
            self.system.stop_training = True
            print(f"FastEstimator-TerminateOnNaN: NaN Detected in: {key}{where}", flush=True)

    def _non_finite_ranks(self, key: str) -> list[int]:
        """The replicas whose own value of ``key`` in the last step was NaN or infinite.

        The merged value of a per-replica scalar is the mean over the finite replicas (one replica's NaN does not hide
        the others' values), but one process would have computed a NaN over the whole batch: stop as it would.
        """
        values = getattr(self.system.network, "replica_outputs", None) or {}
        return sorted(rank for rank, value in values.get(key, {}).items() if has_nan(value))

    def on_epoch_begin(self, data: Data) -> None:
        self._keys_for = None  # the traces in use may have changed with the epoch

    def on_batch_end(self, data: Data) -> None:
        self._check(data, replicas=True)

    def on_epoch_end(self, data: Data) -> None:
        self._check(data)
