"""FastEstimator's ``fastestimator.dataset.dataset`` module path: ``FEDataset`` (a base for datasets of your own),
``InMemoryDataset``, ``DatasetSummary`` and ``KeySummary``.

fe_ray's Pipeline takes any map-style dataset (``__len__`` and ``__getitem__`` returning dicts), so subclassing
:class:`FEDataset` is optional; it gives a dataset of your own FastEstimator's ``split`` on top of a ``_do_split``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fe_ray.dataset.in_memory_dataset import InMemoryDataset
from fe_ray.dataset.splitting import plan_split
from fe_ray.dataset.summary import DatasetSummary, KeySummary


class FEDataset:
    """A base for datasets of your own, with FastEstimator's ``FEDataset`` contract.

    A subclass defines ``__len__``, ``__getitem__`` (a dict per sample) and, to support :meth:`split`,
    ``_do_split(splits)``: take the samples at each list of indices out of this dataset into a new one, keep the
    rest, and return the new datasets. ``_split_length`` may count something else than samples to split (classes,
    say), as in FastEstimator.
    """

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__.")

    def __getitem__(self, index: int) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__.")

    def _split_length(self) -> int:
        """How many things :meth:`split` divides (the samples, unless a subclass says otherwise)."""
        return len(self)

    def _do_split(self, splits: Sequence[Iterable[int]]) -> list[Any]:
        """Move the samples at each index list of ``splits`` into a new dataset each; return them in order."""
        raise NotImplementedError(f"{type(self).__name__}.split needs a _do_split(splits) method that moves the "
                                  "samples at each list of indices into a new dataset and returns them.")

    def split(self, *fractions: float | int | Iterable[int], seed: int | None = None,
              stratify: str | None = None) -> Any:
        """Split this dataset as FastEstimator's ``FEDataset.split``: fractions, numbers of samples or index lists,
        seeded draws (the same samples as FastEstimator for the same seed) and ``stratify`` by a key's classes.

        Returns:
            The new dataset, or a list of them when several parts were asked for.

        Raises:
            ValueError: If a part is out of range, numbers and index lists are mixed, or nothing would be left.
            TypeError: If an argument is neither a number nor a list of indices.
        """
        size = self._split_length()
        labels = None if stratify is None else [self[index][stratify] for index in range(size)]
        given = [list(part) if not isinstance(part, (int, float)) else part for part in fractions]
        parts, _ = plan_split(given, size, seed, type(self).__name__, labels)
        results = self._do_split([part.tolist() for part in parts])
        return results[0] if len(results) == 1 else results

    def summary(self) -> DatasetSummary:
        """A summary of the dataset; a subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__} defines no summary().")

    def __str__(self) -> str:
        return str(self.summary())


__all__ = ["DatasetSummary", "FEDataset", "InMemoryDataset", "KeySummary"]
