"""Dice: the overlap between predicted and ground-truth segmentation masks, averaged per sample over an epoch."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import dice_score, reduce_max, reduce_min, to_number
from fe_ray.summary.summary import ValWithError
from fe_ray.trace.trace import Data, Trace, per_ds_keys

#: Added to each Dice denominator: small enough not to bias a score of a few pixels, large enough to make the
#: score of two empty masks 0 instead of a division by zero (those are turned to NaN and skipped anyway).
EPSILON = 1e-8


class Dice(Trace):
    """Dice score of segmentation masks, averaged over the samples of an epoch and logged at its end.

    Each batch gives one score ``2 |P * T| / (|P| + |T|)`` per sample and channel, with ``P`` the prediction
    (binarised by ``threshold``) and ``T`` the ground truth. A channel that is empty in both (the object is absent
    and the model found nothing) gives no score rather than 0, so it does not drag the mean down. At the epoch's end
    the scores of each channel are averaged over all samples (not per batch, so batch sizes do not matter), and
    ``output_name`` gets the mean of those channel means, ``exclude_channels`` left out.

    Masks are laid out ``(batch, C, ...)`` for torch tensors and ``(batch, ..., C)`` for TensorFlow tensors and
    numpy arrays (as :func:`fe_ray.backend.dice_score` reads them), with values in [0, 1]: probabilities, not
    logits, and one-hot (not class-index) ground truth.

    Keys logged at each epoch's end:

    * ``<output_name>``: the mean over the channels of each channel's mean score.
    * ``<output_name>_<name>`` for each channel not excluded, when ``channel_mapping`` is given and more than one
      channel got a score in the epoch: that channel's mean score. ``<name>`` is ``channel_mapping[index]``, or the
      index for a channel the mapping leaves out.
    * With several datasets in a mode (a ``{ds_id: dataset}`` dict in the Pipeline) and ``per_ds``, the keys above
      are also logged over each dataset as ``<key>|<ds_id>``.

    With ``include_std`` each value is a :class:`ValWithError` ``(mean - std, mean, mean + std)`` instead of a
    number: for a channel the standard deviation of its per-sample scores, for ``<output_name>`` the mean of the
    channels' standard deviations. Each batch also writes per-sample scores (``<output_name>``, and
    ``<output_name>_<name>`` per channel when there are several) for per-instance loggers such as CSVLogger.

    Args:
        true_key: Key of the ground-truth masks.
        pred_key: Key of the predicted masks.
        threshold: Predictions above it count as 1, the rest as 0; None scores the raw values (a soft Dice). With a
            background channel and ``mask_overlap=False``, 0.0 gives each pixel to its highest-scoring channel.
        mask_overlap: Whether a pixel may belong to several channels (True) or only to the one(s) with its highest
            prediction (False: the others are set to 0 before thresholding).
        exclude_channels: Channel index or indices left out of the reported values (e.g. 0 for a background
            channel). They are still scored per sample, as in FastEstimator.
        channel_mapping: Names of channel indices (``{1: "liver"}``); when given, each channel's mean is also
            logged.
        include_std: Whether to log each value with one standard deviation around it (see above).
        mode: Mode(s) in which to compute it ('train', 'eval', 'test'; '!mode' excludes one).
        ds_id: Dataset id(s) in which to compute it; None for all, '!id' excludes one.
        output_name: Key under which the aggregate score is logged (and the prefix of the per-channel keys).
        per_ds: With several datasets in a mode, also log the per-dataset keys (never when ``output_name``
            contains '|').

    Raises:
        ValueError: If an argument has the wrong type or range (naming it), or at a batch whose masks differ in
            shape or hold values outside [0, 1].
    """

    def __init__(self, true_key: str, pred_key: str, threshold: float | None = 0.5, mask_overlap: bool = True,
                 exclude_channels: None | int | Iterable[int] = None, channel_mapping: Mapping[int, str] | None = None,
                 include_std: bool = False, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "Dice", per_ds: bool = True) -> None:
        if not isinstance(output_name, str) or not output_name:
            raise ValueError(f"Dice output_name must be a non-empty string, got {output_name!r}; e.g. 'Dice'.")
        self.threshold = _check_threshold(threshold)
        self.exclude_channels = _check_channels(exclude_channels)
        self.channel_mapping = _check_mapping(channel_mapping)
        # Keys known before any batch, so that traces reading a named channel's score run after this one and the
        # warm-up finds them (FastEstimator lists only output_name; these are written with it all the same).
        named = [f"{output_name}_{name}" for index, name in sorted(self.channel_mapping.items())
                 if index not in self.exclude_channels]
        super().__init__(inputs=[true_key, pred_key], outputs=[output_name, *named], mode=mode, ds_id=ds_id)
        self.mask_overlap = bool(mask_overlap)
        self.include_std = bool(include_std)
        self.epsilon = EPSILON
        # A '|' in the name already reads as '<key>|<ds_id>': a per-dataset key would be ambiguous.
        self.per_ds = bool(per_ds) and "|" not in output_name
        self._reset()

    @property
    def true_key(self) -> str:
        """Key of the ground-truth masks."""
        return self.inputs[0]

    @property
    def pred_key(self) -> str:
        """Key of the predicted masks."""
        return self.inputs[1]

    def _reset(self) -> None:
        # channel index -> the epoch's per-sample scores of that channel, one array per batch. Only scores that are
        # not NaN are kept, and a channel appears once it has one: channels never scored are not averaged.
        self.scores: dict[int, list[np.ndarray]] = {}
        self.ds_scores: dict[str, dict[int, list[np.ndarray]]] = {}

    def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
        outputs = super().get_outputs(ds_ids)
        if self.per_ds:
            outputs += per_ds_keys(self.outputs, ds_ids)
        return outputs

    def on_epoch_begin(self, data: Data) -> None:
        self._reset()

    def on_batch_end(self, data: Data) -> None:
        y_true, y_pred = data[self.true_key], data[self.pred_key]
        self._check_masks(y_true, y_pred)
        dice = np.asarray(to_number(dice_score(y_pred=y_pred, y_true=y_true, sample_average=False,
                                               channel_average=False, mask_overlap=self.mask_overlap,
                                               threshold=self.threshold, empty_nan=True, epsilon=self.epsilon)))
        # '' is the only dataset of a mode without a ds_id dict: the overall value says it all.
        ds_id = getattr(getattr(self, "system", None), "ds_id", "")
        per_ds = self.per_ds and bool(ds_id)
        _add_scores(self.scores, dice)
        if per_ds:
            _add_scores(self.ds_scores.setdefault(ds_id, {}), dice)
        # Per-sample scores: under the per-dataset keys when there are several datasets (the more precise name).
        suffix = f"|{ds_id}" if per_ds else ""
        n_channels = dice.shape[1]
        if n_channels == 1:
            data.write_per_instance_log(f"{self.outputs[0]}{suffix}", dice[:, 0])
            return
        kept = [index for index in range(n_channels) if index not in self.exclude_channels]
        for index in kept:
            data.write_per_instance_log(f"{self._channel_key(index)}{suffix}", dice[:, index])
        # A sample's score is the mean of its channels; NaN where one is NaN (as FastEstimator does).
        sample = np.mean(dice[:, kept], axis=1) if kept else np.full(dice.shape[0], np.nan, dice.dtype)
        data.write_per_instance_log(f"{self.outputs[0]}{suffix}", sample)

    def on_epoch_end(self, data: Data) -> None:
        for ds_id, scores in self.ds_scores.items():
            for key, value in self._summarise(scores):
                data.write_with_log(f"{key}|{ds_id}", value)
        for key, value in self._summarise(self.scores):
            data.write_with_log(key, value)

    def state_dict(self) -> dict[str, Any]:
        # Joined copies: a checkpoint must not share arrays with lists that later batches keep growing.
        return {"scores": _joined(self.scores),
                "ds_scores": {ds_id: _joined(scores) for ds_id, scores in self.ds_scores.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._reset()
        self.scores = _split(state["scores"])
        self.ds_scores = {str(ds_id): _split(scores) for ds_id, scores in state.get("ds_scores", {}).items()}

    def _channel_key(self, index: int) -> str:
        return f"{self.outputs[0]}_{self.channel_mapping.get(index, index)}"

    def _summarise(self, scores: Mapping[int, list[np.ndarray]]) -> list[tuple[str, Any]]:
        """The ``(key, value)`` pairs to log for one epoch's (or one dataset's) per-channel scores."""
        # FastEstimator's rule: channel keys only with names given and more than one channel scored (excluded
        # channels count here, though they are not reported).
        per_channel = bool(self.channel_mapping) and len(scores) > 1
        logs: list[tuple[str, Any]] = []
        means, stds = [], []
        for index in sorted(scores):
            if index in self.exclude_channels:
                continue
            values = np.concatenate(scores[index])
            mean, std = np.mean(values), np.std(values)
            means.append(mean)
            stds.append(std)
            if per_channel:
                logs.append((self._channel_key(index), self._value(mean, std)))
        # No channel scored at all (no batch, or only empty masks): NaN, without numpy's empty-mean warning.
        mean = np.mean(means) if means else np.float64(np.nan)
        std = np.mean(stds) if stds else np.float64(np.nan)
        logs.append((self.outputs[0], self._value(mean, std)))
        return logs

    def _value(self, mean: Any, std: Any) -> Any:
        return ValWithError(mean - std, mean, mean + std) if self.include_std else mean

    def _check_masks(self, y_true: Any, y_pred: Any) -> None:
        """Refuse masks that would give a meaningless score: of different shapes (they would broadcast), or with
        values outside [0, 1] (class indices or logits instead of one-hot masks or probabilities)."""
        true_shape, pred_shape = _shape(y_true), _shape(y_pred)
        if true_shape != pred_shape:
            raise ValueError(f"Dice needs masks of one shape, got {list(true_shape)} under {self.true_key!r} and "
                             f"{list(pred_shape)} under {self.pred_key!r}; one-hot encode class-index masks (with a "
                             "channel axis) so that they match the predictions.")
        for key, masks, what in ((self.pred_key, y_pred, "predicted"), (self.true_key, y_true, "ground-truth")):
            low, high = float(to_number(reduce_min(masks))), float(to_number(reduce_max(masks)))
            if not (0.0 <= low and high <= 1.0):  # also refuses NaN, which compares False
                raise ValueError(f"Dice needs {what} mask values in [0, 1], got values from {low:.6g} to "
                                 f"{high:.6g} under {key!r}; apply a sigmoid / softmax to logits and one-hot encode "
                                 "class indices.")


def _add_scores(scores: dict[int, list[np.ndarray]], dice: np.ndarray) -> None:
    """Append a batch's ``(batch, C)`` scores, channel by channel, leaving out NaN (both masks empty)."""
    for index in range(dice.shape[1]):
        column = dice[:, index]
        column = column[~np.isnan(column)]
        if column.size:
            scores.setdefault(index, []).append(column)


def _joined(scores: Mapping[int, list[np.ndarray]]) -> dict[int, np.ndarray]:
    return {index: np.concatenate(parts) for index, parts in scores.items() if parts}


def _split(state: Mapping[Any, Any]) -> dict[int, list[np.ndarray]]:
    # Copies in the stored dtype (float32 scores stay float32), so the resumed means equal the uninterrupted ones.
    scores = {int(index): np.array(values).ravel() for index, values in state.items()}
    return {index: [values] for index, values in scores.items() if values.size}


def _shape(value: Any) -> tuple[int | None, ...]:
    shape = getattr(value, "shape", None)
    return tuple(np.shape(value) if shape is None else shape)


def _check_threshold(threshold: Any) -> float | None:
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or math.isnan(threshold):
        raise ValueError(f"Dice threshold must be a number or None, got {threshold!r}; 0.5 binarises probabilities, "
                         "0.0 (with mask_overlap=False) picks each pixel's top channel, None keeps soft scores.")
    return float(threshold)


def _is_index(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0


def _check_channels(channels: Any) -> set[int]:
    listed = [] if channels is None else [channels] if not isinstance(channels, Iterable) else list(channels)
    bad = [value for value in listed if not _is_index(value)]
    if bad:  # a string is iterable too: its characters are no ints
        raise ValueError(f"Dice exclude_channels must be None, a channel index or indices (ints >= 0), got "
                         f"{channels!r}; e.g. exclude_channels=0 to leave out a background channel.")
    return {int(value) for value in listed}


def _check_mapping(mapping: Any) -> dict[int, str]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ValueError(f"Dice channel_mapping must be a dict from channel index to name, got {mapping!r}; e.g. "
                         "channel_mapping={1: 'liver', 2: 'tumor'}.")
    bad_keys = [key for key in mapping if not _is_index(key)]
    if bad_keys:
        raise ValueError(f"Dice channel_mapping keys must be channel indices (ints >= 0), got {bad_keys!r}; e.g. "
                         "channel_mapping={1: 'liver', 2: 'tumor'}.")
    names = {int(key): str(name) for key, name in mapping.items()}
    bad_names = sorted(name for name in names.values() if "|" in name or not name)
    if bad_names:
        raise ValueError(f"Dice channel_mapping names must be non-empty and free of '|' (which marks per-dataset "
                         f"keys), got {bad_names!r}; rename them.")
    return names
