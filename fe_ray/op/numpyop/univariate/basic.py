"""Minmax, ExpandDims and Onehot: single-input numpy ops that work on one sample or on a whole batch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp


class Minmax(NumpyOp):
    """Scale each sample to ``[new_min, new_max]`` by its own min and max (``epsilon`` guards constant samples).

    A sample ``x`` becomes ``(x - min) / max(max - min, epsilon) * (new_max - new_min) + new_min`` in float32, so a
    constant sample becomes ``new_min`` everywhere.

    Args:
        inputs: Key(s) of the data.
        outputs: Key(s) to write the scaled data to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        epsilon: The smallest divisor, so a constant sample does not divide by zero.
        new_min: The value the sample's minimum maps to.
        new_max: The value the sample's maximum maps to; must be greater than ``new_min``.

    Raises:
        ValueError: If ``new_max <= new_min``.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 epsilon: float = 1e-7, new_min: float = 0.0, new_max: float = 1.0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not new_max > new_min:
            raise ValueError(f"Minmax needs new_max > new_min, got new_min={new_min!r} and new_max={new_max!r}; "
                             "swap them or widen the range.")
        self.epsilon = epsilon
        self.new_min = new_min
        self.new_max = new_max
        # Lists in and out whatever the keys (FastEstimator's): OneOf / Sometimes combine it with such ops.
        self.in_list, self.out_list = True, True

    def _scale(self, x: np.ndarray, axes: tuple[int, ...] | None) -> np.ndarray:
        x = np.asarray(x)
        # Integers in float64 (exact for any int32 pixel value), as FastEstimator's numpy promotion does; floats keep
        # their precision (float32 images stay float32). The result is float32 either way.
        x = x.astype(np.float32 if x.dtype in (np.float16, np.float32) else np.float64, copy=False)
        lo = x.min(axis=axes, keepdims=True)
        hi = x.max(axis=axes, keepdims=True)
        scaled = (x - lo) / np.maximum(hi - lo, x.dtype.type(self.epsilon))
        if (self.new_min, self.new_max) == (0.0, 1.0):
            return scaled.astype(np.float32, copy=False)  # the default range needs no affine step
        return (scaled * (self.new_max - self.new_min) + self.new_min).astype(np.float32)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        if self.in_list:
            return [self._scale(x, None) for x in data]
        return self._scale(data, None)

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        def per_sample(x: np.ndarray) -> np.ndarray:
            return self._scale(x, tuple(range(1, np.ndim(x))))
        return [per_sample(x) for x in data] if self.in_list else per_sample(data)


class ExpandDims(NumpyOp):
    """Add an axis of size 1 at ``axis`` of each sample (default: a trailing channel axis)."""

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 axis: int = -1) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.axis = axis
        self.in_list, self.out_list = True, True  # as FastEstimator's (see Minmax)

    def _expand(self, x: Any, batched: bool) -> np.ndarray:
        axis = self.axis + 1 if (batched and self.axis >= 0) else self.axis
        return np.expand_dims(x, axis)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return [self._expand(x, False) for x in data] if self.in_list else self._expand(data, False)

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return [self._expand(x, True) for x in data] if self.in_list else self._expand(data, True)


class Onehot(NumpyOp):
    """Turn integer class labels into one-hot float32 vectors of ``num_classes`` (optional label smoothing).

    A single label (a scalar or an array of one element) becomes a vector of ``num_classes``; an array of labels
    (a segmentation mask, a multi-label list) becomes one vector per element, with shape ``labels.shape +
    (num_classes,)``. As a Network pop each sample of the batch is encoded that way.

    Raises:
        ValueError: If ``num_classes`` is not a positive int or ``label_smoothing`` is outside [0, 1); when
            running, if a label is not an integer or not in ``[0, num_classes)``.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], num_classes: int,
                 label_smoothing: float = 0.0, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"Onehot num_classes must be a positive int, got {num_classes!r}.")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"Onehot label_smoothing must be in [0, 1), got {label_smoothing!r}.")
        self.num_classes = num_classes
        self.label_smoothing = label_smoothing
        self.in_list, self.out_list = True, True  # as FastEstimator's (see Minmax)

    def _labels(self, y: Any) -> np.ndarray:
        labels = np.asarray(y)
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"Onehot {self.inputs} needs integer class labels, got dtype {labels.dtype} (e.g. "
                             f"{labels.reshape(-1)[:3].tolist()}); cast them with a NumpyOp first.")
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            bad = labels[(labels < 0) | (labels >= self.num_classes)].reshape(-1)[0]
            raise ValueError(f"Onehot {self.inputs} got label {int(bad)}, outside [0, {self.num_classes}) for "
                             f"num_classes={self.num_classes}.")
        return labels

    def _encode(self, labels: np.ndarray) -> np.ndarray:
        out = np.eye(self.num_classes, dtype=np.float32)[labels]
        if self.label_smoothing:
            # The two values computed in float64 and rounded once: 0.9 for 2 classes and 0.2, as FastEstimator.
            low = self.label_smoothing / self.num_classes
            out = np.where(out != 0, 1.0 - self.label_smoothing + low, low).astype(np.float32)
        return out

    def _onehot(self, y: Any) -> np.ndarray:
        labels = self._labels(y)
        return self._encode(labels.reshape(-1)[0] if labels.size == 1 else labels)

    def _onehot_batch(self, y: Any) -> np.ndarray:
        # One sample's encoding each, as forward would give it, without a Python loop over the batch.
        labels = self._labels(y)
        per_sample = labels.reshape(len(labels), -1)
        return self._encode(per_sample[:, 0] if per_sample.shape[1] == 1 else labels)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return [self._onehot(x) for x in data] if self.in_list else self._onehot(data)

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return [self._onehot_batch(x) for x in data] if self.in_list else self._onehot_batch(data)
