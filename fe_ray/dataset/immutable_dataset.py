"""ImmutableDataset: what NumpyDataset and InMemoryDataset (with the file datasets built on it) share.

Both are map-style datasets whose samples never change once they are in a Pipeline, so both have an empty state, a
``repr`` that is their :meth:`summary`, and FastEstimator's ``split`` (the index rules of
:func:`~fe_ray.dataset.splitting.plan_split`), differing only in how they copy samples out and keep the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from fe_ray.dataset.splitting import plan_split

_Dataset = TypeVar("_Dataset", bound="ImmutableDataset")


class ImmutableDataset:
    """Base of the immutable map-style datasets: ``split``, ``repr`` and the (empty) state hooks.

    A subclass provides ``__len__``, :meth:`summary`, :meth:`_take` (a new dataset of the samples at some indices)
    and :meth:`_keep` (keep only the samples at some indices).
    """

    def __len__(self) -> int:
        raise NotImplementedError

    def summary(self) -> str:
        raise NotImplementedError

    def _take(self: _Dataset, indices: np.ndarray) -> _Dataset:
        """A new dataset of this class holding the samples at ``indices``, in that order."""
        raise NotImplementedError

    def _keep(self, indices: np.ndarray) -> None:
        """Keep only the samples at ``indices`` (sorted), renumbered from 0."""
        raise NotImplementedError

    def split(self: _Dataset, *fractions: float | int | Sequence[int], seed: int | None = None,
              stratify: str | None = None) -> _Dataset | list[_Dataset]:
        """Move samples out of this dataset into new ones of the same class, as FastEstimator's ``dataset.split``.

        ``eval_data = train_data.split(0.2)`` moves a random 20% of the samples into ``eval_data``; this dataset
        keeps the rest, in their order, renumbered from 0. Each argument is a fraction (a float in (0, 1):
        ``ceil(fraction * len)`` samples), a number of samples (an int), or a list of sample indices; numbers and
        index lists cannot be mixed.

        Args:
            *fractions: One part per argument.
            seed: Seed of the random choice (FastEstimator's: the same seed takes the same samples); None draws from
                Python's global generator (which ``fe.enable_deterministic`` seeds).
            stratify: A key holding each sample's class: each part then keeps the classes' proportions (at least
                one sample of each class it can have), by FastEstimator's rules. Numbers only, not index lists.

        Returns:
            The new dataset, or a list of them when several parts were asked for.

        Raises:
            ValueError: If no part is asked for, a fraction or count is out of range, index lists overlap or hold an
                index out of range, numbers and index lists are mixed, or nothing would be left in this dataset.
            TypeError: If an argument is neither a number nor a list of indices.
        """
        labels = None if stratify is None else self._labels_of(stratify)
        parts, keep = plan_split(fractions, len(self), seed, type(self).__name__, labels)
        results = [self._take(part) for part in parts]
        self._keep(keep)
        return results[0] if len(results) == 1 else results

    def _labels_of(self, key: str) -> list[Any]:
        """Every sample's value of ``key`` (the class a stratified split keeps in proportion).

        Raises:
            ValueError: If the samples have no such key, naming the keys they have.
        """
        first = self[0] if len(self) else {}
        if key not in first:
            raise ValueError(f"{type(self).__name__}.split(stratify={key!r}): the samples have no key {key!r}; their "
                             f"keys are {sorted(first)}.")
        return [self[index][key] for index in range(len(self))]

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
            raise ValueError(f"{type(self).__name__} has no state but was given keys {sorted(state)}; the checkpoint "
                             "belongs to a different dataset.")
