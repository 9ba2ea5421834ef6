"""The per-epoch batch loader of a Pipeline: index plan, per-sample ops, stacking and optional threaded prefetch."""

from __future__ import annotations

import contextlib
import functools
import warnings
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp, forward_numpyop, may_draw_globally
from fe_ray.op.numpyop.randomness import pass_entropy, sample_entropy, seeded_globals
from fe_ray.pipeline.batching import Stage, batch_entropy
from fe_ray.pipeline.checkpoint import dataset_state, holds_state
from fe_ray.pipeline.collation import collate
from fe_ray.pipeline.composite import SampleRef, interleave_refs, read, stream_refs, unwrap_extended
from fe_ray.pipeline.filtering import FilteringBatches
from fe_ray.types import FilteredData


def epoch_permutation(seed: int, mode: str, ds_id: str, epoch: int, data_pass: int, size: int) -> np.ndarray:
    """The sample order of one pass over a dataset: a pure function of its arguments.

    Being pure (rather than drawn from a long-lived RNG) is what makes resuming exact: a restored Pipeline recomputes
    the very order the interrupted run was walking, from the seed alone. ``mode`` and ``ds_id`` enter as CRC32
    hashes so that different datasets shuffle independently.
    """
    entropy = [int(seed), int(epoch), int(data_pass), zlib.crc32(mode.encode()), zlib.crc32(ds_id.encode())]
    return np.random.default_rng(np.random.SeedSequence(entropy)).permutation(size)


class Loader(FilteringBatches):
    """The batches of one (mode, epoch, ds_id): an iterable of ``{key: np.ndarray}`` dicts, and a context manager.

    Batch ``b`` of the epoch is a pure function of its index: it belongs to data pass ``b // batches_per_pass``
    (each pass a fresh permutation, see :func:`epoch_permutation`), so batches before ``start`` are skipped without
    loading or running ops on them. Iterating again continues after the last batch handed out. Random ops are part
    of that function too: each sample's draws are seeded by ``(seed, mode, ds_id, epoch, pass, sample index)`` and
    the op's position (see :mod:`fe_ray.op.numpyop.randomness`), never by the order in which samples are loaded.

    A dataset whose items are whole batches (``dataset.fe_batched``, e.g. :class:`~fe_ray.dataset.BatchDataset`)
    gives batch ``b`` as its ``batch_samples(b % len(dataset), (seed, mode, ds_id, epoch, pass))``: ``batch_size``
    and ``shuffle`` do not apply, and the dataset's own draws are seeded by the same position. A dataset whose items
    are random draws of their own (``dataset.fe_keyed``, e.g. :class:`~fe_ray.dataset.SiameseDirDataset`) gives
    sample ``i`` as its ``keyed_item(i, (seed, mode, ds_id, epoch, pass))``, for the same reason.

    An :class:`~fe_ray.dataset.ExtendDataset` (``dataset.fe_extended``) of a dataset of samples makes the epoch a
    stream of ``spoof_length`` samples: sample ``k`` is position ``k % len`` of pass ``k // len`` (a batch may span
    two passes, as in FastEstimator); of a batched or interleaved dataset, it makes the epoch ``spoof_length``
    batches. An :class:`~fe_ray.dataset.InterleaveDataset` (``dataset.fe_interleaved``) gives batch ``b`` from the
    dataset its pattern names, with that dataset's batch size and ops (``child_ops``), read along per-dataset
    streams of permutations seeded by the same position (see :mod:`fe_ray.pipeline.composite`).

    Batched ops (``batch_ops``, the ops after a :class:`~fe_ray.op.numpyop.Batch` op) run on each collated batch;
    random ones draw from generators seeded by the batch's index in the epoch (see
    :func:`fe_ray.pipeline.batching.batch_entropy`), so they are part of the same pure function.

    Filtering (an op returning :class:`~fe_ray.types.FilteredData`, e.g. :class:`~fe_ray.op.numpyop.RemoveIf`)
    keeps that purity. A sample filtered with ``replacement=True`` is replaced, in its place, by the first sample
    passing the ops from batch ``b``'s own stream of candidates (permutations of the dataset seeded by ``b``'s
    position, the first skipping the batch's samples; see :mod:`fe_ray.pipeline.filtering`), so batches keep their
    size and the epoch its steps; with ``replacement=False`` it is dropped and batch ``b`` comes out shorter. A batch
    the batched ops filter is made again from that stream's samples (``replacement=True``; its random batched ops
    draw anew) or skipped (``replacement=False``), as is a batch left with no sample. A dataset of whole batches
    (BatchDataset) loses the whole batch when one of its samples is filtered, as in FastEstimator, and its
    replacement is another of its batches. After two passes' worth of candidates in a row are all filtered the
    loader raises a ValueError naming the op. Unlike FastEstimator, replacements may repeat samples of the epoch
    (FastEstimator shifts the epoch's order instead), and ``replacement=False`` shortens batches rather than
    the epoch (whose batches FastEstimator keeps full).

    Ops that run user code (a LambdaOp's function, an op class of one's own, a ``collate_fn``) may draw from numpy's
    or Python's global generator instead: without worker threads, each of their batches is made with both seeded by
    the batch's index in the epoch and the caller's states restored after it (:meth:`globals_of`), so those draws
    are part of the same pure function too. Worker threads share the global generators, so there such draws follow
    the order in which the threads run.

    Args:
        dataset: The map-style dataset of this epoch.
        ops: The per-sample NumpyOps already filtered for mode, epoch and ds_id.
        batch_size: Samples per batch (ignored for a batched dataset).
        mode: The mode (passed to ops in their ``state`` and used to seed the shuffle).
        epoch: The epoch (1-based).
        ds_id: The dataset id.
        shuffle: Whether each pass is permuted.
        seed: The Pipeline's shuffle seed.
        drop_last: Drop the last, partial batch of each pass.
        steps_per_epoch: Batches in the epoch; None for one pass over the data.
        start: Index of the first batch to hand out (a resumed epoch).
        num_process: Worker threads preparing batches ahead, in order; 0 prepares them in the consuming thread (the
            only way in which user code's draws from the global generators are seeded by the batch's position).
            Ignored, with a warning, where an op keeps state (a non-empty ``state_dict``).
        on_batch: Called with the number of batches handed out so far, right before each batch is yielded.
        pad_value: Padding for samples of one key that differ in shape (see :func:`collate`).
        collate_fn: Makes a batch from the list of sample dicts instead of :func:`collate`.
        child_ops: For an InterleaveDataset, the ops of each of its datasets (None: ``ops`` for all of them).
        batch_ops: Ops run on each collated batch (``forward_batch``), after ``ops`` ran on its samples.
        child_stages: For an InterleaveDataset, the full recipe of each of its datasets (per-sample ops, batched ops,
            batch size -- None for the dataset's own or ``batch_size`` --, pad_value and collate_fn); replaces
            ``child_ops``.

    Raises:
        ValueError: If ``drop_last`` leaves no batch at all from the dataset, or a batch size is missing.
    """

    def __init__(self, dataset: Any, ops: list[NumpyOp], batch_size: int | None, mode: str, epoch: int, ds_id: str,
                 shuffle: bool, seed: int, drop_last: bool = False, steps_per_epoch: int | None = None,
                 start: int = 0, num_process: int = 0, on_batch: Callable[[int], None] | None = None,
                 pad_value: float | None = None,
                 collate_fn: Callable[[list[dict[str, Any]]], Mapping[str, Any]] | None = None,
                 child_ops: list[list[NumpyOp]] | None = None, batch_ops: list[NumpyOp] | None = None,
                 child_stages: list[Stage] | None = None) -> None:
        dataset, spoof = unwrap_extended(dataset)
        self.dataset = dataset
        self.ops = ops
        self.batch_ops = list(batch_ops or [])
        self._batched = bool(getattr(dataset, "fe_batched", False))
        self._interleave = dataset if getattr(dataset, "fe_interleaved", False) else None
        #: Samples handed out one at a time without a batch axis (no batch size anywhere), as FastEstimator does.
        self.unbatched = batch_size is None and not self._batched and self._interleave is None
        if self.unbatched:
            batch_size = 1  # planned as batches of one sample, which collation leaves unstacked
        self.batch_size = batch_size
        self.mode, self.epoch, self.ds_id = mode, epoch, ds_id
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.size = len(dataset)
        self._keyed = bool(getattr(dataset, "fe_keyed", False))
        # An ExtendDataset of samples, or an epoch of steps_per_epoch batches longer than one pass: the epoch is a
        # stream of samples across passes, cut into full batches (FastEstimator's endless sampler: a batch runs on
        # into the next pass, and drop_last does not apply), not passes that each end with a short batch.
        beyond_a_pass = steps_per_epoch is not None and batch_size is not None and \
            steps_per_epoch * batch_size > self.size
        self._stream = (spoof is not None or beyond_a_pass) and not self._batched and self._interleave is None
        where = f"mode {mode!r}" + (f", ds_id {ds_id!r}" if ds_id else "")
        self._main = Stage(ops, self.batch_ops, batch_size, drop_last, pad_value, collate_fn)
        if self._interleave is not None:
            if child_stages is None:
                count = len(self._interleave.datasets)
                child_stages = [self._main._replace(ops=child, batch_size=None)
                                for child in (child_ops if child_ops is not None else [ops] * count)]
            self.child_stages = list(child_stages)
            self.child_ops = [stage.ops for stage in self.child_stages]
            defaults = self._interleave.resolve_batch_sizes(batch_size) \
                if any(stage.batch_size is None for stage in self.child_stages) else []
            self._sizes = [stage.batch_size if stage.batch_size is not None else defaults[child]
                           for child, stage in enumerate(self.child_stages)]
            self.batches_per_pass = self._interleave.num_batches(self._sizes)
        elif self._batched:
            self.batches_per_pass = self.size
        elif self._stream:
            samples = int(spoof) if steps_per_epoch is None else steps_per_epoch * batch_size  # type: ignore[arg-type]
            if drop_last and steps_per_epoch is None:
                samples -= samples % batch_size
            self._stream_samples = samples
            self.batches_per_pass = -(-samples // batch_size)
        else:
            self.batches_per_pass = self.size // batch_size if drop_last else -(-self.size // batch_size)
        if self.batches_per_pass == 0:
            raise ValueError(f"drop_last=True with batch_size {batch_size} leaves no batch from the {self.size} "
                             f"samples of {where}.")
        if steps_per_epoch is not None:
            self.num_batches = steps_per_epoch
        elif spoof is not None and not self._stream:
            self.num_batches = spoof  # an ExtendDataset of batches: spoof_length batches
        else:
            self.num_batches = self.batches_per_pass
        self.start = min(start, self.num_batches)
        self.num_process = num_process
        self.on_batch = on_batch
        self.pad_value = pad_value
        self.collate_fn = collate_fn
        self._cursor = self.start
        self._perm_cache: tuple[int, np.ndarray] | None = None
        # Whole-batch fancy indexing is only equivalent to per-sample loading when no op has to see single samples
        # (ops on whole batches, after a Batch op, still run on it).
        self._fast = not ops and collate_fn is None and hasattr(dataset, "get_batch") and not self._batched \
            and not self._keyed and self._interleave is None and not getattr(dataset, "ragged", False) \
            and not self.unbatched
        # Per-sample entropy is only worth deriving when some op will draw from it.
        self._random = any(op.is_random for op in self.all_ops)
        every_op = (*self.all_ops, *self.all_batch_ops)
        # Only batches made by user code pay for seeding and restoring the global generators (~0.1 ms a batch).
        self._user_code = any(map(may_draw_globally, every_op)) \
            or any(stage.collate_fn is not None for stage in self._stages())
        self._stateful_ops = any(holds_state(op.state_dict()) for op in every_op)  # no worker threads for these
        #: Whether making a batch reads and changes nothing but the loader's position: no op and not the dataset
        #: keeps state. Only then is a batch made ahead of its turn (a distributed Network's lookahead) the batch
        #: its turn would make, and what a checkpoint saves unchanged by it.
        self.pure = not self._stateful_ops and not holds_state(dataset_state(dataset))
        self._iterators: list[Iterator[dict[str, np.ndarray]]] = []

    @property
    def all_ops(self) -> list[NumpyOp]:
        """Every per-sample op this loader may run (an InterleaveDataset's datasets' ops together), each once, in
        order."""
        return self._distinct([stage.ops for stage in self._stages()])

    @property
    def all_batch_ops(self) -> list[NumpyOp]:
        """Every batched op this loader may run, each once, in order."""
        return self._distinct([stage.batch_ops for stage in self._stages()])

    def _stages(self) -> list[Stage]:
        return [self._main] if self._interleave is None else self.child_stages

    @staticmethod
    def _distinct(lists: list[list[NumpyOp]]) -> list[NumpyOp]:
        seen: dict[int, NumpyOp] = {}
        for ops in lists:
            for op in ops:
                seen.setdefault(id(op), op)
        return list(seen.values())

    def __len__(self) -> int:
        """The number of batches in this epoch (including any skipped because the epoch was resumed)."""
        return self.num_batches

    @property
    def remaining(self) -> int:
        """How many batches iterating will still hand out."""
        return self.num_batches - self._cursor

    def batch_indices(self, index: int) -> np.ndarray:
        """The dataset indices of batch ``index`` of the epoch (for an InterleaveDataset: of the dataset it reads)."""
        if self._stream or self._interleave is not None:
            return np.array([ref.index for ref in self._refs(index)[2]], dtype=np.int64)
        data_pass, within = divmod(index, self.batches_per_pass)
        if self._batched:
            return np.array([within])  # the dataset's own batch ``within``; its draws are seeded by the pass
        return self._order(data_pass)[within * self.batch_size:(within + 1) * self.batch_size]

    def _order(self, data_pass: int) -> np.ndarray:
        """The sample order of pass ``data_pass`` (cached: consecutive batches read the same pass)."""
        if self._perm_cache is None or self._perm_cache[0] != data_pass:
            order = (epoch_permutation(self.seed, self.mode, self.ds_id, self.epoch, data_pass, self.size)
                     if self.shuffle else np.arange(self.size))
            self._perm_cache = (data_pass, order)
        return self._perm_cache[1]

    def _refs(self, index: int) -> tuple[Stage, str, list[SampleRef]]:
        """The stage, ds_id (for the ops' state) and samples of batch ``index`` of a stream-read dataset."""
        if self._interleave is not None:
            child, refs = interleave_refs(self._interleave, index, self._sizes, self.batches_per_pass,
                                          (self.seed, self.mode, self.ds_id, self.epoch), self.shuffle)
            tag = self._interleave.tags[child]
            return self.child_stages[child], tag if tag is not None else self.ds_id, refs
        start = index * self.batch_size  # type: ignore[operator]
        stop = min(start + self.batch_size, self._stream_samples)  # type: ignore[operator]
        key = (lambda data_pass: (self.seed, self.mode, self.ds_id, self.epoch, data_pass)) if self._keyed else None
        return self._main, self.ds_id, stream_refs(self.dataset, start, stop, self._order, key)

    def stage(self, index: int) -> Stage:
        """The recipe of batch ``index``: its per-sample ops, collation and batched ops."""
        return self._refs(index)[0] if self._interleave is not None else self._main

    def sample_plan(self, index: int) -> tuple[list[NumpyOp], str, list[tuple[int, int, Any]]]:
        """What batch ``index`` is made of: its per-sample ops, the ds_id their state names, and per sample ``(data
        pass, sample number, dataset item)`` (the pass and number seed the sample's random ops)."""
        if self._stream or self._interleave is not None:
            stage, ds_id, refs = self._refs(index)
            return stage.ops, ds_id, [(ref.data_pass, ref.number, read(ref)) for ref in refs]
        data_pass = index // self.batches_per_pass
        return self.ops, self.ds_id, [(data_pass, number, item) for number, item in
                                      self.numbered_items(self.batch_indices(index), data_pass)]

    def numbered_items(self, indices: np.ndarray, data_pass: int) -> list[tuple[int, Any]]:
        """The (sample number, dataset item) pairs of a batch; the number seeds the sample's random ops.

        Args:
            indices: :meth:`batch_indices` of the batch.
            data_pass: The pass over the dataset the batch belongs to.
        """
        if self._batched:
            within = int(indices[0])
            items = self.dataset.batch_samples(within, (self.seed, self.mode, self.ds_id, self.epoch, data_pass))
            # Unique within the pass, as a batched dataset's batches have equal sizes.
            return [(within * len(items) + j, item) for j, item in enumerate(items)]
        if self._keyed:
            key = (self.seed, self.mode, self.ds_id, self.epoch, data_pass)
            return [(int(index), self.dataset.keyed_item(int(index), key)) for index in indices]
        return [(int(index), self.dataset[int(index)]) for index in indices]

    def make_batch(self, indices: np.ndarray, data_pass: int = 0,
                   batch_index: int | None = None) -> dict[str, np.ndarray] | None:
        """Load the samples at ``indices``, run the ops on each, stack them, and run the batched ops on the batch.

        Args:
            indices: Dataset indices of the batch's samples.
            data_pass: The pass over the dataset the batch belongs to; it seeds random ops, so that a sample seen
                twice in one epoch (``steps_per_epoch`` beyond one pass) is augmented differently each time.
            batch_index: The batch's index in the epoch, which seeds random batched ops and the replacements of
                filtered samples; None: they draw anew (as in :meth:`Pipeline.transform`).

        Returns:
            The batch, or None where ops filtered it away (see the class docstring).
        """
        if self._batched:
            return self._dataset_batch(int(indices[0]), data_pass, batch_index)
        key = (self.seed, self.mode, self.ds_id, self.epoch, data_pass) if self._keyed else None
        reader = self._reader(key)
        if self._fast:
            return self._finished(self.dataset.get_batch(indices), self._main, self.ds_id, batch_index, len(indices),
                                  reader, self.size, indices)
        prefix = pass_entropy(self.seed, self.mode, self.ds_id, self.epoch, data_pass) if self._random else None
        entries = [(index, item, sample_entropy(prefix, index) if prefix is not None else None)
                   for index, item in self.numbered_items(indices, data_pass)]
        return self._assemble(self._main, self.ds_id, batch_index, entries, reader, self.size, indices)

    def _reader(self, key: tuple[int, str, str, int, int] | None) -> Callable[[int], Any]:
        """Dataset index -> item, for the replacements of filtered samples (a keyed dataset's items of ``key``)."""
        if key is not None:
            return functools.partial(self.dataset.keyed_item, key=key)
        return self.dataset.__getitem__

    def _make_from_refs(self, stage: Stage, ds_id: str, refs: list[SampleRef],
                        index: int) -> dict[str, np.ndarray] | None:
        """Load planned samples (maybe of several passes), run the stage's ops on each, stack them and finish."""
        first = refs[0]
        reader: Callable[[int], Any] = lambda position: read(first._replace(index=position))  # noqa: E731
        size, indices = len(first.dataset), [ref.index for ref in refs]
        if self._fast:
            batch = self.dataset.get_batch(np.array(indices, dtype=np.int64))
            return self._finished(batch, stage, ds_id, index, len(refs), reader, size, indices)
        random = any(op.is_random for op in stage.ops)
        prefixes: dict[int, tuple[int, ...]] = {}
        entries = []
        for ref in refs:
            entropy = None
            if random:
                if ref.data_pass not in prefixes:
                    prefixes[ref.data_pass] = pass_entropy(self.seed, self.mode, self.ds_id, self.epoch,
                                                           ref.data_pass)
                entropy = sample_entropy(prefixes[ref.data_pass], ref.number)
            entries.append((ref.index, read(ref), entropy))
        return self._assemble(stage, ds_id, index, entries, reader, size, indices)

    def globals_of(self, index: int) -> contextlib.AbstractContextManager[None]:
        """The context in which batch ``index`` is made: where its ops run user code, numpy's and Python's global
        generators seeded by the batch's position (:func:`~fe_ray.op.numpyop.randomness.seeded_globals`);
        otherwise none."""
        if not self._user_code:
            return contextlib.nullcontext()
        return seeded_globals(batch_entropy(self.seed, self.mode, self.ds_id, self.epoch, index))

    def _job(self, index: int) -> Callable[[], dict[str, np.ndarray] | None]:
        """Batch ``index`` as a call to make in any thread; planned here, in the consuming thread."""
        if self._stream or self._interleave is not None:
            return functools.partial(self._make_from_refs, *self._refs(index), index)
        return functools.partial(self.make_batch, self.batch_indices(index), index // self.batches_per_pass, index)

    def collate_samples(self, samples: list[dict[str, Any]], stage: Stage) -> dict[str, np.ndarray]:
        """Make one batch of ``samples`` with the stage's ``collate_fn``, else by stacking (padded by its
        ``pad_value``); unbatched, the one sample with its values as arrays.

        Raises:
            TypeError: If the ``collate_fn`` returns something other than a dict.
        """
        if self.unbatched and stage.collate_fn is None:
            return {key: np.asarray(value) for key, value in samples[0].items()}
        return self.stack_samples(samples, stage)

    @staticmethod
    def stack_samples(samples: list[dict[str, Any]], stage: Stage) -> dict[str, np.ndarray]:
        """:meth:`collate_samples` of a batched loader.

        Raises:
            TypeError: If the ``collate_fn`` returns something other than a dict.
        """
        if stage.collate_fn is None:
            return collate(samples, stage.pad_value)
        batch = stage.collate_fn(samples)
        if not isinstance(batch, Mapping):
            raise TypeError(f"Pipeline collate_fn returned a {type(batch).__name__}; it must return one dict of "
                            "batched values, {key: array with a leading batch axis}.")
        return dict(batch)

    def finish(self, batch: dict[str, Any], stage: Stage, ds_id: str, index: int | None, attempt: int = 0,
               filtered_by: list[NumpyOp] | None = None) -> dict[str, Any] | FilteredData:
        """Run the stage's batched ops on the collated batch ``index`` (in place) and return it, or the
        :class:`~fe_ray.types.FilteredData` an op returned to drop it.

        Random batched ops draw from generators seeded by the batch's index in the epoch (and ``attempt``, the
        number of batches made in its place before, filtered), so that a batch is the same after a resume and in
        any worker thread; with ``index`` None they draw anew.
        """
        if not stage.batch_ops:
            return batch
        entropy = None
        if index is not None and any(op.is_random for op in stage.batch_ops):
            entropy = batch_entropy(self.seed, self.mode, self.ds_id, self.epoch, index)
            if attempt:
                entropy = (*entropy, attempt)
        verdict = forward_numpyop(stage.batch_ops, batch, {"mode": self.mode, "epoch": self.epoch, "ds_id": ds_id},
                                  batched=True, entropy=entropy, filtered_by=filtered_by)
        return batch if verdict is None else verdict

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        threaded = self.num_process > 0
        if threaded and self._stateful_ops:
            # Worker threads would run the stateful ops concurrently and ahead of the consumer: their state would
            # depend on the threads' timing and a checkpoint would count batches not yet handed out. (A dataset
            # read by threads guards itself, as GeneratorDataset does with its lock.)
            warnings.warn("Pipeline num_process is ignored where an op keeps state (a non-empty state_dict): those "
                          "batches are made one at a time in the consuming thread, so the op's state and the "
                          "checkpoints are exact. Pipelines without stateful ops use the worker threads.",
                          UserWarning, stacklevel=2)
            threaded = False
        iterator = self._threaded() if threaded else self._serial()
        self._iterators.append(iterator)
        return iterator

    def _handed_out(self) -> None:
        self._cursor += 1
        if self.on_batch is not None:
            self.on_batch(self._cursor)

    def _skipped(self) -> None:
        # A batch filtered away is passed over without a report of its own (a report stands for a batch handed
        # out, see lookahead.py); the next batch's report counts it. Only the epoch's last batches have no next
        # one: the end of the epoch is reported instead.
        self._cursor += 1
        if self._cursor == self.num_batches and self.on_batch is not None:
            self.on_batch(self._cursor)

    def _serial(self) -> Iterator[dict[str, np.ndarray]]:
        while self._cursor < self.num_batches:
            with self.globals_of(self._cursor):
                batch = self._job(self._cursor)()
            if batch is None:
                self._skipped()
                continue
            self._handed_out()
            yield batch

    def _threaded(self) -> Iterator[dict[str, np.ndarray]]:
        # Indices are planned here in the consuming thread and futures are awaited in submission order, so the
        # batches come out in exactly the serial order whatever the number of workers.
        pending: deque[Future[dict[str, np.ndarray] | None]] = deque()
        next_index = self._cursor
        executor = ThreadPoolExecutor(max_workers=self.num_process, thread_name_prefix="fe_ray-pipeline")
        try:
            while self._cursor < self.num_batches:
                while next_index < self.num_batches and len(pending) < 2 * self.num_process:
                    pending.append(executor.submit(self._job(next_index)))
                    next_index += 1
                batch = pending.popleft().result()
                if batch is None:
                    self._skipped()
                    continue
                self._handed_out()
                yield batch
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Stop any iteration in progress and release its worker threads."""
        for iterator in self._iterators:
            iterator.close()  # type: ignore[attr-defined]
        self._iterators.clear()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Loader(mode={self.mode!r}, epoch={self.epoch}, ds_id={self.ds_id!r}, batches={self.num_batches}, "
                f"start={self.start}, batch_size={self.batch_size})")
