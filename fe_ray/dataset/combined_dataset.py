"""CombinedDataset: several datasets with the same keys, read one after another as a single dataset."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

#: The key of a pass, as the Pipeline's Loader gives it: (shuffle seed, mode, ds_id, epoch, data pass).
PassKey = tuple[int, str, str, int, int]


class CombinedDataset:
    """The concatenation of two or more map-style datasets with the same keys (FastEstimator's CombinedDataset).

    Sample ``i`` is sample ``i`` of the first dataset while ``i < len(first)``, then the samples of the second one,
    and so on; the length is the sum of the lengths. The Pipeline shuffles over the whole concatenation.

    Differences from FastEstimator: its ``__getitem__`` mis-computes the offset of the third and later datasets
    (every index reaches the right sample here), it raises AssertionError / KeyError where this raises ValueError,
    and negative indices count from the end. A dataset whose samples are random draws of their own (``fe_keyed``,
    e.g. SiameseDirDataset) keeps its exact, position-seeded draws inside a CombinedDataset.

    Args:
        datasets: One or more map-style datasets whose samples are dicts with the same keys (a single one is read
            as it is, as FastEstimator's, which lets a program build the list).

    Attributes:
        cumulative_sizes: The running totals of the datasets' lengths (``[len(a), len(a) + len(b), ...]``), as on
            FastEstimator's (torch's ``ConcatDataset``).

    Raises:
        TypeError: If ``datasets`` is not a list (or tuple) of map-style datasets.
        ValueError: If no dataset is given, one is empty or gives whole batches (a BatchDataset), or their first
            samples have different keys.
    """

    def __init__(self, datasets: Sequence[Any]) -> None:
        if not isinstance(datasets, (list, tuple)):
            raise TypeError(f"CombinedDataset needs a list of datasets, got {type(datasets).__name__}.")
        if not datasets:
            raise ValueError("CombinedDataset needs at least 1 dataset to combine, got an empty list.")
        for position, dataset in enumerate(datasets):
            if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
                raise TypeError(f"CombinedDataset dataset {position} is a {type(dataset).__name__}, not a map-style "
                                "dataset (__len__ and __getitem__).")
            if getattr(dataset, "fe_batched", False) or getattr(dataset, "fe_interleaved", False):
                raise ValueError(f"CombinedDataset dataset {position} ({type(dataset).__name__}) gives whole batches, "
                                 "not samples; combine the datasets inside it instead.")
            if len(dataset) == 0:
                raise ValueError(f"CombinedDataset dataset {position} ({type(dataset).__name__}) is empty.")
        keys = [sorted(dataset[0].keys()) for dataset in datasets]
        if any(key != keys[0] for key in keys[1:]):
            raise ValueError(f"CombinedDataset needs datasets with the same keys, got {keys}; rename keys with a "
                             "NumpyOp, or use BatchDataset / InterleaveDataset for datasets with other keys.")
        self.datasets = list(datasets)
        # Offsets of each dataset's first sample: sample i lives in the last dataset whose offset is <= i.
        self._starts = [0, *np.cumsum([len(dataset) for dataset in self.datasets])[:-1].tolist()]

    @property
    def cumulative_sizes(self) -> list[int]:
        """The running totals of the datasets' lengths (FastEstimator's, from torch's ``ConcatDataset``)."""
        return np.cumsum([len(dataset) for dataset in self.datasets]).tolist()

    @property
    def fe_keyed(self) -> bool:
        """Whether some dataset draws its samples by position (the Loader then reads :meth:`keyed_item`)."""
        return any(getattr(dataset, "fe_keyed", False) for dataset in self.datasets)

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)

    def _locate(self, index: int) -> tuple[Any, int]:
        """The dataset holding sample ``index`` and the sample's index within it."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"CombinedDataset index must be an int, got {type(index).__name__}: {index!r:.100}.")
        size = len(self)
        index = int(index)
        if not -size <= index < size:
            raise IndexError(f"CombinedDataset index {index} out of range for {size} samples.")
        index %= size
        position = bisect.bisect_right(self._starts, index) - 1
        return self.datasets[position], index - self._starts[position]

    def __getitem__(self, index: int) -> Any:
        """Sample ``index`` of the concatenation (see the class doc).

        Raises:
            IndexError: If ``index`` is out of range.
            TypeError: If ``index`` is not an int.
        """
        dataset, local = self._locate(index)
        return dataset[local]

    def keyed_item(self, index: int, key: PassKey) -> Any:
        """Sample ``index`` as read in the pass ``key`` names: a keyed dataset's own ``keyed_item``, else plain."""
        dataset, local = self._locate(index)
        if getattr(dataset, "fe_keyed", False):
            return dataset.keyed_item(local, key)
        return dataset[local]

    def summary(self) -> str:
        """One line naming the size and the datasets combined."""
        parts = ", ".join(f"{type(dataset).__name__}({len(dataset)})" for dataset in self.datasets)
        return f"CombinedDataset({len(self)} samples of {len(self.datasets)} datasets: {parts})"

    def __repr__(self) -> str:
        return self.summary()

    def state_dict(self) -> dict[str, Any]:
        """The states of the datasets that keep one (None for the others), so a Pipeline checkpoint holds them."""
        return child_states(self.datasets)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` into the datasets.

        Raises:
            ValueError: If ``state`` holds another number of datasets.
        """
        load_child_states(self, self.datasets, state)


def _state_of(dataset: Any) -> Any:
    state_dict = getattr(dataset, "state_dict", None)
    return state_dict() if callable(state_dict) else None


def child_states(datasets: Sequence[Any]) -> dict[str, Any]:
    """``{"datasets": [state or None, ...]}`` of a composite dataset's children."""
    return {"datasets": [_state_of(dataset) for dataset in datasets]}


def load_child_states(owner: Any, datasets: Sequence[Any], state: dict[str, Any]) -> None:
    """Load the states :func:`child_states` saved back into ``datasets`` (``owner`` names the composite)."""
    saved = state.get("datasets") if isinstance(state, dict) else None
    if not isinstance(saved, list) or len(saved) != len(datasets):
        raise ValueError(f"{type(owner).__name__} state needs {{'datasets': [one state per dataset "
                         f"({len(datasets)})]}}, got {state!r:.200}; the checkpoint belongs to a different dataset.")
    for dataset, dataset_state in zip(datasets, saved):
        if dataset_state is not None:
            dataset.load_state_dict(dataset_state)


__all__ = ["CombinedDataset"]
