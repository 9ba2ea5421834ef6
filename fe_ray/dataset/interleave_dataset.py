"""InterleaveDataset: each batch comes from one of several datasets, in a repeating pattern of steps.

FastEstimator reshuffles the datasets' index maps with Python's global generator at every epoch. Here the Pipeline's
Loader reads each dataset along a stream of permutations that is a pure function of (shuffle seed, mode, ds_id,
epoch, data pass, dataset), as BatchDataset's batches are, so a run resumed mid-epoch and ``num_process`` worker
threads give exactly the batches of the uninterrupted serial run.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from fe_ray.dataset.combined_dataset import child_states, load_child_states
from fe_ray.dataset.splitting import stratify_for
from fe_ray.dataset.summary import DatasetSummary, merged_summary


class InterleaveDataset:
    """Batches drawn from several datasets by a repeating ``pattern`` (FastEstimator's InterleaveDataset).

    Step ``s`` of an epoch is a batch of dataset ``pattern[s % len(pattern)]``; within a dataset, batches take its
    samples in order (a permutation of them when the Pipeline shuffles), each sample at most once per epoch. So
    ``InterleaveDataset([ds1, ds2])`` alternates a batch of ``ds1`` with one of ``ds2``, and ``pattern=[0, 0, 1]``
    takes two of ``ds1`` then one of ``ds2``. An epoch has as many full repeats of the pattern as the scarcest dataset
    allows (``min(len(ds) // (count_in_pattern * batch_size))``), so every batch is full: as in FastEstimator,
    ``drop_last`` is always in effect. Wrap a dataset in :class:`~fe_ray.dataset.ExtendDataset` to have it count as
    ``spoof_length`` samples (read in several passes) instead of its length.

    Batch sizes and ops per dataset: as in FastEstimator, a ``Batch`` op whose ``ds_id`` is a dataset's name sets
    that dataset's batch size; :meth:`set_batch_sizes` (one size per dataset) does so too, and datasets left unset
    use the Pipeline's ``batch_size``. Ops are chosen per dataset as in FastEstimator:
    when ``datasets`` is a dict, an op runs on a dataset's batches if its ``ds_id`` allows that dataset's name (the
    name replaces the Pipeline-level ds_id); for a list, the Pipeline-level ds_id selects the ops of all datasets.

    Args:
        datasets: Two or more map-style datasets, as a list, or as ``{name: dataset}`` whose names serve as ds_ids.
        pattern: The repeating order of datasets, of length >= 2: indices into the list, or names of the dict.
            None: each dataset once, in order.

    Raises:
        TypeError: If ``datasets`` is neither a list nor a dict, a name is not a string, or ``pattern`` is not a
            list.
        ValueError: For fewer than two datasets, an empty one, one of whole batches (BatchDataset) or another
            InterleaveDataset, a pattern shorter than 2, naming an unknown dataset or leaving one out.
    """

    #: Tells the Pipeline's Loader to plan batches with :meth:`locate`.
    fe_interleaved = True

    def __init__(self, datasets: Mapping[str, Any] | Sequence[Any], pattern: list[int] | list[str] | None = None
                 ) -> None:
        if pattern is not None and not isinstance(pattern, list):
            raise TypeError(f"InterleaveDataset pattern must be a list, got {type(pattern).__name__}.")
        if pattern is not None and len(pattern) < 2:
            raise ValueError(f"InterleaveDataset pattern must hold 2 or more steps, got {pattern!r}.")
        if isinstance(datasets, Mapping):
            for name in datasets:
                if not isinstance(name, str) or not name:
                    raise TypeError(f"InterleaveDataset dataset names must be non-empty strings, got {name!r}.")
            tags: list[str | None] = list(datasets)
            sets = list(datasets.values())
            if pattern is not None:
                unknown = [step for step in pattern if step not in datasets]
                if unknown:
                    raise ValueError(f"InterleaveDataset pattern names {unknown} that are not datasets; names: "
                                     f"{list(datasets)}.")
                pattern = [tags.index(step) for step in pattern]
        elif isinstance(datasets, (list, tuple)):
            sets = list(datasets)
            tags = [None] * len(sets)
            if pattern is not None:
                valid = range(len(sets))
                if any(isinstance(step, bool) or not isinstance(step, numbers.Integral) or step not in valid
                       for step in pattern):
                    raise ValueError(f"InterleaveDataset pattern must hold dataset indices in {list(valid)}, got "
                                     f"{pattern!r}.")
        else:
            raise TypeError(f"InterleaveDataset datasets must be a list or a {{name: dataset}} dict, got "
                            f"{type(datasets).__name__}.")
        if len(sets) < 2:
            raise ValueError(f"InterleaveDataset needs more than one dataset, got {len(sets)}.")
        for position, dataset in enumerate(sets):
            _check_child(dataset, tags[position] if tags[position] is not None else position)
        self.datasets = sets
        self.tags = tags
        self.pattern: list[int] = [int(step) for step in pattern] if pattern is not None else list(range(len(sets)))
        missing = sorted(set(range(len(sets))) - set(self.pattern))
        if missing:
            named = [tags[index] if tags[index] is not None else index for index in missing]
            raise ValueError(f"InterleaveDataset pattern {pattern!r} leaves out dataset(s) {named}; every dataset "
                             "must appear in it.")
        self.frequency = [self.pattern.count(index) for index in range(len(sets))]
        # FastEstimator's starting value; used by len() and indexing until set_batch_sizes or a Pipeline sizes them.
        self.batch_sizes = [1] * len(sets)
        self._sizes_set = False

    def set_batch_sizes(self, batch_sizes: Sequence[int]) -> None:
        """Set each dataset's batch size (in the order of ``datasets``); they override the Pipeline's batch_size.

        Raises:
            ValueError: If the sizes are not one positive int per dataset.
        """
        sizes = list(batch_sizes)
        if len(sizes) != len(self.datasets) or any(
                isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1 for size in sizes):
            raise ValueError(f"InterleaveDataset.set_batch_sizes needs one positive int per dataset "
                             f"({len(self.datasets)}), got {batch_sizes!r}.")
        self.batch_sizes = [int(size) for size in sizes]
        self._sizes_set = True

    @property
    def explicit_batch_sizes(self) -> list[int] | None:
        """The sizes given to :meth:`set_batch_sizes`, or None when the Pipeline's batch_size applies."""
        return list(self.batch_sizes) if self._sizes_set else None

    def resolve_batch_sizes(self, default: int | None) -> list[int]:
        """The batch size of each dataset: those set with :meth:`set_batch_sizes`, else ``default`` for all.

        A ``default`` of None (a Pipeline without a batch size) gives batches of one sample, as in FastEstimator.
        """
        if self._sizes_set:
            return list(self.batch_sizes)
        return [int(default or 1)] * len(self.datasets)

    def stream_lengths(self) -> list[int]:
        """Samples each dataset offers per epoch: an ExtendDataset's ``spoof_length``, else its length."""
        return [int(getattr(ds, "spoof_length", len(ds))) if getattr(ds, "fe_extended", False) else len(ds)
                for ds in self.datasets]

    def num_batches(self, batch_sizes: Sequence[int]) -> int:
        """Batches per epoch with these per-dataset batch sizes: full repeats of the pattern times its length.

        Raises:
            ValueError: If some dataset cannot fill its batches of a single repeat of the pattern.
        """
        cycles = min(length // (count * size) for length, count, size in
                     zip(self.stream_lengths(), self.frequency, batch_sizes))
        if cycles < 1:
            short = [self._name(index) for index, (length, count, size) in
                     enumerate(zip(self.stream_lengths(), self.frequency, batch_sizes)) if length < count * size]
            raise ValueError(f"InterleaveDataset dataset(s) {short} hold too few samples for one repeat of the "
                             f"pattern {self.pattern} at batch sizes {list(batch_sizes)}; wrap them in "
                             "ExtendDataset(dataset, spoof_length) or use smaller batches.")
        return cycles * len(self.pattern)

    def locate(self, batch: int, batch_sizes: Sequence[int]) -> tuple[int, int, int]:
        """Where batch ``batch`` (``0 <= batch < num_batches``) of an epoch reads.

        Returns:
            ``(dataset, start, size)``: the batch holds positions ``start .. start + size`` of that dataset's stream
            for the epoch (the order the Pipeline reads it in).
        """
        cycle, step = divmod(int(batch), len(self.pattern))
        index = self.pattern[step]
        size = int(batch_sizes[index])
        earlier = self.pattern[:step].count(index)
        return index, (cycle * self.frequency[index] + earlier) * size, size

    def __len__(self) -> int:
        """Batches per epoch at the current :attr:`batch_sizes` (1 each until set, as in FastEstimator)."""
        return self.num_batches(self.batch_sizes)

    def __getitem__(self, batch: int) -> list[dict[str, Any]]:
        """The samples of batch ``batch`` in unshuffled order, at the current :attr:`batch_sizes`.

        Raises:
            IndexError: If ``batch`` is out of range.
        """
        if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or not 0 <= batch < len(self):
            raise IndexError(f"InterleaveDataset has {len(self)} batches at batch sizes {self.batch_sizes}, got "
                             f"index {batch!r}.")
        index, start, size = self.locate(int(batch), self.batch_sizes)
        dataset = self.datasets[index]
        return [dataset[position % len(dataset)] for position in range(start, start + size)]

    def _name(self, index: int) -> str | int:
        tag = self.tags[index]
        return tag if tag is not None else index

    def split(self, *fractions: float | int | Sequence[int], seed: int | None = None,
              stratify: str | None = None) -> Any:
        """Split every dataset the same way (their own ``split``) and return InterleaveDataset(s) over the parts.

        The parts keep this dataset's pattern, names and batch sizes; ``stratify`` goes to the datasets whose
        samples hold that key.

        Raises:
            TypeError: If a dataset has no ``split`` (e.g. an ExtendDataset).
        """
        for index, dataset in enumerate(self.datasets):
            if not callable(getattr(dataset, "split", None)):
                raise TypeError(f"InterleaveDataset.split needs every dataset to have a split method; dataset "
                                f"{self._name(index)!r} ({type(dataset).__name__}) has none. Split the datasets "
                                "before interleaving them.")
        parts = [dataset.split(*fractions, seed=seed, **stratify_for(dataset, stratify)) for dataset in self.datasets]
        groups = [parts] if len(fractions) == 1 else [list(group) for group in zip(*parts)]
        results = []
        for group in groups:
            given: Any = group if self.tags[0] is None else dict(zip(self.tags, group))
            pattern = self.pattern if self.tags[0] is None else [self.tags[step] for step in self.pattern]
            result = InterleaveDataset(given, pattern=pattern)
            if self._sizes_set:
                result.set_batch_sizes(self.batch_sizes)
            results.append(result)
        return results[0] if len(results) == 1 else results

    def summary(self) -> DatasetSummary:
        """One line naming the datasets, the pattern and the batch sizes, with FastEstimator's summary fields:
        ``num_instances`` (``len(self)``, batches per epoch) and the keys of the datasets' summaries."""
        names = ", ".join(f"{self._name(index)}: {type(ds).__name__}({len(ds)})"
                          for index, ds in enumerate(self.datasets))
        sizes = self.batch_sizes if self._sizes_set else "Pipeline batch_size"
        text = f"InterleaveDataset({names}; pattern={self.pattern}; batch sizes: {sizes})"
        return merged_summary(text, len(self), self.datasets)

    def __repr__(self) -> str:
        return self.summary()

    def state_dict(self) -> dict[str, Any]:
        """The states of the datasets that keep one (None for the others); batches are a function of position."""
        return child_states(self.datasets)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` into the datasets.

        Raises:
            ValueError: If ``state`` holds another number of datasets.
        """
        load_child_states(self, self.datasets, state)


def _check_child(dataset: Any, name: str | int) -> None:
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
        raise TypeError(f"InterleaveDataset dataset {name!r} is a {type(dataset).__name__}, not a map-style dataset "
                        "(__len__ and __getitem__).")
    if getattr(dataset, "fe_batched", False) or getattr(dataset, "fe_interleaved", False):
        raise ValueError(f"InterleaveDataset dataset {name!r} ({type(dataset).__name__}) gives whole batches; "
                         "interleave datasets of samples.")
    if len(dataset) == 0:
        raise ValueError(f"InterleaveDataset dataset {name!r} ({type(dataset).__name__}) is empty.")


__all__ = ["InterleaveDataset"]
