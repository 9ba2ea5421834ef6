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
from fe_ray.op.numpyop.randomness import sample_entropy
from fe_ray.pipeline.collation import owned_sample

#: Tags the replacement stream apart from the shuffle, the augmentation and the batched ops' entropy.
_REPLACE_TAG = 0x5245504C

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
