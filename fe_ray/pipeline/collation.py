"""Making one batch from its samples: private copies of dataset items for the ops, and stacking (with padding)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np


def collate(samples: list[Mapping[str, Any]], pad_value: float | None = None) -> dict[str, np.ndarray]:
    """Stack per-sample dicts into one dict of arrays with a leading batch axis.

    Args:
        samples: The batch's samples, each ``{key: value}`` with the same keys.
        pad_value: For a key whose samples differ in shape (same number of axes): pad each at the end of every axis
            with this value up to the batch's largest size on that axis, as FastEstimator's ``pad_value`` does.
            None: such a key is an error.

    Raises:
        ValueError: If samples have different keys, or a key's values cannot be stacked (ragged shapes without
            ``pad_value``, or a different number of axes).
    """
    keys = list(samples[0])
    batch: dict[str, np.ndarray] = {}
    for position, sample in enumerate(samples):
        if sample.keys() != samples[0].keys():
            raise ValueError(f"Samples of one batch have different keys: {sorted(samples[0])} vs {sorted(sample)} "
                             f"(sample {position}); every sample must produce the same keys.")
    for key in keys:
        values = [np.asarray(sample[key]) for sample in samples]
        shapes = {value.shape for value in values}
        if len(shapes) > 1 and pad_value is not None and len({len(shape) for shape in shapes}) == 1:
            values = _pad(values, pad_value)
        try:
            batch[key] = np.stack(values)
        except ValueError:
            shapes_seen = sorted(shapes, key=str)
            fix = ("they differ in their number of axes, which padding cannot fix" if pad_value is not None else
                   "pass Pipeline(pad_value=...) to pad them at the end of each axis, or resize them with a NumpyOp")
            raise ValueError(f"Cannot batch key {key!r}: samples have different shapes {shapes_seen}; {fix}.") \
                from None
    return batch


def _pad(values: list[np.ndarray], pad_value: float) -> list[np.ndarray]:
    target = np.max([value.shape for value in values], axis=0)
    return [np.pad(value, [(0, int(size - have)) for have, size in zip(value.shape, target)],
                   constant_values=np.asarray(pad_value).astype(value.dtype)) for value in values]


def owned_sample(item: Any, what: str = "Pipeline.transform's data") -> dict[str, Any]:
    """A deep copy of a dataset item for the per-sample ops to work on.

    Deep, as FastEstimator copies each sample: an op that edits an array in place (``x += 1``, common in
    augmentation code) must change this batch only, not the dataset's arrays, or every later epoch would see data
    drifting further (an in-place ``+= 1`` gave 1, 2, 3 in epochs 1, 2, 3 with a shallow copy).

    Raises:
        TypeError: If the item is not a dict of named values.
    """
    if not isinstance(item, Mapping):
        raise TypeError(f"{what} is a {type(item).__name__}, not a dict: samples are {{key: value}} dicts, so that ops "
                        "and the network can refer to keys. Wrap arrays in a NumpyDataset({'x': x, 'y': y}), or make "
                        "the dataset's __getitem__ return a dict.")
    return {key: _owned(value) for key, value in item.items()}


_IMMUTABLE = (int, float, complex, bool, str, bytes, np.generic, type(None))


def _owned(value: Any) -> Any:
    # Arrays (the usual values: a row view of a dataset's array) are copied directly, 3x cheaper than deepcopy.
    if isinstance(value, np.ndarray):
        return value.copy()
    return value if isinstance(value, _IMMUTABLE) else copy.deepcopy(value)
