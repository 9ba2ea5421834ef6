"""Replacing the samples (and batches) that ops filter out (:class:`~fe_ray.types.FilteredData`), purely.

FastEstimator replaces a filtered sample by the next sample of the epoch's order, which shifts every later batch:
batch ``b`` then depends on how many samples the batches before it filtered. fe_ray keeps batch ``b`` a pure
function of its position instead (see :class:`~fe_ray.pipeline.loader.Loader`): the replacements of batch ``b``
are drawn from a stream of candidates seeded by ``b``'s position alone -- permutations of the dataset, the first
skipping the samples the batch already holds -- so a resumed epoch and worker threads make the same batches.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Iterator
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp, forward_numpyop
from fe_ray.op.numpyop.randomness import pass_entropy, sample_entropy
from fe_ray.pipeline.batching import Stage, describe
from fe_ray.pipeline.collation import owned_sample
from fe_ray.types import FilteredData

#: Tags the replacement stream apart from the shuffle, the augmentation and the batched ops' entropy.
_REPLACE_TAG = 0x5245504C

#: At least this many batches are tried in a row to replace a filtered batch before giving up (more for a large
#: dataset: two passes' worth of batches).
_MIN_BATCH_ATTEMPTS = 100

#: Candidates drawn in a row, all filtered, before giving up, per sample of the dataset read: two rounds of
#: permutations hold every sample of the dataset at least once, even with the batch's own samples skipped in the
#: first round.
_ROUNDS = 2


def replacement_entropy(seed: int, mode: str, ds_id: str, epoch: int, index: int | None) -> tuple[int, ...]:
    """The entropy of batch ``index``'s replacement stream (its candidates' order and their random ops).

    Args:
        seed: The Pipeline's shuffle seed.
        mode: The mode.
        ds_id: The dataset id.
        epoch: The epoch.
        index: The batch's index in the epoch; None (a batch made outside an epoch): fresh OS entropy.
    """
    if index is None:
        return (_REPLACE_TAG, *(int(word) for word in np.random.SeedSequence().generate_state(4)))
    return (_REPLACE_TAG, int(seed), zlib.crc32(mode.encode()), zlib.crc32(ds_id.encode()), int(epoch), int(index))


def candidate_indices(size: int, entropy: tuple[int, ...], exclude: Collection[int]) -> Iterator[int]:
    """Dataset indices to draw replacements from, endlessly: round ``r`` is a permutation of ``range(size)`` seeded
    by ``entropy`` and ``r``; round 0 skips ``exclude`` (the batch's own samples), later rounds repeat samples.

    Raises:
        ValueError: If ``size`` is not positive.
    """
    if size < 1:
        raise ValueError(f"Cannot draw replacement samples from an empty dataset (size {size}).")
    skip = {int(index) for index in exclude}
    round_number = 0
    while True:
        order = np.random.default_rng(np.random.SeedSequence([*entropy, round_number])).permutation(size)
        for index in order:
            if round_number == 0 and int(index) in skip:
                continue
            yield int(index)
        round_number += 1


def filtered_everything(op: NumpyOp | None, drawn: int, what: str, where: str, unit: str = "samples") -> ValueError:
    """The error of a replacement stream that found nothing passing the ops after ``drawn`` draws of ``unit``."""
    name = type(op).__name__ if op is not None else "An op"
    return ValueError(f"{name} filtered out all of the {drawn} {unit} drawn in a row to replace the filtered "
                      f"{what} ({where}): every sample of the dataset seems to be filtered, so no batch can be made. "
                      f"Loosen {name}'s condition (RemoveIf fn), or give it replacement=False to shorten the batches "
                      "instead, or check that its inputs are the keys you mean.")


class Refill:
    """The replacement samples of one batch: candidates run through the batch's per-sample ops, filtered ones
    skipped, in an order that depends on the batch's position only.

    Args:
        ops: The per-sample ops.
        state: The ops' state (``mode``, ``epoch``, ``ds_id``).
        read: Dataset index -> dataset item.
        size: The number of samples ``read`` accepts.
        entropy: The batch's :func:`replacement_entropy`.
        exclude: The batch's own dataset indices (not drawn again before every other sample was).
        random: Whether to give each candidate's random ops a generator seeded by the candidate's draw number.
        where: The context, for the error message.
    """

    def __init__(self, ops: list[NumpyOp], state: dict[str, Any], read: Callable[[int], Any], size: int,
                 entropy: tuple[int, ...], exclude: Collection[int], random: bool, where: str) -> None:
        self.ops, self.state, self.read, self.size = ops, state, read, size
        self.entropy, self.random, self.where = entropy, random, where
        self._candidates = candidate_indices(size, entropy, exclude)
        self._drawn = 0
        self.limit = _ROUNDS * size

    def sample(self, what: str = "sample") -> dict[str, Any]:
        """The next candidate that passes the ops, with the ops applied.

        Args:
            what: What is being replaced, for the error message.

        Raises:
            ValueError: If ``limit`` candidates in a row were all filtered, naming the op that filtered the last.
        """
        misses = 0
        filtered_by: list[NumpyOp] = []
        while True:
            index = next(self._candidates)
            number = self._drawn
            self._drawn += 1
            sample = owned_sample(self.read(index), f"Dataset item {index}")
            entropy = sample_entropy(self.entropy, number) if self.random else None
            if forward_numpyop(self.ops, sample, self.state, entropy=entropy, filtered_by=filtered_by) is None:
                return sample
            misses += 1
            if misses >= self.limit:
                raise filtered_everything(filtered_by[-1] if filtered_by else None, misses, what, self.where)


class FilteringBatches:
    """The part of :class:`~fe_ray.pipeline.loader.Loader` that runs a batch's ops and replaces or drops what they
    filter (see the Loader's docstring). The Loader supplies the attributes declared here and the methods
    ``collate_samples`` and ``finish``."""

    mode: str
    epoch: int
    ds_id: str
    seed: int
    size: int
    dataset: Any
    ops: list[NumpyOp]
    _main: Stage
    _random: bool

    def _assemble(self, stage: Stage, ds_id: str, index: int | None,
                  entries: list[tuple[int, Any, tuple[int, ...] | None]], reader: Callable[[int], Any], size: int,
                  indices: Any) -> dict[str, np.ndarray] | None:
        """Run the stage's ops on each planned ``(dataset index, item, entropy)``, replace or drop the filtered
        samples, collate and finish; None where no sample is left."""
        state = {"mode": self.mode, "epoch": self.epoch, "ds_id": ds_id}
        refills: list[Refill] = []
        samples = []
        for position, item, entropy in entries:
            sample = owned_sample(item, f"Dataset item {position}")
            verdict = forward_numpyop(stage.ops, sample, state, entropy=entropy)
            if verdict is None:
                samples.append(sample)
            elif verdict.replacement:
                samples.append(self._refill(refills, stage, state, index, reader, size, indices).sample())
        if not samples:
            return None  # every sample dropped without replacement: the batch is skipped
        return self._finished(self.collate_samples(samples, stage), stage, ds_id, index, len(samples), reader, size,
                              indices, refills)

    def _refill(self, refills: list[Refill], stage: Stage, state: dict[str, Any], index: int | None,
                reader: Callable[[int], Any], size: int, indices: Any) -> Refill:
        """The batch's replacement stream, made on first use and kept in ``refills``."""
        if not refills:
            entropy = replacement_entropy(self.seed, self.mode, self.ds_id, self.epoch, index)
            refills.append(Refill(stage.ops, state, reader, size, entropy, [int(i) for i in indices],
                                  any(op.is_random for op in stage.ops), self._where(index)))
        return refills[0]

    def _where(self, index: int | None) -> str:
        return describe(self.mode, self.epoch, self.ds_id) + (f", batch {index}" if index is not None else "")

    def _finished(self, batch: dict[str, Any], stage: Stage, ds_id: str, index: int | None, count: int,
                  reader: Callable[[int], Any], size: int, indices: Any,
                  refills: list[Refill] | None = None) -> dict[str, Any] | None:
        """Run the batched ops on ``batch``; a batch they filter is made again from ``count`` replacement samples
        until one passes (``replacement=True``), or skipped (None)."""
        refills = [] if refills is None else refills
        state = {"mode": self.mode, "epoch": self.epoch, "ds_id": ds_id}
        filtered_by: list[NumpyOp] = []
        limit = max(_MIN_BATCH_ATTEMPTS, 2 * -(-size // count))
        attempt = 0
        while True:
            result = self.finish(batch, stage, ds_id, index, attempt, filtered_by)
            if not isinstance(result, FilteredData):
                return result
            if not result.replacement:
                return None
            attempt += 1
            if attempt >= limit:
                raise filtered_everything(filtered_by[-1], attempt, "batch", self._where(index), "batches")
            refill = self._refill(refills, stage, state, index, reader, size, indices)
            batch = self.collate_samples([refill.sample("batch") for _ in range(count)], stage)

    def _dataset_batch(self, within: int, data_pass: int, index: int | None) -> dict[str, np.ndarray] | None:
        """Batch ``within`` of a dataset of whole batches; if an op filters one of its samples or the batch, another
        of its batches from the batch's replacement stream (``replacement=True``), or None."""
        key = (self.seed, self.mode, self.ds_id, self.epoch, data_pass)
        state = {"mode": self.mode, "epoch": self.epoch, "ds_id": self.ds_id}
        prefix = pass_entropy(self.seed, self.mode, self.ds_id, self.epoch, data_pass) if self._random else None
        replacement = replacement_entropy(self.seed, self.mode, self.ds_id, self.epoch, index)
        candidates: Iterator[int] | None = None
        filtered_by: list[NumpyOp] = []
        limit = max(_MIN_BATCH_ATTEMPTS, 2 * self.size)
        attempt, chosen = 0, within
        while True:
            items = self.dataset.batch_samples(chosen, key)
            if attempt:
                # A replacement's samples draw apart from the same batch's own appearance in the epoch.
                prefix = (*replacement, attempt) if self._random else None
            verdict = None
            samples = []
            for number, item in enumerate(items):
                sample = owned_sample(item, f"Dataset item {number} of batch {chosen}")
                # Numbered as numbered_items does: unique within the pass, as a batched dataset's batches have equal
                # sizes.
                entropy = sample_entropy(prefix, (0 if attempt else chosen * len(items)) + number) \
                    if prefix is not None else None
                verdict = forward_numpyop(self.ops, sample, state, entropy=entropy, filtered_by=filtered_by)
                if verdict is not None:
                    break  # as FastEstimator, one filtered sample filters its whole batch
                samples.append(sample)
            if verdict is None:
                verdict = self.finish(self.collate_samples(samples, self._main), self._main, self.ds_id, index,
                                      attempt, filtered_by)
                if not isinstance(verdict, FilteredData):
                    return verdict
            if not verdict.replacement:
                return None
            attempt += 1
            if attempt >= limit:
                raise filtered_everything(filtered_by[-1], attempt, "batch", self._where(index), "batches")
            if candidates is None:
                candidates = candidate_indices(self.size, replacement, [within])
            chosen = next(candidates)
