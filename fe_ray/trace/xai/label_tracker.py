"""LabelTracker: a per-sample metric (such as the loss) averaged per class at the end of each epoch, as graphs."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.summary.summary import Summary, ValWithError
from fe_ray.trace.trace import Data, Trace
from fe_ray.trace.xai._common import invert_mapping
from fe_ray.util import to_set

BOUNDS = (None, "std", "range")


def per_sample(trace: str, labels: Any, metric: Any, label_key: str, metric_key: str) -> tuple[np.ndarray, ...]:
    """A batch's labels (or indices) and metric values as two flat numpy arrays of one value per sample.

    Raises:
        ValueError: If either has more than one value per sample, or they differ in length.
    """
    from fe_ray.backend import to_number

    arrays = []
    for key, value in ((label_key, labels), (metric_key, metric)):
        array = np.asarray(to_number(value))
        if array.ndim == 0 or array.size != len(array):
            raise ValueError(f"{trace} needs one value per sample under {key!r}, got shape {list(array.shape)}; "
                             "for a loss, compute it per sample (e.g. CrossEntropy(..., average_loss=False)).")
        arrays.append(array.reshape(-1))
    if len(arrays[0]) != len(arrays[1]):
        raise ValueError(f"{trace} got {len(arrays[0])} values under {label_key!r} but {len(arrays[1])} under "
                         f"{metric_key!r}; they must describe the same samples.")
    return arrays[0], arrays[1]


def _new_summary(name: Any) -> Summary:
    return Summary(name=name)


class LabelTracker(Trace):
    """Track a per-sample metric grouped by class over training, e.g. each class's loss.

    At the end of each epoch of its modes the metric of the epoch's samples is averaged per label value and
    recorded, at the current global step, in one :class:`~fe_ray.summary.summary.Summary` per class (named after
    the class; history ``[mode][metric key][step]``): with ``'std'`` as a
    :class:`~fe_ray.summary.summary.ValWithError` ``(mean - std, mean, mean + std)`` under
    ``'<metric> ($\\mu \\pm \\sigma$)'`` (sample standard deviation; 0 for one sample), with ``'range'`` as
    ``(min, mean, max)`` under ``'<metric> ($min, \\mu, max$)'``, with None the mean under the metric's key. At the
    end of training the list of Summaries is written (without logging) under ``outputs`` and added to the
    System's graphs (``system.add_graph``), as FastEstimator does for its reports.

    Differences from FastEstimator 1.7: a metric or label with more than one value per sample raises ValueError
    naming the key (the metric must be per sample, e.g. ``CrossEntropy(..., average_loss=False)``); the state
    (per-class histories and the current epoch's values) is saved by ``state_dict`` for checkpoints.

    Args:
        label: The key of the labels (class values) to group by.
        metric: The key of the per-sample metric.
        label_mapping: ``{display_name: label_value}``: names the classes, and only these classes are tracked;
            None tracks every label value under its value.
        bounds: The error band(s) to record: None, 'std', 'range', or several of them (a list).
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.
        outputs: The key to write the Summaries to; None: ``'<metric>_by_<label>'``.

    Raises:
        ValueError: If a bound is not None, 'std' or 'range', or ``label_mapping`` is not a dict of hashable values.
    """

    def __init__(self, label: str, metric: str, label_mapping: Mapping[str, Any] | None = None,
                 bounds: None | str | Iterable[str | None] = "std", mode: None | str | Iterable[str] = "eval",
                 ds_id: None | str | Iterable[str] = None, outputs: str | None = None) -> None:
        super().__init__(inputs=[label, metric], outputs=outputs or f"{metric}_by_{label}", mode=mode, ds_id=ds_id)
        self.label_mapping = invert_mapping(label_mapping, "LabelTracker")
        try:
            chosen = to_set(bounds) or {None}
        except TypeError as err:
            raise ValueError(f"LabelTracker bounds must be None, 'std', 'range' or a list of them, got "
                             f"{bounds!r}.") from err
        wrong = [option for option in chosen if option not in BOUNDS]
        if wrong:
            raise ValueError(f"LabelTracker bounds must be None, 'std', 'range' or a list of them, got {wrong}.")
        self.bounds = chosen
        self.points: list[tuple[np.ndarray, np.ndarray]] = []
        self.label_summaries: dict[Any, Summary] = {}

    @property
    def label_key(self) -> str:
        return self.inputs[0]

    @property
    def metric_key(self) -> str:
        return self.inputs[1]

    def on_batch_end(self, data: Data) -> None:
        self.points.append(per_sample("LabelTracker", data[self.label_key], data[self.metric_key], self.label_key,
                                      self.metric_key))

    def on_epoch_end(self, data: Data) -> None:
        scores: defaultdict[Any, list[float]] = defaultdict(list)
        for labels, metrics in self.points:
            for label, metric in zip(labels, metrics):
                scores[label.item()].append(float(metric))
        self.points = []
        mode, step = self.system.mode, self.system.global_step
        for label, values in scores.items():
            if self.label_mapping is not None:
                if label not in self.label_mapping:
                    continue  # a class the user does not want to follow
                label = self.label_mapping[label]
            history = self.label_summaries.setdefault(label, _new_summary(label)).history[mode]
            mean = statistics.mean(values)
            if "std" in self.bounds:
                std = statistics.stdev(values) if len(values) > 1 else 0.0
                history[f"{self.metric_key} ($\\mu \\pm \\sigma$)"][step] = ValWithError(mean - std, mean, mean + std)
            if "range" in self.bounds:
                history[f"{self.metric_key} ($min, \\mu, max$)"][step] = ValWithError(min(values), mean, max(values))
            if None in self.bounds:
                history[self.metric_key][step] = mean

    def on_end(self, data: Data) -> None:
        summaries = list(self.label_summaries.values())
        self.system.add_graph(self.outputs[0], summaries)
        data.write_without_log(self.outputs[0], summaries)

    def state_dict(self) -> dict[str, Any]:
        return {"label_summaries": [(label, summary.state_dict()) for label, summary in self.label_summaries.items()],
                "points": [(labels.copy(), metrics.copy()) for labels, metrics in self.points]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.label_summaries = {}
        for label, summary_state in state.get("label_summaries", []):
            summary = _new_summary(label)
            summary.load_state_dict(summary_state)
            self.label_summaries[label] = summary
        self.points = [(np.array(labels), np.array(metrics)) for labels, metrics in state.get("points", [])]
