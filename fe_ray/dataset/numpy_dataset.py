"""NumpyDataset: an immutable, map-style dataset over a dict of equally long numpy arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.dataset.immutable_dataset import ImmutableDataset
from fe_ray.dataset.summary import DatasetSummary, key_summaries


def _as_sample_array(value: Any) -> np.ndarray:
    """``value`` as an array with the samples along its first axis; a ragged list becomes a 1-d object array whose
    entries are the samples as given (``np.asarray`` refuses it, or would make a 2-d object array of sequences)."""
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:  # "inhomogeneous shape": samples of different shapes
            array = None
        if array is None or (array.dtype == object and array.ndim > 1):
            samples = np.empty(len(value), dtype=object)
            for index, sample in enumerate(value):
                samples[index] = sample
            return samples
        return array
    return np.asarray(value)


class NumpySample(dict):
    """Sample ``index`` of a :class:`NumpyDataset`: a dict whose writes go into the dataset too.

    FastEstimator's ``dataset[i]`` is the dict the dataset stores, so ``dataset[i]["y"] = label`` changes the dataset
    (FastEstimator's apphub corrupts labels this way); a NumpyDataset stores one array per key, so its samples are
    made on each read and write a changed value back instead. A value must fit the key's samples (the same shape;
    another dtype widens the key's array); keys cannot be added to or removed from one sample, since every sample of
    a NumpyDataset has the same keys (``dataset[key] = column`` adds a key to all of them).

    Copies (``dict(sample)``, ``copy.copy``, ``copy.deepcopy``, pickling) are plain dicts, detached from the dataset,
    so a Pipeline, a DataLoader's collate or a Ray task working on a copy never writes into the dataset.
    """

    __slots__ = ("_dataset", "_index", "_generation")

    def __init__(self, values: dict[str, Any], dataset: NumpyDataset, index: int) -> None:
        super().__init__(values)
        self._dataset = dataset
        self._index = index
        self._generation = getattr(dataset, "_generation", 0)

    def __setitem__(self, key: str, value: Any) -> None:
        # The dataset first: a value it refuses leaves both unchanged.
        self._dataset._write_entry(self._index, key, value, self._generation)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        self._refuse_removal(key)

    def pop(self, key: str, *default: Any) -> Any:
        if key not in self and default:
            return default[0]
        self._refuse_removal(key)

    def popitem(self) -> tuple[str, Any]:
        self._refuse_removal(next(iter(self), None))

    def clear(self) -> None:
        if self:
            self._refuse_removal(next(iter(self)))

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> NumpySample:
        self.update(other)
        return self

    def __reduce__(self) -> tuple[type, tuple[dict[str, Any]]]:
        # Copies and pickles are plain dicts: carrying the dataset along would copy (or ship) all of it, and a copy
        # that writes back would let a collate function or a task change the dataset.
        return dict, (dict(self),)

    def _refuse_removal(self, key: Any) -> None:
        raise ValueError(f"NumpyDataset sample {self._index}: cannot remove key {key!r} from one sample, as every "
                         f"sample of a NumpyDataset has the keys {sorted(self._dataset.data)}; build the dataset "
                         "without that key, or copy the sample (dict(sample)) to edit it apart from the dataset.")


class NumpyDataset(ImmutableDataset):
    """A map-style dataset: sample ``i`` is ``{key: array[i] for key, array in data.items()}``.

    The arrays are kept as given (no copy) and must not be modified afterwards: Pipelines rely on the dataset being
    immutable, which is also why :meth:`state_dict` is empty. (:meth:`split` takes samples out and ``dataset[key] =
    values`` edits it, as FastEstimator's do: call them before the dataset goes into a Pipeline; a row edit copies the
    arrays first, so the caller's arrays stay as they were.) A sample is a :class:`NumpySample`, so
    ``dataset[i]["y"] = label`` changes sample ``i`` too, as FastEstimator's stored sample dicts do.

    A key given as a list (or tuple) gives each sample its list entry as it is, as FastEstimator does (Python
    ``int`` / ``float`` / ``str`` values, a list for a list entry), and ``dataset[key]`` returns the entries as a
    list (an array when they are arrays); its batches are the same arrays either way.

    Args:
        data: Mapping of key to array (anything ``np.asarray`` accepts); every array needs a leading sample axis of
            the same length. A list of samples of different shapes (images of several sizes, token sequences of
            several lengths) is kept as a list of them, one object per sample, as FastEstimator keeps lists.

    Raises:
        TypeError: If ``data`` is not a mapping with string keys.
        ValueError: If ``data`` is empty, a value has no sample axis, or the arrays differ in length.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping):
            raise TypeError(f"NumpyDataset needs a dict of {{key: array}}, got {type(data).__name__}.")
        if not data:
            raise ValueError("NumpyDataset needs at least one key, got an empty dict.")
        arrays: dict[str, np.ndarray] = {}
        lists: dict[str, list[Any]] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise TypeError(f"NumpyDataset keys must be strings, got {key!r} ({type(key).__name__}).")
            array = _as_sample_array(value)
            if array.ndim == 0:
                raise ValueError(f"NumpyDataset key {key!r} holds a scalar; every value needs a leading sample axis.")
            arrays[key] = array
            if isinstance(value, (list, tuple)):
                lists[key] = list(value)
        lengths = {key: len(array) for key, array in arrays.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"NumpyDataset arrays must have the same length, got {lengths}.")
        self.data = arrays
        # The entries of the keys given as lists, handed out per sample as given (FastEstimator's values); the
        # arrays in ``data`` make the batches.
        self._lists = lists
        self._size = next(iter(lengths.values()))
        self._owned: set[str] = set()  # keys whose arrays this dataset copied (row edits may write into them)
        # Bumped when the samples are renumbered (a split): a sample read before can no longer write back.
        self._generation = 0

    def __len__(self) -> int:
        return self._size

    @property
    def ragged(self) -> bool:
        """Whether a key holds samples of different shapes (a list of them): batches are then collated sample by
        sample (padded with the Pipeline's ``pad_value``), not gathered as one array."""
        return any(array.dtype == object and array.ndim == 1 for array in self.data.values())

    def __getitem__(self, index: int | str) -> dict[str, Any] | np.ndarray:
        """Return sample ``index`` (negative indices count from the end) as a new dict of array views; a key
        (``dataset["y"]``) returns that key's whole array, as FastEstimator's in-memory datasets do.

        The sample is a :class:`NumpySample`: ``dataset[i]["y"] = value`` changes the dataset, as it does in
        FastEstimator (whose ``dataset[i]`` is the stored dict).

        Raises:
            IndexError: If ``index`` is out of range.
            ValueError: If a key is not one of the dataset's keys.
            TypeError: If ``index`` is neither an int nor a key.
        """
        if isinstance(index, str):
            if index not in self.data:
                raise ValueError(f"NumpyDataset has no key {index!r}; its keys are {list(self.data)}.")
            entries = self._lists.get(index)
            if entries is not None and not (entries and isinstance(entries[0], np.ndarray)):
                return list(entries)
            return self.data[index]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"NumpyDataset index must be an int (a sample) or a key {list(self.data)}, got "
                            f"{type(index).__name__}: {index!r:.100}.")
        index = int(index)
        if not -self._size <= index < self._size:
            raise IndexError(f"NumpyDataset index {index} out of range for {self._size} samples.")
        lists = self._lists
        return NumpySample({key: lists[key][index] if key in lists else array[index]
                            for key, array in self.data.items()}, self, index % self._size)

    def __setitem__(self, key: int | str, value: Any) -> None:
        """Edit the dataset in place, as FastEstimator's in-memory datasets allow (before it goes into a Pipeline).

        ``dataset["x"] = scaler.fit_transform(dataset["x"])`` replaces a key's values for every sample, and
        ``dataset["index"] = np.arange(len(dataset))`` adds a key; ``dataset[3] = {"x": ..., "y": ...}`` replaces
        sample 3 (same keys; a value of another dtype widens the key's dtype as FastEstimator's batches would).

        Args:
            key: A key (a column of values, one per sample) or a sample index (a dict of the sample's values).
            value: A sequence of ``len(dataset)`` values for a key; a ``{key: value}`` dict for an index.

        Raises:
            TypeError: If ``key`` is neither a string nor an int, a key's value is not a sequence, or a sample's value
                is not a dict.
            ValueError: If a column's length differs from the dataset's, an index is out of range, or a sample's keys
                or value shapes differ from the dataset's.
        """
        if isinstance(key, str):
            if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
                raise TypeError(f"NumpyDataset[{key!r}] = ... needs a sequence of {self._size} values (one per "
                                f"sample), got {type(value).__name__}.")
            array = _as_sample_array(value)
            if array.ndim == 0 or len(array) != self._size:
                raise ValueError(f"NumpyDataset[{key!r}] = ... needs {self._size} values (one per sample), got "
                                 f"{len(value)}.")
            # New dicts, not edits of the current ones: a subset split off earlier shares nothing with them anyway,
            # but a caller holding ``dataset.data`` keeps what it had.
            self.data = {**self.data, key: array}
            lists = {name: entries for name, entries in self._lists.items() if name != key}
            if isinstance(value, (list, tuple)):
                lists[key] = list(value)
            self._lists = lists
            self._owned = getattr(self, "_owned", set()) - {key}
            return
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            raise TypeError(f"NumpyDataset[...] = ... takes a key (a column) or an int (a sample), got "
                            f"{type(key).__name__}: {key!r:.100}.")
        index = int(key)
        if not -self._size <= index < self._size:
            raise IndexError(f"NumpyDataset index {index} out of range for {self._size} samples.")
        if not isinstance(value, Mapping):
            raise TypeError(f"NumpyDataset[{index}] = ... needs a {{key: value}} dict of the sample, got "
                            f"{type(value).__name__}.")
        if set(value) != set(self.data):
            raise ValueError(f"NumpyDataset[{index}] = ... needs the dataset's keys {sorted(self.data)}, got "
                             f"{sorted(value, key=str)}; set a new key for every sample with dataset[key] = column.")
        for name in self.data:  # every value checked before any is stored: a refused row changes nothing
            self._check_entry(index, name, value[name])
        for name in self.data:
            self._store_entry(index, name, value[name])

    def _check_entry(self, index: int, key: str, entry: Any) -> None:
        """Raise if ``entry`` cannot be sample ``index``'s value of ``key`` (a key's samples share one shape)."""
        array = self.data[key]
        if array.dtype == object and array.ndim == 1:  # one object per sample: any shape fits
            return
        shape = np.shape(entry)
        if shape != array.shape[1:]:
            raise ValueError(f"NumpyDataset[{index}][{key!r}] has shape {shape}, but the key's samples have shape "
                             f"{array.shape[1:]}; give a value of that shape.")

    def _store_entry(self, index: int, key: str, entry: Any) -> None:
        """Make ``entry`` (checked by :meth:`_check_entry`) sample ``index``'s value of ``key``."""
        array = self.data[key]
        owned = getattr(self, "_owned", set())
        if array.dtype == object and array.ndim == 1:
            if key not in owned:
                array = array.copy()
            array[index] = entry
        else:
            entry_array = np.asarray(entry)
            wide = np.promote_types(array.dtype, entry_array.dtype)
            if wide != array.dtype or key not in owned:
                # Copy once (the given arrays belong to the caller), widening where the value needs it.
                array = array.astype(wide, copy=True)
            array[index] = entry_array
        if array is not self.data[key]:
            # A new dict, not an edit of the current one: a caller holding ``dataset.data`` keeps what it had.
            self.data = {**self.data, key: array}
        self._owned = owned | {key}
        entries = self._lists.get(key)
        if entries is not None:
            entries[index] = entry

    def _write_entry(self, index: int, key: str, value: Any, generation: int) -> None:
        """Set sample ``index``'s value of ``key``: a write into a :class:`NumpySample` read in ``generation``.

        Raises:
            ValueError: If the samples were renumbered (split) since the sample was read, ``key`` is not one of the
                dataset's keys, or ``value`` does not fit the key's samples.
        """
        if generation != getattr(self, "_generation", 0):
            raise ValueError(f"NumpyDataset sample {index} was read before dataset.split() renumbered the samples, so "
                             "it no longer knows which sample it is; read it again (dataset[i]) and write into that.")
        if key not in self.data:
            raise ValueError(f"NumpyDataset sample {index}: cannot add key {key!r} to one sample, as every sample of "
                             f"a NumpyDataset has the same keys {sorted(self.data)}; add it to every sample with "
                             f"dataset[{key!r}] = values (one per sample), or copy the sample (dict(sample)) to edit "
                             "it apart from the dataset.")
        self._check_entry(index, key, value)
        self._store_entry(index, key, value)

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """Return the samples at ``indices`` stacked along a new leading axis, in one fancy-indexing call.

        Equal to stacking ``self[i]`` for each index, but without a Python loop: Pipelines use it when no per-sample
        op needs to run.
        """
        indices = np.asarray(indices, dtype=np.int64)
        return {key: array[indices] for key, array in self.data.items()}

    def _labels_of(self, key: str) -> list[Any]:
        if key not in self.data:
            raise ValueError(f"NumpyDataset.split(stratify={key!r}): no key {key!r}; the keys are {sorted(self.data)}.")
        return list(self.data[key])

    def subset(self, indices: Sequence[int] | np.ndarray) -> NumpyDataset:
        """Return a new NumpyDataset holding the samples at ``indices`` (copied, in that order)."""
        result = object.__new__(NumpyDataset)
        result._set_samples(self, np.asarray(indices, dtype=np.int64))
        return result

    def _set_samples(self, source: NumpyDataset, indices: np.ndarray) -> None:
        """Hold ``source``'s samples at ``indices``: its arrays' rows, and its list entries for the keys given as
        lists (so that they stay FastEstimator's values)."""
        lists = {key: [entries[int(i)] for i in indices] for key, entries in source._lists.items()}
        self.data = source.get_batch(indices)
        self._lists = lists
        self._size = int(indices.size)
        self._owned = set(self.data)  # fancy indexing copied them: row edits need no further copy
        self._generation = getattr(self, "_generation", -1) + 1  # samples read before no longer write back

    def _take(self, indices: np.ndarray) -> NumpyDataset:
        return self.subset(indices)

    def _keep(self, indices: np.ndarray) -> None:
        self._set_samples(self, indices)

    def summary(self) -> DatasetSummary:
        """One line naming the size and each key's dtype and per-sample shape, with FastEstimator's summary fields
        (:class:`~fe_ray.dataset.summary.DatasetSummary`)."""
        fields = ", ".join(f"{key}: {array.dtype} {tuple(array.shape[1:])}" for key, array in self.data.items())
        keys = key_summaries(self[0], lambda key: self._lists.get(key, self.data[key])) if self._size else {}
        return DatasetSummary(f"NumpyDataset({self._size} samples; {fields})", self._size, keys)
