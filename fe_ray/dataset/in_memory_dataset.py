"""InMemoryDataset: FastEstimator's dataset of per-sample dicts held in memory, the base of the file datasets."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.dataset.immutable_dataset import ImmutableDataset
from fe_ray.dataset.summary import DatasetSummary, key_summaries


class InMemoryDataset(ImmutableDataset):
    """A map-style dataset over ``{index: {key: value}}``, as FastEstimator's ``InMemoryDataset``.

    Sample ``i`` is the row ``data[i]`` itself, as in FastEstimator: ``dataset[i]["y"] = label`` (or adding or
    removing a key of that row) changes the dataset. A key (``dataset["y"]``) returns that key's value for every
    sample, as a list (an array when the values are arrays). The file datasets (CSVDataset, DirDataset,
    LabeledDirDataset) keep their rows this way. (A Pipeline copies each sample before its ops run, so ops never
    change the rows.)

    The rows must not be changed once the dataset is in a Pipeline: Pipelines rely on the dataset being immutable,
    which is why :meth:`state_dict` is empty. (:meth:`split` takes rows out and ``dataset[key] = values`` edits them,
    as FastEstimator's do: call them before building the Pipeline; a restored run repeats them, being the same
    program.)

    Args:
        data: ``{0: row, 1: row, ...}`` (keys exactly 0..n-1) or a list of rows; each row a dict of string keys.

    Raises:
        TypeError: If ``data`` or a row is not a dict (list of dicts), or a row has a non-string key.
        ValueError: If the index keys are not 0..n-1.
    """

    def __init__(self, data: Mapping[int, Mapping[str, Any]] | Sequence[Mapping[str, Any]]) -> None:
        name = type(self).__name__
        if isinstance(data, Mapping):
            if set(data) != set(range(len(data))):
                shown = sorted(data, key=repr)[:10]
                raise ValueError(f"{name} needs {{index: row}} with indices 0..{len(data) - 1}, got indices "
                                 f"{shown!r:.200}; pass a list of rows to have them numbered.")
            rows = [data[index] for index in range(len(data))]
        elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
            rows = list(data)
        else:
            raise TypeError(f"{name} needs {{index: {{key: value}}}} or a list of {{key: value}} rows, got "
                            f"{type(data).__name__}.")
        for index, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise TypeError(f"{name} row {index} is a {type(row).__name__}, not a {{key: value}} dict.")
            for key in row:
                if not isinstance(key, str):
                    raise TypeError(f"{name} keys must be strings, got {key!r} ({type(key).__name__}) in row "
                                    f"{index}.")
        self.data: dict[int, dict[str, Any]] = {index: dict(row) for index, row in enumerate(rows)}

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int | str) -> dict[str, Any] | list[Any] | np.ndarray:
        """Return row ``index`` (negative indices count from the end; the stored dict, so edits of it change the
        dataset, as in FastEstimator), or every value of a key.

        Raises:
            IndexError: If ``index`` is out of range.
            ValueError: If a key is not one of the dataset's keys.
            TypeError: If ``index`` is neither an int nor a key.
        """
        name = type(self).__name__
        size = len(self.data)
        if isinstance(index, str):
            keys = self.keys()
            if index not in keys:
                raise ValueError(f"{name} has no key {index!r}; its keys are {keys}.")
            column = [row[index] for row in self.data.values()]
            return np.array(column) if column and isinstance(column[0], np.ndarray) else column
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"{name} index must be an int (a sample) or a key {self.keys()}, got "
                            f"{type(index).__name__}: {index!r:.100}.")
        index = int(index)
        if not -size <= index < size:
            raise IndexError(f"{name} index {index} out of range for {size} samples.")
        return self.data[index % size]

    def __setitem__(self, key: int | str, value: Any) -> None:
        """Edit the rows in place, as FastEstimator's ``InMemoryDataset`` allows (before building the Pipeline).

        ``dataset["x"] = column`` sets (or adds) a key in every row, one value per row; ``dataset[3] = {...}`` replaces
        row 3.

        Args:
            key: A key (a column of values, one per row) or a row index (a dict of the row's values).
            value: A sequence of ``len(dataset)`` values for a key; a ``{key: value}`` dict for an index.

        Raises:
            TypeError: If ``key`` is neither a string nor an int, a key's value is not a sequence, or a row is not a
                dict with string keys.
            ValueError: If a column's length differs from the dataset's.
            IndexError: If a row index is out of range.
        """
        name = type(self).__name__
        size = len(self.data)
        if isinstance(key, str):
            if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
                raise TypeError(f"{name}[{key!r}] = ... needs a sequence of {size} values (one per row), got "
                                f"{type(value).__name__}.")
            if len(value) != size:
                raise ValueError(f"{name}[{key!r}] = ... needs {size} values (one per row), got {len(value)}.")
            # Into the rows themselves, as FastEstimator: a sample read before sees the new key too. (A split
            # moves rows, so no other dataset holds them.)
            for index, row in self.data.items():
                row[key] = value[index]
            return
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            raise TypeError(f"{name}[...] = ... takes a key (a column) or an int (a row), got {type(key).__name__}: "
                            f"{key!r:.100}.")
        index = int(key)
        if not -size <= index < size:
            raise IndexError(f"{name} index {index} out of range for {size} rows.")
        if not isinstance(value, Mapping) or not all(isinstance(field, str) for field in value):
            raise TypeError(f"{name}[{index}] = ... needs a {{key: value}} dict with string keys, got "
                            f"{type(value).__name__}.")
        # The given dict itself when it is one, as FastEstimator stores it (later edits of it edit the row).
        self.data = {**self.data, index % size: value if isinstance(value, dict) else dict(value)}

    def keys(self) -> list[str]:
        """The keys of the samples (those of the first row; empty for an empty dataset)."""
        return list(self.data[0]) if self.data else []

    def _new_like(self, rows: list[dict[str, Any]]) -> InMemoryDataset:
        """A dataset of the same class holding ``rows``, with this one's other attributes (e.g. a label mapping)."""
        result = copy.copy(self)  # attributes like parent_path carry over; the rows move to it (split)
        result.data = dict(enumerate(rows))
        return result

    def _take(self, indices: np.ndarray) -> InMemoryDataset:
        return self._new_like([self.data[int(index)] for index in indices])

    def _keep(self, indices: np.ndarray) -> None:
        self.data = {new: self.data[int(old)] for new, old in enumerate(indices)}

    def summary(self) -> DatasetSummary:
        """One line naming the size and each key's type (of the first sample), with FastEstimator's summary fields
        (:class:`~fe_ray.dataset.summary.DatasetSummary`)."""
        if not self.data:
            return DatasetSummary(f"{type(self).__name__}(0 samples)", 0)
        fields = ", ".join(f"{key}: {_describe(value)}" for key, value in self.data[0].items())
        keys = key_summaries(self.data[0], lambda key: [sample.get(key) for sample in self.data.values()])
        return DatasetSummary(f"{type(self).__name__}({len(self.data)} samples; {fields})", len(self.data), keys)


def _describe(value: Any) -> str:
    """A short type description of a sample value: ``float32 (2, 3)`` for arrays, the type name otherwise."""
    if isinstance(value, (np.ndarray, np.generic)):
        return f"{value.dtype} {tuple(np.shape(value))}"
    return type(value).__name__
