"""NumpyDataset: an immutable, map-style dataset over a dict of equally long numpy arrays."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class NumpyDataset:
    """A map-style dataset: sample ``i`` is ``{key: array[i] for key, array in data.items()}``.

    The arrays are kept as given (no copy) and must not be modified afterwards: Pipelines rely on the dataset being
    immutable, which is also why :meth:`state_dict` is empty. (:meth:`split` takes samples out, as FastEstimator's
    does: call it before the dataset goes into a Pipeline.)

    Args:
        data: Mapping of key to array (anything ``np.asarray`` accepts); every array needs a leading sample axis of
            the same length.

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
        for key, value in data.items():
            if not isinstance(key, str):
                raise TypeError(f"NumpyDataset keys must be strings, got {key!r} ({type(key).__name__}).")
            array = np.asarray(value)
            if array.ndim == 0:
                raise ValueError(f"NumpyDataset key {key!r} holds a scalar; every value needs a leading sample axis.")
            arrays[key] = array
        lengths = {key: len(array) for key, array in arrays.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"NumpyDataset arrays must have the same length, got {lengths}.")
        self.data = arrays
        self._size = next(iter(lengths.values()))

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int | str) -> dict[str, Any] | np.ndarray:
        """Return sample ``index`` (negative indices count from the end) as a new dict of array views; a key
        (``dataset["y"]``) returns that key's whole array, as FastEstimator's in-memory datasets do.

        Raises:
            IndexError: If ``index`` is out of range.
            ValueError: If a key is not one of the dataset's keys.
            TypeError: If ``index`` is neither an int nor a key.
        """
        if isinstance(index, str):
            if index not in self.data:
                raise ValueError(f"NumpyDataset has no key {index!r}; its keys are {list(self.data)}.")
            return self.data[index]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"NumpyDataset index must be an int (a sample) or a key {list(self.data)}, got "
                            f"{type(index).__name__}: {index!r:.100}.")
        index = int(index)
        if not -self._size <= index < self._size:
            raise IndexError(f"NumpyDataset index {index} out of range for {self._size} samples.")
        return {key: array[index] for key, array in self.data.items()}

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """Return the samples at ``indices`` stacked along a new leading axis, in one fancy-indexing call.

        Equal to stacking ``self[i]`` for each index, but without a Python loop: Pipelines use it when no per-sample
        op needs to run.
        """
        indices = np.asarray(indices, dtype=np.int64)
        return {key: array[indices] for key, array in self.data.items()}

    def subset(self, indices: Sequence[int] | np.ndarray) -> NumpyDataset:
        """Return a new NumpyDataset holding the samples at ``indices`` (copied, in that order)."""
        return NumpyDataset(self.get_batch(indices))

    def split(self, *fractions: float | int | Sequence[int], seed: int | None = None
              ) -> NumpyDataset | list[NumpyDataset]:
        """Move samples out of this dataset into new ones, as FastEstimator's ``dataset.split``.

        ``eval_data = train_data.split(0.2)`` moves a random 20% of the samples into ``eval_data``; this dataset keeps
        the rest (in their order). Each argument is a fraction (a float in (0, 1): ``ceil(fraction * len)`` samples),
        a number of samples (an int), or a list of sample indices; numbers and index lists cannot be mixed.

        Args:
            *fractions: One part per argument.
            seed: Seed of the random choice; None draws from numpy's global generator (which
                ``fe.enable_deterministic`` seeds).

        Returns:
            The new dataset, or a list of them when several parts were asked for.

        Raises:
            ValueError: If no part is asked for, a fraction or count is out of range, index lists overlap or hold an
                index out of range, numbers and index lists are mixed, or nothing would be left in this dataset.
            TypeError: If an argument is neither a number nor a list of indices.
        """
        size = self._size
        if not fractions:
            raise ValueError("NumpyDataset.split needs at least one part: a fraction (split(0.2)), a number of "
                             "samples (split(100)) or a list of indices (split([0, 5, 7])).")
        kinds = [_split_kind(part) for part in fractions]
        if len(set(kinds)) > 1:
            raise ValueError(f"NumpyDataset.split takes either numbers (fractions, counts) or index lists, not both; "
                             f"got {list(fractions)!r:.200}.")
        if kinds[0] == "number":
            counts = [_split_count(part, size) for part in fractions]
            rng = np.random.default_rng(seed) if seed is not None else np.random
            chosen = rng.permutation(size)[:sum(counts)]
            parts = np.split(chosen, np.cumsum(counts)[:-1])
        else:
            parts = [np.asarray(list(part)).reshape(-1) for part in fractions]
            for given, part in zip(fractions, parts):
                if part.size and not np.issubdtype(part.dtype, np.integer):
                    raise TypeError(f"NumpyDataset.split index lists hold ints, got {given!r:.100}; pass fractions "
                                    "as separate arguments: split(0.1, 0.2).")
            parts = [part.astype(np.int64) for part in parts]
            for part in parts:
                if part.size and (part.min() < 0 or part.max() >= size):
                    raise ValueError(f"NumpyDataset.split index lists need indices in [0, {size}), got "
                                     f"{part.tolist()!r:.200}.")
        taken = np.concatenate(parts) if parts else np.empty(0, np.int64)
        if len(np.unique(taken)) != len(taken):
            raise ValueError("NumpyDataset.split index lists overlap (or repeat an index); each sample can go to one "
                             "part only.")
        keep = np.setdiff1d(np.arange(size), taken)
        if keep.size == 0:
            raise ValueError(f"NumpyDataset.split would take all {size} samples and leave this dataset empty; ask for "
                             "smaller parts.")
        results = [self.subset(part) for part in parts]
        self.data = self.get_batch(keep)
        self._size = int(keep.size)
        return results[0] if len(results) == 1 else results

    def summary(self) -> str:
        """One line naming the size and each key's dtype and per-sample shape."""
        fields = ", ".join(f"{key}: {array.dtype} {tuple(array.shape[1:])}" for key, array in self.data.items())
        return f"NumpyDataset({self._size} samples; {fields})"

    def __repr__(self) -> str:
        return self.summary()

    def state_dict(self) -> dict[str, Any]:
        """Return the dataset's mutable state: none, it is immutable (kept for the System's dataset-state hook)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Accept the empty state of :meth:`state_dict`.

        Raises:
            ValueError: If ``state`` is not empty (it came from a different kind of dataset).
        """
        if state:
            raise ValueError(f"NumpyDataset has no state but was given keys {sorted(state)}; the checkpoint belongs "
                             "to a different dataset.")


def _split_kind(part: Any) -> str:
    if isinstance(part, (int, float, np.integer, np.floating)) and not isinstance(part, bool):
        return "number"
    if isinstance(part, (str, bytes, Mapping)) or not hasattr(part, "__iter__"):
        raise TypeError(f"NumpyDataset.split takes fractions (0.2), numbers of samples (100) or lists of indices "
                        f"([0, 5, 7]), got {type(part).__name__}: {part!r:.100}.")
    return "indices"


def _split_count(part: float | int, size: int) -> int:
    """The number of samples a fraction or count asks for, checked against the dataset's ``size``."""
    if isinstance(part, (float, np.floating)):
        if not 0.0 < part < 1.0:
            raise ValueError(f"NumpyDataset.split fractions must be in (0, 1), got {part!r}; pass an int for a number "
                             "of samples.")
        return math.ceil(size * float(part))
    if part < 1:
        raise ValueError(f"NumpyDataset.split numbers of samples must be >= 1, got {part!r}.")
    return int(part)
