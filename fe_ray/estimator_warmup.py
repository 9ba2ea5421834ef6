"""The Estimator's warm-up: one batch per mode and scheduled configuration, with updates off, before training.

It fails fast, before any weight changes, on every key an op or trace needs but nothing produces (naming the mode,
epoch and dataset of each), and on monitored names no mode produces; the pipeline's and network's states are put back
afterwards, so the run starts as if no warm-up had happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fe_ray.schedule import get_signature_epochs
from fe_ray.trace.essential import EvalEssential, TrainEssential
from fe_ray.trace.trace import Trace, trace_outputs

#: The modes ``fit`` runs.
FIT_MODES = ("train", "eval")


class EstimatorWarmup:
    """The warm-up part of :class:`~fe_ray.estimator.Estimator`, which provides the attributes and methods below."""

    pipeline: Any
    network: Any
    traces: list[Any]
    monitor_names: set[str]
    system: Any

    def _traces(self, mode: str, epoch: int | None, ds_id: str | None = None) -> list[Trace]:
        raise NotImplementedError

    @staticmethod
    def _wanted_keys(traces: Sequence[Trace]) -> set[str]:
        return {key for trace in traces for key in trace.inputs if key != "*"}

    def _warmup(self, eager: bool) -> None:
        """Run one batch per (mode, signature epoch, ds_id) with updates off; report every missing key at once."""
        pipeline_state = self.pipeline.state_dict() if hasattr(self.pipeline, "state_dict") else None
        network_state = self.network.state_dict()
        missing: list[str] = []
        unseen_monitors = set(self.monitor_names)
        for mode in FIT_MODES:
            if mode not in self.pipeline.get_modes():
                continue
            scheduled = (list(getattr(self.pipeline, "get_scheduled_items", lambda _m: [])(mode))
                         + list(self.network.get_scheduled_items(mode)) + list(self.traces))
            for epoch in get_signature_epochs(scheduled, self.system.total_epochs, mode=mode):
                if mode not in self.pipeline.get_modes(epoch):
                    continue
                ds_ids = self.pipeline.get_ds_ids(epoch, mode)
                for ds_id in ds_ids:
                    traces = self._traces(mode, epoch, ds_id)
                    where = f"mode {mode!r}, epoch {epoch}" + (f", ds_id {ds_id!r}" if ds_id else "")
                    try:
                        available = self._warmup_step(mode, epoch, ds_id, traces, eager)
                    except KeyError as err:  # an op's input is missing: say which epoch's configuration it is
                        self._restore_after_warmup(pipeline_state, network_state)
                        raise KeyError(f"{err.args[0] if err.args else err} (warm-up of {where})") from err
                    # The essentials re-log monitored keys, so their outputs cannot vouch for those keys.
                    # get_outputs: with several datasets a trace may also write per-dataset keys ("accuracy|b").
                    available |= {key for trace in traces if not isinstance(trace, (TrainEssential, EvalEssential))
                                  for key in trace_outputs(trace, ds_ids)}
                    unseen_monitors -= available
                    for trace in traces:
                        if isinstance(trace, (TrainEssential, EvalEssential)):
                            continue  # monitored keys may legitimately exist in one mode only
                        for key in trace.inputs:
                            if key != "*" and key not in available:
                                missing.append(f"{type(trace).__name__} needs key {key!r} ({where})")
        self._restore_after_warmup(pipeline_state, network_state)
        if unseen_monitors:
            missing.append(f"monitor_names {sorted(unseen_monitors)} are produced by neither the pipeline nor the "
                           "network in any mode")
        if missing:
            raise ValueError("Warmup found missing keys: " + "; ".join(missing) + ". Produce them in the Pipeline "
                             "ops, the Network ops, or an earlier Trace (or fix the key names).")

    def _restore_after_warmup(self, pipeline_state: Any, network_state: Any) -> None:
        if pipeline_state is not None:
            self.pipeline.load_state_dict(pipeline_state)
        self.network.load_state_dict(network_state)

    def _warmup_step(self, mode: str, epoch: int, ds_id: str, traces: Sequence[Trace], eager: bool) -> set[str]:
        with self.pipeline(mode=mode, epoch=epoch, ds_id=ds_id, shuffle=False, steps_per_epoch=1) as loader:
            batch = next(iter(loader), None)
        if batch is None:
            return set()
        if not isinstance(batch, dict):
            raise ValueError(f"The pipeline must yield dict batches, got {type(batch).__name__} in mode {mode!r}.")
        with self.network(mode=mode, epoch=epoch, ds_id=ds_id, desired_output_keys=self._wanted_keys(traces),
                          warmup=True, eager=eager) as network:
            result = network.run_step(batch)
        return set(result)


__all__ = ["FIT_MODES", "EstimatorWarmup"]
