"""Random numbers for random NumpyOps: a generator per (sample, op) that is a pure function of where the sample is.

A Pipeline promises that a run resumed from a checkpoint continues exactly as the uninterrupted run would, and that
``num_process`` worker threads give the batches serial loading gives. Ops drawing from one shared generator in call
order would break both promises: threads interleave their draws, and a resumed run skips the draws of the batches it
does not reload. So the Loader derives, for every sample, entropy from ``(shuffle seed, mode, ds_id, epoch, data
pass, index of the sample in the dataset)``; each random op (``is_random = True``) at position ``p`` of the op list
then gets ``state["rng"]``, a fresh :class:`numpy.random.Generator` seeded by that entropy and ``p``. Random ops read
it with :func:`get_rng`.

Outside a Pipeline epoch (``Pipeline.transform``, a Network pop, a direct ``op.forward(data, {})``) there is no
sample position to derive from, so :func:`get_rng` falls back to a generator seeded from numpy's global generator:
each call draws anew, as FastEstimator's ops do, and ``fe.enable_deterministic`` (which seeds numpy) makes the
sequence repeat across runs.

User code in a Pipeline (a LambdaOp's function, an op class of one's own) often draws from numpy's or Python's
global generator instead, as FastEstimator's apphub does (``LambdaOp(fn=lambda: np.random.normal(size=[100]),
outputs="z")``). Those draws would follow the order in which batches are made: a distributed Network makes the next
batch while the replicas compute the current one, so a checkpoint would hold global states that already include
the next batch's draws, and a resumed run would draw that batch anew from them. So the Loader makes such a batch
inside :func:`seeded_globals`: both global generators are seeded by the batch's position while it is made, and the
caller's states are put back after it.
"""

from __future__ import annotations

import contextlib
import random
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

RNG_KEY = "rng"
"""The ``state`` key under which a random op finds its per-sample generator."""

# Tags the augmentation stream, so it never coincides with the shuffle's (see loader.epoch_permutation), which is
# seeded by the same shuffle seed, epoch and pass.
_AUGMENT_TAG = 0x41554731

_INT64_MAX = np.iinfo(np.int64).max

# Tags the global generators' seeds, so they never coincide with a per-op generator's.
_GLOBALS_TAG = 0x474C4F42


def pass_entropy(seed: int, mode: str, ds_id: str, epoch: int, data_pass: int) -> tuple[int, ...]:
    """The entropy shared by every sample of one pass over a dataset; :func:`sample_entropy` adds the sample.

    Computed once per batch (the CRC32s of ``mode`` and ``ds_id`` are not worth redoing per sample).
    """
    return (_AUGMENT_TAG, int(seed), zlib.crc32(mode.encode()), zlib.crc32(ds_id.encode()), int(epoch),
            int(data_pass))


def sample_entropy(prefix: Sequence[int], index: int) -> tuple[int, ...]:
    """The entropy of the sample at dataset ``index`` within the pass described by ``prefix``."""
    return (*prefix, int(index))


def op_generator(entropy: Sequence[int], position: int) -> np.random.Generator:
    """The generator of the random op at ``position`` of the op list, for the sample with ``entropy``.

    Keyed by the op's position (not by how many draws earlier ops made), so that changing one op, for example the
    ``prob`` of a Sometimes, leaves the draws of every other op unchanged.
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([*entropy, int(position)])))


def get_rng(state: Mapping[str, Any]) -> np.random.Generator:
    """The generator a random op draws from: the Pipeline's per-sample one, else a fallback (see the module doc).

    Meta ops (Sometimes, OneOf) hand their own ``state`` to the op they run, so a wrapped random op continues the
    same per-sample stream after the meta op's own draw.

    Raises:
        TypeError: If ``state["rng"]`` holds something other than a numpy Generator.
    """
    rng = state.get(RNG_KEY)
    if rng is None:
        # One draw from numpy's global generator (seeded by fe.enable_deterministic) seeds a private Generator, so the
        # op can use the Generator API either way and repeated calls still give new numbers.
        return np.random.default_rng(int(np.random.randint(0, _INT64_MAX, dtype=np.int64)))
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"state[{RNG_KEY!r}] must be a numpy.random.Generator (the Pipeline puts one there for random "
                        f"ops), got {type(rng).__name__}; leave the key out to draw from numpy's global generator.")
    return rng


@contextlib.contextmanager
def seeded_globals(entropy: Sequence[int]) -> Iterator[None]:
    """Run the block with numpy's and Python's global generators seeded by ``entropy``; then restore the caller's.

    What user code draws from ``np.random.*`` or ``random.*`` inside the block is then a pure function of
    ``entropy`` (a batch's position), and the caller's streams (the network's pops, the traces, the states a
    checkpoint saves) go on as if the block had drawn nothing. Saving and restoring the two states costs ~0.1 ms,
    which is why the Loader uses this only around batches whose ops run user code.
    """
    numpy_state, python_state = np.random.get_state(), random.getstate()
    seed = np.random.SeedSequence([_GLOBALS_TAG, *entropy]).generate_state(4)
    np.random.seed(seed)
    random.seed(int.from_bytes(seed.tobytes(), "little"))
    try:
        yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
