"""Batch plans of the datasets read as streams: ExtendDataset (a spoofed epoch length) and InterleaveDataset.

A plan names, for one batch, the samples to read as :class:`SampleRef`\\ s: which dataset, which of its samples,
the data pass it belongs to and its number within that pass (the two seed the sample's random ops). Every plan is a
pure function of the batch's position in the epoch and of (shuffle seed, mode, ds_id, epoch), which is what keeps
resumed runs and ``num_process`` threads exact (see :class:`~fe_ray.pipeline.loader.Loader`).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

#: Tags the streams of an InterleaveDataset's datasets apart from the shuffle's, the random ops' and BatchDataset's.
_INTERLEAVE_TAG = 0x494C5643


class SampleRef(NamedTuple):
    """One sample of a planned batch."""

    #: The map-style dataset to read.
    dataset: Any
    #: The sample's index in ``dataset``.
    index: int
    #: The pass over the data the sample belongs to (seeds the sample's random ops).
    data_pass: int
    #: The sample's number, unique within its pass (seeds the sample's random ops).
    number: int
    #: For a dataset drawing its samples by position (``fe_keyed``): the key of its ``keyed_item``; else None.
    key: tuple[int, str, str, int, int] | None


def read(ref: SampleRef) -> Any:
    """The dataset item a :class:`SampleRef` names."""
    if ref.key is not None:
        return ref.dataset.keyed_item(ref.index, ref.key)
    return ref.dataset[ref.index]


def unwrap_extended(dataset: Any) -> tuple[Any, int | None]:
    """``(dataset read, spoof_length)`` of an ExtendDataset (``fe_extended``), else ``(dataset, None)``."""
    if getattr(dataset, "fe_extended", False):
        return dataset.dataset, int(dataset.spoof_length)
    return dataset, None


def interleaved(dataset: Any) -> Any:
    """The InterleaveDataset ``dataset`` is, or wraps in an ExtendDataset; None for any other dataset."""
    inner, _ = unwrap_extended(dataset)
    return inner if getattr(inner, "fe_interleaved", False) else None


def stream_refs(dataset: Any, start: int, stop: int, order: Callable[[int], np.ndarray],
                key: Callable[[int], tuple[int, str, str, int, int]] | None) -> list[SampleRef]:
    """Positions ``start .. stop`` of an epoch that reads ``dataset`` pass after pass (an ExtendDataset's epoch).

    Args:
        dataset: The dataset read.
        start: The first position (sample) of the epoch's stream.
        stop: One past the last position.
        order: The sample order of a data pass (a permutation, or ``arange`` without shuffling).
        key: For a keyed dataset, the ``keyed_item`` key of a data pass; None for a plain one.
    """
    size = len(dataset)
    refs = []
    for position in range(start, stop):
        data_pass, within = divmod(position, size)
        index = int(order(data_pass)[within])
        # The dataset index is unique within a pass: it numbers the sample as the plain Loader does.
        refs.append(SampleRef(dataset, index, data_pass, index, key(data_pass) if key is not None else None))
    return refs


def interleave_refs(interleave: Any, batch: int, batch_sizes: list[int], batches_per_pass: int,
                    identity: tuple[int, str, str, int], shuffle: bool) -> tuple[int, list[SampleRef]]:
    """The dataset and samples of batch ``batch`` of an epoch of an InterleaveDataset.

    Each of its datasets is read along a stream: the concatenation of permutations of the dataset (several for an
    ExtendDataset whose ``spoof_length`` exceeds its length), fresh for every data pass over the InterleaveDataset.

    Args:
        interleave: The InterleaveDataset.
        batch: The batch's index in the epoch (beyond one pass when ``steps_per_epoch`` asks for more).
        batch_sizes: The batch size of each of its datasets.
        batches_per_pass: Batches of one pass (``interleave.num_batches(batch_sizes)``).
        identity: (shuffle seed, mode, ds_id, epoch) of the epoch.
        shuffle: Whether the streams are permutations (else each dataset is read in order).

    Returns:
        ``(dataset index, refs)``.
    """
    data_pass, within = divmod(batch, batches_per_pass)
    child, start, size = interleave.locate(within, batch_sizes)
    dataset, _ = unwrap_extended(interleave.datasets[child])
    length = len(dataset)
    keyed = bool(getattr(dataset, "fe_keyed", False))
    seed, mode, ds_id, epoch = identity
    refs = []
    for position in range(start, start + size):
        cycle, offset = divmod(position, length)
        index = int(_child_permutation(identity, data_pass, child, cycle, length)[offset]) if shuffle else offset
        # Unique within the pass across all datasets: a stream position belongs to one dataset.
        number = position * len(interleave.datasets) + child
        key = (seed, mode, f"{ds_id}#{child}.{cycle}", epoch, data_pass) if keyed else None
        refs.append(SampleRef(dataset, index, data_pass, number, key))
    return child, refs


@functools.lru_cache(maxsize=64)
def _child_permutation(identity: tuple[int, str, str, int], data_pass: int, child: int, cycle: int,
                       size: int) -> np.ndarray:
    # Cached: consecutive batches of a dataset read the same permutation.
    seed, mode, ds_id, epoch = identity
    entropy = [_INTERLEAVE_TAG, int(seed), zlib.crc32(mode.encode()), zlib.crc32(ds_id.encode()), int(epoch),
               int(data_pass), int(child), int(cycle)]
    return np.random.default_rng(np.random.SeedSequence(entropy)).permutation(size)
