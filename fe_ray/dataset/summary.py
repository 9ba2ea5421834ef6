"""What a dataset's ``summary()`` returns: FastEstimator's ``DatasetSummary`` and ``KeySummary``.

fe_ray's summary is also the one-line text it always was (``DatasetSummary`` is a ``str``), so printing it and
comparing it keep working, while FastEstimator code reads its fields: ``ds.summary().num_instances``,
``.keys["x"].shape``, ``.num_classes``, ``.class_key_mapping``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from fe_ray.util.tensors import get_shape, get_type


class KeySummary:
    """One key of a dataset's samples: its type (``"float32"``, ``"str"``), the shape of one sample's value, and
    how many distinct values the dataset holds (None where that is not counted: arrays, unhashable values).

    Args:
        dtype: The type of the key's values.
        num_unique_values: How many distinct values there are, or None.
        shape: One sample's shape (``[]`` for scalars).
    """

    def __init__(self, dtype: str, num_unique_values: int | None = None, shape: Any = ()) -> None:
        # Set in FastEstimator's order: its repr / getstate list the fields in this order.
        self.num_unique_values = num_unique_values
        self.shape = list(shape)
        self.dtype = dtype

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update({"num_unique_values": None, **state})

    def __repr__(self) -> str:
        return f"<KeySummary {self.__getstate__()}>"


class DatasetSummary(str):
    """A dataset's summary: its one-line description (the string itself) and FastEstimator's fields.

    Args:
        text: The one-line description.
        num_instances: The number of samples (an epoch's length).
        keys: ``{key: KeySummary}`` of the samples' keys.
        num_classes: How many classes there are, where known.
        class_key_mapping: ``{class name: label}``, where known.
        class_key: The key holding the class, where known.
    """

    num_instances: int
    keys: dict[str, KeySummary]
    num_classes: int | None
    class_key_mapping: dict[str, Any] | None
    class_key: str | None

    def __new__(cls, text: str, num_instances: int, keys: Mapping[str, KeySummary] | None = None,
                num_classes: int | None = None, class_key_mapping: Mapping[str, Any] | None = None,
                class_key: str | None = None) -> DatasetSummary:
        summary = super().__new__(cls, text)
        summary.num_instances = int(num_instances)
        summary.keys = dict(keys or {})
        summary.num_classes = num_classes
        summary.class_key_mapping = None if class_key_mapping is None else dict(class_key_mapping)
        summary.class_key = class_key
        return summary

    def __getstate__(self) -> dict[str, Any]:
        """The fields that are set (FastEstimator's ``DatasetSummary.__getstate__``), in its order."""
        fields = {"num_instances": self.num_instances, "class_key": self.class_key, "num_classes": self.num_classes,
                  "class_key_mapping": self.class_key_mapping, "keys": self.keys}
        return {key: value for key, value in fields.items() if value is not None}

    def __repr__(self) -> str:
        # FastEstimator's repr (what a notebook shows for ``ds.summary()``); ``str()`` and printing keep the line.
        return f"<DatasetSummary {self.__getstate__()}>"

    def __reduce__(self) -> tuple[Any, ...]:  # a str subclass with fields: pickle them too
        return (DatasetSummary, (str(self), self.num_instances, self.keys, self.num_classes, self.class_key_mapping,
                                 self.class_key))


def key_summaries(first: Mapping[str, Any], column: Any = None) -> dict[str, KeySummary]:
    """``KeySummary`` of each key of ``first`` (a sample); ``column(key)`` gives every sample's value of a key,
    whose distinct values are counted when they are hashable (labels, file names, tuples), as FastEstimator does."""
    summaries = {}
    for key, value in first.items():
        unique = None
        if column is not None and isinstance(value, Hashable):
            values = column(key)
            try:
                unique = len(set(values.tolist() if isinstance(values, np.ndarray) else values))
            except TypeError:  # unhashable after all
                unique = None
        summaries[key] = KeySummary(dtype=get_type(value), num_unique_values=unique, shape=get_shape(value))
    return summaries


def merged_summary(text: str, num_instances: int, datasets: Any) -> DatasetSummary:
    """The summary of a dataset made of ``datasets`` (BatchDataset, InterleaveDataset): ``text`` and
    ``num_instances`` (its batches per epoch), with the keys of every child whose summary has them, as
    FastEstimator merges them (a later child's entry for a key replaces an earlier one's)."""
    keys: dict[str, KeySummary] = {}
    for dataset in datasets:
        summary = dataset.summary() if callable(getattr(dataset, "summary", None)) else None
        keys.update(getattr(summary, "keys", None) or {})
    return DatasetSummary(text, num_instances, keys)


__all__ = ["DatasetSummary", "KeySummary", "key_summaries", "merged_summary"]
