"""InstanceTracker: a per-sample metric (such as the loss) of individual samples over training, as graphs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.summary.summary import Summary
from fe_ray.trace.trace import Data, Trace
from fe_ray.trace.xai.label_tracker import per_sample
from fe_ray.util import check_count, to_set


class InstanceTracker(Trace):
    """Track a per-sample metric of individual samples over training, e.g. each sample's loss, to find the hardest
    and easiest ones.

    Every ``epoch_frequency``-th epoch of its modes, each sample's last metric value of the epoch (samples known by
    the value under ``index``) is recorded with the global step. At the end of training, per mode, the
    ``n_max_to_keep`` samples whose last recorded value is highest, the ``n_min_to_keep`` lowest and those of
    ``list_to_keep`` get one :class:`~fe_ray.summary.summary.Summary` each (named after the index; history
    ``[mode][metric key][step]``). The list of Summaries is written (without logging) under ``outputs`` and added
    to the System's graphs (``system.add_graph``), as FastEstimator does for its reports. When only
    ``list_to_keep`` is wanted (both counts 0), other samples are not recorded at all.

    Differences from FastEstimator 1.7: a metric or index with more than one value per sample raises ValueError
    naming the key (the metric must be per sample, e.g. ``CrossEntropy(..., average_loss=False)``); with ``mode``
    None the modes the trace ran in are reported; the state (histories and the current epoch's values) is saved by
    ``state_dict`` for checkpoints.

    Args:
        index: The key of the sample indices (e.g. from a dataset's index op).
        metric: The key of the per-sample metric.
        n_max_to_keep: How many samples with the highest final value to report.
        n_min_to_keep: How many samples with the lowest final value to report.
        list_to_keep: Indices of particular samples to report as well (or only, with both counts 0).
        epoch_frequency: Record every this many epochs (fewer values, less memory).
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.
        outputs: The key to write the Summaries to; None: ``'<metric>_by_<index>'``.

    Raises:
        ValueError: If ``n_max_to_keep`` or ``n_min_to_keep`` is not an int >= 0 or ``epoch_frequency`` not an int
            >= 1.
    """

    def __init__(self, index: str, metric: str, n_max_to_keep: int = 5, n_min_to_keep: int = 5,
                 list_to_keep: Iterable[Any] | None = None, epoch_frequency: int = 1,
                 mode: None | str | Iterable[str] = "eval", ds_id: None | str | Iterable[str] = None,
                 outputs: str | None = None) -> None:
        super().__init__(inputs=[index, metric], outputs=outputs or f"{metric}_by_{index}", mode=mode, ds_id=ds_id)
        self.n_max_to_keep = check_count(n_max_to_keep, "InstanceTracker n_max_to_keep", minimum=0)
        self.n_min_to_keep = check_count(n_min_to_keep, "InstanceTracker n_min_to_keep", minimum=0)
        self.epoch_frequency = check_count(epoch_frequency, "InstanceTracker epoch_frequency", minimum=1)
        self.idx_to_keep = to_set(list_to_keep)
        self.points: list[tuple[np.ndarray, np.ndarray]] = []
        self.index_history: dict[str, dict[Any, list[tuple[int, float]]]] = {}  # {mode: {idx: [(step, metric)]}}

    @property
    def index_key(self) -> str:
        return self.inputs[0]

    @property
    def metric_key(self) -> str:
        return self.inputs[1]

    def _recording(self) -> bool:
        return self.system.epoch_idx % self.epoch_frequency == 0

    def on_batch_end(self, data: Data) -> None:
        if self._recording():
            self.points.append(per_sample("InstanceTracker", data[self.index_key], data[self.metric_key],
                                          self.index_key, self.metric_key))

    def on_epoch_end(self, data: Data) -> None:
        if self._recording():
            scores: dict[Any, float] = {}
            for indices, metrics in self.points:
                for idx, metric in zip(indices, metrics):
                    scores[idx.item()] = float(metric)  # a sample seen twice keeps its last value
            # Others can be dropped now only when no top / bottom ranking needs every sample's history.
            only_listed = bool(self.idx_to_keep) and self.n_min_to_keep == 0 and self.n_max_to_keep == 0
            history = self.index_history.setdefault(self.system.mode, {})
            for idx, metric in scores.items():
                if only_listed and idx not in self.idx_to_keep:
                    continue
                history.setdefault(idx, []).append((self.system.global_step, metric))
        self.points = []

    def on_end(self, data: Data) -> None:
        summaries: dict[Any, Summary] = {}
        modes = sorted(self.mode) if self.mode else sorted(self.index_history)
        for mode in modes:
            history = self.index_history.get(mode, {})
            final = sorted(((idx, values[-1][1]) for idx, values in history.items()), key=lambda item: item[1])
            first_highest = max(len(final) - self.n_max_to_keep, 0) if self.n_max_to_keep else len(final)
            highest = {idx for idx, _ in final[first_highest:]}
            lowest = {idx for idx, _ in final[:self.n_min_to_keep]}
            for idx in highest | lowest | self.idx_to_keep:
                for step, score in history.get(idx, []):
                    summaries.setdefault(idx, Summary(name=idx)).history[mode][self.metric_key][step] = score
        result = list(summaries.values())
        self.system.add_graph(self.outputs[0], result)
        data.write_without_log(self.outputs[0], result)

    def state_dict(self) -> dict[str, Any]:
        return {"index_history": {mode: {idx: list(values) for idx, values in history.items()}
                                  for mode, history in self.index_history.items()},
                "points": [(indices.copy(), metrics.copy()) for indices, metrics in self.points]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.index_history = {str(mode): {idx: [(int(step), float(score)) for step, score in values]
                                          for idx, values in history.items()}
                              for mode, history in state.get("index_history", {}).items()}
        self.points = [(np.array(indices), np.array(metrics)) for indices, metrics in state.get("points", [])]
