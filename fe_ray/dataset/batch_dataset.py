"""BatchDataset: every item is a whole batch drawn from several datasets (unpaired or class-balanced sampling).

FastEstimator's BatchDataset samples without replacement from a running index list per dataset, with Python's
global generator, so its batches depend on everything that ran before. Here each dataset is read along a stream of
random permutations (one after another, as sampling without replacement that refills when exhausted), and batch
``b`` takes the next positions of every stream. The streams, and the per-batch counts of the probability mode, are
a pure function of the Pipeline's shuffle seed, mode, ds_id, epoch and data pass, so a run resumed mid-epoch and
``num_process`` worker threads give exactly the batches of the uninterrupted serial run.
"""

from __future__ import annotations

import functools
import math
import numbers
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.dataset.splitting import stratify_for
from fe_ray.dataset.summary import DatasetSummary, merged_summary

#: Tags the batch plan's random streams apart from the shuffle's and the random ops' (same seed, epoch and pass).
_PLAN_TAG = 0x42415443
#: Tags the stream that orders the samples inside each batch (apart from the plan and the datasets' streams).
_SHUFFLE_TAG = 0x53485546
#: The key of a pass's random streams: (shuffle seed, mode, ds_id, epoch, data pass).
PassKey = tuple[int, str, str, int, int]


class BatchDataset:
    """Batches made of samples from several datasets.

    * ``num_samples=[n1, n2, ...]``, datasets with the same keys: each batch holds ``n1`` samples of the first
      dataset, ``n2`` of the second, ... (deterministic class balance).
    * ``num_samples=n`` with ``probability=[p1, p2, ...]`` and the same keys: each of the ``n`` samples comes from
      dataset ``i`` with probability ``p_i``.
    * Datasets with disjoint keys and one ``num_samples`` value: each sample merges one sample of every dataset
      (unpaired data, e.g. two image domains).

    The Pipeline treats each item as one batch, so its ``batch_size`` is ignored (it may be None for the modes
    whose data is a BatchDataset). One epoch has as many batches as it takes to draw every sample of the largest
    dataset once (FastEstimator's length).

    Args:
        datasets: Two or more map-style datasets returning dicts.
        num_samples: Samples per batch from each dataset (a list), or in total with ``probability`` (an int).
        probability: Chance to draw each sample from each dataset; needs an int ``num_samples`` and datasets with
            the same keys, and sums to 1.

    Raises:
        ValueError: For fewer than two datasets, counts that are not positive ints or do not match the datasets,
            probabilities that are not positive or do not sum to 1, or keys that are neither all equal nor disjoint.
    """

    #: Tells the Pipeline's Loader that every index is a whole batch (see :meth:`batch_samples`).
    fe_batched = True

    def __init__(self, datasets: Iterable[Any], num_samples: int | Sequence[int],
                 probability: Sequence[float] | None = None) -> None:
        # One dataset alone (not in a list) is one dataset, as FastEstimator reads it, not the samples it iterates.
        single = not isinstance(datasets, (list, tuple)) and hasattr(datasets, "__getitem__") \
            and hasattr(datasets, "__len__")
        self.datasets = [datasets] if single else list(datasets)
        if len(self.datasets) < 2:
            raise ValueError(f"BatchDataset needs two or more datasets to draw from, got {len(self.datasets)}.")
        counts = [num_samples] if isinstance(num_samples, numbers.Integral) else list(num_samples)
        if not counts or any(isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 for n in counts):
            raise ValueError(f"num_samples must be a positive int or a list of them, got {num_samples!r}.")
        self.num_samples = [int(n) for n in counts]
        self.probability = None if probability is None else [float(p) for p in probability]
        for position, dataset in enumerate(self.datasets):
            if isinstance(dataset[0], list):  # its items are batches (another BatchDataset)
                raise ValueError(f"BatchDataset cannot draw from dataset {position} ({type(dataset).__name__}), "
                                 "whose items are whole batches: list every dataset in one BatchDataset instead, "
                                 "e.g. BatchDataset([a, b, c], num_samples=[...]).")
        keys = [set(dataset[0].keys()) for dataset in self.datasets]
        self.same_keys = all(key == keys[0] for key in keys)
        disjoint = sum(len(key) for key in keys) == len(set().union(*keys))
        if not self.same_keys and not disjoint:
            raise ValueError(f"BatchDataset's datasets must have all the same keys or no key in common, got "
                             f"{[sorted(key) for key in keys]}.")
        self._check_counts(disjoint)

    def _check_counts(self, disjoint: bool) -> None:
        if self.probability is not None:
            if not self.same_keys:
                raise ValueError("BatchDataset probability needs datasets with the same keys; datasets with disjoint "
                                 "keys are paired sample by sample, with one num_samples value.")
            if len(self.num_samples) != 1 or len(self.probability) != len(self.datasets):
                raise ValueError(f"BatchDataset probability needs one int num_samples and one probability per dataset "
                                 f"({len(self.datasets)}), got num_samples={self.num_samples} and "
                                 f"probability={self.probability}.")
            if any(not p > 0 for p in self.probability) or not math.isclose(sum(self.probability), 1.0,
                                                                              abs_tol=1e-6):
                raise ValueError(f"BatchDataset probability must be positive numbers that sum to 1, got "
                                 f"{self.probability}.")
        elif disjoint and not self.same_keys:
            if len(set(self.num_samples)) != 1:
                raise ValueError(f"BatchDataset pairs datasets with disjoint keys sample by sample: give one "
                                 f"num_samples value, got {self.num_samples}.")
        elif len(self.num_samples) != len(self.datasets):
            raise ValueError(f"BatchDataset needs one num_samples per dataset ({len(self.datasets)}) or an int with "
                             f"probability, got {self.num_samples}.")

    def __len__(self) -> int:
        """Batches per epoch: enough to draw every sample of the largest dataset (relative to its share) once."""
        if self.probability is not None:
            total = self.num_samples[0]
            return max(math.ceil(len(ds) / total / p) for ds, p in zip(self.datasets, self.probability))
        counts = self.num_samples * len(self.datasets) if len(self.num_samples) == 1 else self.num_samples
        return max(math.ceil(len(ds) / n) for ds, n in zip(self.datasets, counts))

    def __getitem__(self, index: int) -> list[dict[str, Any]]:
        """Batch ``index`` as a list of sample dicts, for a fixed key (outside a Pipeline: the same each call)."""
        return self.batch_samples(index, (0, "", "", 1, 0))

    def batch_samples(self, index: int, key: PassKey) -> list[dict[str, Any]]:
        """The samples of batch ``index`` (``0 <= index < len(self)``) of the pass ``key`` names.

        Args:
            index: The batch within the pass.
            key: (shuffle seed, mode, ds_id, epoch, data pass): seeds this pass's streams.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"BatchDataset has {len(self)} batches per pass, got index {index}.")
        entropy = (_PLAN_TAG, int(key[0]), zlib.crc32(key[1].encode()), zlib.crc32(key[2].encode()), int(key[3]),
                   int(key[4]))
        counts, offsets = self._plan(entropy, index)
        drawn = [[ds[int(i)] for i in _stream(entropy, d, len(ds), offset, count)]
                 for d, (ds, offset, count) in enumerate(zip(self.datasets, offsets, counts))]
        if self.same_keys:
            batch = [dict(sample) for samples in drawn for sample in samples]
        else:
            batch = [{k: v for samples in parts for k, v in samples.items()} for parts in zip(*drawn)]
        # The batch's samples in a random order, as FastEstimator shuffles them: otherwise every batch holds its
        # datasets' samples in blocks, and a replica's contiguous slice (or in-batch mixing) sees one dataset only.
        # The order is a function of the pass and the batch's position, so a resumed run makes the same batch.
        order = np.random.default_rng([*entropy, _SHUFFLE_TAG, index]).permutation(len(batch))
        return [batch[i] for i in order]

    def _plan(self, entropy: tuple[int, ...], index: int) -> tuple[list[int], list[int]]:
        """Samples batch ``index`` takes from each dataset, and where in each dataset's stream they start."""
        if self.probability is None:
            counts = self.num_samples * len(self.datasets) if len(self.num_samples) == 1 else self.num_samples
            return list(counts), [n * index for n in counts]
        table = _count_table(entropy, len(self), self.num_samples[0], tuple(self.probability))
        return [int(n) for n in table[index]], [int(n) for n in table[:index].sum(axis=0)]

    def split(self, *fractions: float | int | Sequence[int], seed: int | None = None,
              stratify: str | None = None) -> Any:
        """Split every dataset the same way (their own ``split``) and return BatchDataset(s) over the parts;
        ``stratify`` goes to the datasets whose samples hold that key, as in FastEstimator."""
        parts = [dataset.split(*fractions, seed=seed, **stratify_for(dataset, stratify)) for dataset in self.datasets]
        if len(fractions) == 1:
            return BatchDataset(parts, self.num_samples, self.probability)
        return [BatchDataset(group, self.num_samples, self.probability) for group in zip(*parts)]

    def summary(self) -> DatasetSummary:
        """A one-line description, with FastEstimator's summary fields: ``num_instances`` (batches per epoch) and
        the keys of the datasets' summaries."""
        mode = f"probability={self.probability}" if self.probability else f"num_samples={self.num_samples}"
        text = (f"BatchDataset: {len(self)} batches of {len(self.datasets)} datasets "
                f"({[len(ds) for ds in self.datasets]} samples), {mode}")
        return merged_summary(text, len(self), self.datasets)

    def __repr__(self) -> str:
        return self.summary()

    def state_dict(self) -> dict[str, Any]:
        """Empty: batches are a pure function of their position (see the module doc)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Accept the empty state of :meth:`state_dict`."""
        if state:
            raise ValueError(f"BatchDataset keeps no state, got {sorted(state)}.")


def _stream(entropy: tuple[int, ...], dataset: int, size: int, start: int, count: int) -> np.ndarray:
    """Positions ``start .. start + count`` of dataset ``dataset``'s stream of permutations of ``range(size)``."""
    out = []
    position = start
    while position < start + count:
        cycle, within = divmod(position, size)
        take = min(size - within, start + count - position)
        out.append(_permutation(entropy, dataset, cycle, size)[within:within + take])
        position += take
    return np.concatenate(out) if out else np.zeros(0, np.int64)


@functools.lru_cache(maxsize=64)
def _permutation(entropy: tuple[int, ...], dataset: int, cycle: int, size: int) -> np.ndarray:
    # Cached: consecutive batches read the same permutation; a worker thread racing another computes it twice.
    return np.random.default_rng(np.random.SeedSequence([*entropy, dataset, cycle])).permutation(size)


@functools.lru_cache(maxsize=16)
def _count_table(entropy: tuple[int, ...], batches: int, total: int, probability: tuple[float, ...]) -> np.ndarray:
    """Per batch of the pass, how many of its ``total`` samples come from each dataset (drawn once per pass)."""
    rng = np.random.default_rng(np.random.SeedSequence([*entropy, len(probability), 0x434E54]))
    return rng.multinomial(total, np.asarray(probability) / sum(probability), size=batches)


__all__ = ["BatchDataset"]
