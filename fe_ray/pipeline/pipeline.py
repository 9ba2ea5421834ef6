"""The Pipeline: datasets per mode, per-sample NumpyOps, batching, seeded shuffling and a resumable position."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_tensor
from fe_ray.backend.determinism import last_seed
from fe_ray.op.numpyop.numpyop import NumpyOp, check_collation, check_numpy_ops, forward_numpyop
from fe_ray.pipeline.batching import (
    OpSplit,
    Stage,
    check_batch_ops,
    describe,
    make_stage,
    op_batch_size,
    self_batching,
    split_ops,
)
from fe_ray.pipeline.benchmark import benchmark as run_benchmark
from fe_ray.pipeline.checkpoint import (
    dataset_restores,
    dataset_states,
    framework_loader,
    parse_positions,
    restore_datasets,
)
from fe_ray.pipeline.collation import owned_sample
from fe_ray.pipeline.composite import interleaved
from fe_ray.pipeline.framework_data import FrameworkLoader, framework_kind, warn_inexact
from fe_ray.pipeline.loader import Loader
from fe_ray.pipeline.validation import check_batch_sizes, check_framework_options, normalize_data
from fe_ray.schedule import Scheduler, get_current_items
from fe_ray.types import FilteredData
from fe_ray.util import check_count, check_epoch, check_mode, to_list

TARGET_TYPES = ("np", "torch", "tf")


class Pipeline:
    """Feeds numpy batches to the Estimator: ``with pipeline(mode, epoch) as loader: for batch in loader: ...``.

    Args:
        train_data: Training data: a map-style dataset (``__len__`` and ``__getitem__(i) -> dict``, e.g.
            :class:`~fe_ray.dataset.NumpyDataset`), a ``{ds_id: dataset}`` dict, or a Scheduler of datasets (an epoch
            scheduled to None has no data). Dict values may be Schedulers too. A torch ``DataLoader`` or a
            ``tf.data.Dataset`` of dict batches is taken as it is, as in FastEstimator: it batches itself, no ops
            run on it, ``batch_size`` / ``shuffle`` / ``num_process`` do not apply, and an epoch is one fresh pass
            over it (cut short by ``steps_per_epoch``; see :mod:`fe_ray.pipeline.framework_data`).
        eval_data: Evaluation data, same forms.
        test_data: Test data, same forms.
        batch_size: Samples per batch: an int, a Scheduler of ints, or a ``{mode: int or Scheduler}`` dict. None
            (or a Scheduler's None) hands out the samples one at a time, without a batch axis, as FastEstimator
            does (e.g. to look at one sample with :meth:`get_results`); a ``Batch(batch_size=...)`` op that runs
            sets the size where it runs. A BatchDataset, and an InterleaveDataset given
            per-dataset sizes with ``set_batch_sizes``, size their own batches (an InterleaveDataset without them
            uses this size for each of its datasets).
        ops: NumpyOps (or Schedulers of them), run in order on each sample; ``mode`` and ``ds_id`` of an op select
            where it runs (on the batches of an InterleaveDataset built from a dict, its dataset names serve as the
            ds_ids, as in FastEstimator). A :class:`~fe_ray.op.numpyop.Batch` op among them (at most one per mode,
            epoch and ds_id) ends the per-sample ops: the ops after it run on each collated batch
            (``forward_batch``), and its ``batch_size`` (ignored by a dataset that sizes its own batches; above
            ``set_batch_sizes``), ``drop_last``, ``pad_value`` and ``collate_fn`` override the Pipeline's there
            (see :func:`fe_ray.pipeline.batching.make_stage`).
        num_process: None or 0 prepares batches in the consuming thread; N > 0 uses N worker threads that prepare
            batches ahead. The batches and their order are identical either way, random fe_ray ops included (they
            draw from per-sample generators); only custom ops drawing from a global RNG (``np.random.*``,
            ``random.*``) differ: without threads those draws are seeded by the batch's position, with threads they
            interleave. Where an op keeps state (a non-empty ``state_dict``), batches are made in the consuming
            thread whatever ``num_process`` says (with a warning), so that its state stays exact.
        drop_last: Drop the last, partial batch of each pass over a dataset.
        pad_value: Samples of one key that differ in shape are padded with this value at the end of each axis up to
            the batch's largest shape (FastEstimator's ``pad_value``); None makes such a batch an error.
        collate_fn: Make each batch from the list of its sample dicts with this function (returning one dict of
            batched arrays) instead of stacking them.
        shuffle_seed: Seed of the shuffle; None takes ``fe.enable_deterministic``'s seed if it was called, else draws
            one at construction (it is part of :meth:`state_dict`, so a restored run still shuffles like the
            original).

    Loader contract:
        ``pipeline(mode, epoch=1, ds_id='', shuffle=None, steps_per_epoch=None, track=None)`` returns a
        :class:`~fe_ray.pipeline.loader.Loader`, a context manager and an iterable of ``{key: np.ndarray}`` batches.
        ``shuffle`` None shuffles in train only. ``len(loader)`` is the number of batches in the epoch: one pass over
        the data, or ``steps_per_epoch`` batches. Fewer cut the pass short; more start further passes, each a new
        permutation (every pass ends with its partial batch unless ``drop_last``). The order of pass ``p`` of an
        epoch is a pure function of ``(shuffle_seed, mode, ds_id, epoch, p)``. Random ops (``op.is_random``, e.g.
        RandomCrop, Sometimes) draw from a generator that is a pure function of that, the sample's dataset index and
        the op's position in the epoch's op list (``state["rng"]``, see :mod:`fe_ray.op.numpyop.randomness`); random
        ops after a Batch op, from one seeded by the batch's index in the epoch. So their augmentations too are the
        same after a resume and with any ``num_process``. User code (a LambdaOp's function, an op class of one's
        own, a ``collate_fn``) drawing from numpy's or Python's global generator finds them seeded by the batch's
        index in the epoch while its batch is made (without worker threads), and the caller's states are put back
        afterwards: its draws too are the same after a resume (see :mod:`fe_ray.op.numpyop.randomness`).
        :meth:`transform` has no sample position: there random ops draw anew on each call, from a generator seeded
        by numpy's global one.

    State contract (resuming mid-epoch):
        Every tracked loader records, per (mode, ds_id), ``{"epoch": e, "batches": k}``: ``k`` batches of epoch ``e``
        have been handed out (the counter moves just before a batch is yielded, so a checkpoint taken while that
        batch is processed counts it as consumed). The entry is removed once the epoch's last batch is handed out.
        :meth:`state_dict` returns ``{"seed", "positions": {mode: {ds_id: {"epoch", "batches"}}}, "ops": [...],
        "datasets": {mode: {ds_id: [...]}}}`` (the ops' own ``state_dict``s, and each dataset's -- every dataset of a
        Scheduler, in order -- or None for a dataset without ``state_dict``). After :meth:`load_state_dict`, the
        next tracked loader for that (mode, ds_id) *and the same epoch* starts at batch ``k``: batches before it are
        skipped without loading data or running ops, so the remaining batches equal those of the uninterrupted run.
        A loader for another epoch starts at 0 and replaces the entry. Loaders are tracked unless ``track=False``;
        by default a call with an explicit ``shuffle=False`` (a side look at the data, like the Estimator's warmup)
        is not tracked.
        :meth:`get_results` never tracks. A dataset that changes as it is read (one defining ``state_dict`` /
        ``load_state_dict``) is saved and restored with the Pipeline, as FastEstimator saves its datasets' states.
        A DataLoader / tf.data.Dataset resumes by skipping the batches handed out from a fresh pass; its position
        also says ``"exact"`` (whether that reproduces them, see :mod:`fe_ray.pipeline.framework_data`) and, for a
        DataLoader with generators, ``"rng"`` (their states when the epoch's pass began, restored before the pass
        is re-created). The generators' current states are saved as its dataset state. Restoring a position that
        is not exact warns.

    Raises:
        ValueError: For an empty dataset, a missing or non-positive batch size for a mode with data, a bad ds_id,
            an invalid ``num_process`` or two Batch ops active in one mode, epoch and ds_id; for ``batch_size``,
            ``ops``, ``num_process``, ``drop_last``, ``pad_value`` or ``collate_fn`` when all data is DataLoaders /
            tf.data.Datasets (FastEstimator refuses the first three; fe_ray refuses its own batching options too, as
            they would be silently ignored).
        TypeError: For a non-dataset value or an op that is not a NumpyOp (e.g. a TensorOp).
    """

    def __init__(self, train_data: Any = None, eval_data: Any = None, test_data: Any = None,
                 batch_size: int | Scheduler[int] | Mapping[str, int | Scheduler[int]] | None = None,
                 ops: Any = None, num_process: int | None = None, drop_last: bool = False,
                 pad_value: int | float | None = None,
                 collate_fn: Callable[[list[dict[str, Any]]], Mapping[str, Any]] | None = None,
                 shuffle_seed: int | None = None) -> None:
        self.data: dict[str, dict[str, Any]] = {}
        for mode, given in (("train", train_data), ("eval", eval_data), ("test", test_data)):
            if given is not None:
                self.data[mode] = normalize_data(given, mode)
        self.batch_size = batch_size
        self.ops: list[Any] = to_list(ops)
        check_numpy_ops(get_current_items(self.ops), "Pipeline(ops=...)")
        check_batch_sizes(self.batch_size, self.data, self.ops)
        check_batch_ops(self.ops, {**{mode: list(by_id) for mode, by_id in self.data.items()}, "infer": [""]})
        self.num_process = check_count(num_process, "num_process") if num_process is not None else 0
        self.drop_last = bool(drop_last)
        check_collation(pad_value, collate_fn)
        self.pad_value = pad_value
        self.collate_fn = collate_fn
        if shuffle_seed is None:
            # fe.enable_deterministic's seed makes the shuffle repeat across runs (FastEstimator's shuffle draws from
            # the generators it seeds); otherwise drawn once. Checkpointed either way, so restores shuffle the same.
            seed = last_seed()
            shuffle_seed = seed % 2**63 if seed is not None else int(np.random.SeedSequence().entropy % (2**63))
        if not isinstance(shuffle_seed, (int, np.integer)) or isinstance(shuffle_seed, bool) or shuffle_seed < 0:
            raise ValueError(f"shuffle_seed must be a non-negative int or None, got {shuffle_seed!r}.")
        self.shuffle_seed = int(shuffle_seed)
        self._positions: dict[tuple[str, str], dict[str, Any]] = {}
        check_framework_options(self.data, {"batch_size": self.batch_size, "ops": self.ops or None,
                                            "num_process": num_process, "drop_last": self.drop_last or None,
                                            "pad_value": self.pad_value, "collate_fn": self.collate_fn})

    # ------------------------------------------------------------------ configuration queries
    def get_batch_size(self, mode: str, epoch: int) -> int | None:
        """The batch size of ``mode`` at ``epoch``; None where there is none (samples are handed out one at a time,
        without a batch axis, as in FastEstimator).

        Raises:
            ValueError: If the ``{mode: batch_size}`` dict does not name ``mode``.
        """
        value: Any = self.batch_size
        if isinstance(value, Mapping):
            if mode not in value:
                raise ValueError(f"No batch_size for mode {mode!r}; the batch_size dict covers {sorted(value)} (or "
                                 "give that mode a Batch(batch_size=...) op).")
            value = value[mode]
        if isinstance(value, Scheduler):
            value = value.get_current_value(epoch)
        return None if value is None else int(value)

    def get_modes(self, epoch: int | None = None) -> set[str]:
        """Modes with data (at ``epoch`` if given, else at any epoch)."""
        if epoch is None:
            return {mode for mode, by_id in self.data.items()
                    if any(get_current_items([value]) for value in by_id.values())}
        return {mode for mode in self.data if self.get_ds_ids(epoch, mode)}

    def get_ds_ids(self, epoch: int, mode: str) -> list[str]:
        """The ds_ids of ``mode`` that have a dataset at ``epoch``, in the order they were given."""
        check_mode(mode)
        return [ds_id for ds_id, value in self.data.get(mode, {}).items()
                if get_current_items([value], epoch=epoch)]

    def get_epochs_with_data(self, total_epochs: int, mode: str) -> set[int]:
        """The epochs in ``[1, total_epochs]`` in which ``mode`` has data (a set, as FastEstimator's)."""
        return {epoch for epoch in range(1, total_epochs + 1) if self.get_ds_ids(epoch, mode)}

    def get_scheduled_items(self, mode: str) -> list[Any]:
        """Everything of ``mode`` that may change with the epoch (ops, datasets, batch size), for warmup planning."""
        batch_size = self.batch_size.get(mode) if isinstance(self.batch_size, Mapping) else self.batch_size
        return [*self.ops, *self.data.get(mode, {}).values(), batch_size]

    def get_dataset(self, mode: str, epoch: int, ds_id: str = "") -> Any:
        """The dataset of ``mode`` and ``ds_id`` at ``epoch``.

        Raises:
            ValueError: Naming what is available, if ``mode`` or ``ds_id`` has no data at ``epoch``.
        """
        check_mode(mode)
        check_epoch(epoch)
        if mode not in self.data:
            raise ValueError(f"Pipeline has no {mode} data; modes with data: {sorted(self.data)}.")
        if ds_id not in self.data[mode]:
            raise ValueError(f"Pipeline has no ds_id {ds_id!r} in mode {mode!r}; available: {list(self.data[mode])}.")
        items = get_current_items([self.data[mode][ds_id]], epoch=epoch)
        if not items:
            raise ValueError(f"Mode {mode!r}" + (f", ds_id {ds_id!r}" if ds_id else "") + f" has no data at epoch "
                             f"{epoch} (scheduled to None); check get_ds_ids(epoch, mode) first.")
        return items[0]

    def get_ops(self, mode: str, epoch: int, ds_id: str = "") -> list[NumpyOp]:
        """The ops that run in ``mode`` at ``epoch`` for ``ds_id``, in order (a Batch op and the ops after it
        included; :meth:`get_op_split` separates them)."""
        return get_current_items(self.ops, run_modes=mode, epoch=epoch, ds_id=ds_id)

    def get_op_split(self, mode: str, epoch: int, ds_id: str = "") -> OpSplit:
        """The ops of ``mode``, ``epoch`` and ``ds_id`` split at their Batch op: ``(per-sample ops, Batch op or None,
        batched ops)``.

        Raises:
            ValueError: If two Batch ops are active there.
        """
        return split_ops(self.get_ops(mode, epoch, ds_id), describe(mode, epoch, ds_id))

    def _stage(self, mode: str, epoch: int, ds_id: str, own_size: bool, explicit: int | None = None) -> Stage:
        """The recipe of one dataset's batches: its ops split at the Batch op, the batch size (None where the
        dataset sizes its own batches; else the op's, an InterleaveDataset's ``explicit`` one, or the Pipeline's)
        and the collation settings."""
        split = self.get_op_split(mode, epoch, ds_id)
        size = None if own_size else op_batch_size(split) or explicit or self.get_batch_size(mode, epoch)
        return make_stage(split, size, self.drop_last, self.pad_value, self.collate_fn)

    # ------------------------------------------------------------------ data access
    def __call__(self, mode: str, epoch: int = 1, ds_id: str = "", shuffle: bool | None = None,
                 steps_per_epoch: int | None = None, track: bool | None = None) -> Loader:
        """Open the loader of one epoch (see the class docstring for the resume contract).

        Args:
            mode: "train", "eval" or "test".
            epoch: The epoch (1-based, default 1); selects scheduled datasets, batch sizes and ops, and seeds the
                shuffle.
            ds_id: The dataset id ('' when the mode's data was not given as a dict).
            shuffle: Shuffle the data; None shuffles in train only.
            steps_per_epoch: Number of batches in the epoch; None for one pass over the data.
            track: Record the position for :meth:`state_dict` and resume a loaded one; None tracks unless
                ``shuffle is False``.

        Returns:
            The Loader, to be used as ``with pipeline(...) as loader: for batch in loader: ...``.

        Raises:
            ValueError: If the mode, epoch, ds_id or steps_per_epoch is invalid or there is no data for them.
        """
        dataset = self.get_dataset(mode, epoch, ds_id)
        if steps_per_epoch is not None:
            check_count(steps_per_epoch, "steps_per_epoch", minimum=1)
        if track is None:
            track = shuffle is not False  # decided on the argument as given: an explicit False opts out
        if framework_kind(dataset) is not None:
            return self._framework_loader(dataset, mode, epoch, ds_id, steps_per_epoch, track)
        shuffle = mode == "train" if shuffle is None else bool(shuffle)
        key = (mode, ds_id)
        saved = self._positions.get(key) if track else None
        start = saved["batches"] if saved is not None and saved["epoch"] == epoch else 0
        interleave = interleaved(dataset)
        child_stages = None
        if interleave is None:
            # A dataset of whole batches (BatchDataset) sizes its own batches, as in FastEstimator.
            stage = self._stage(mode, epoch, ds_id, own_size=self_batching(dataset))
        else:
            # Its named datasets select their ops (and Batch op) by name, as FastEstimator's ds_id-tagged ops do.
            stage = make_stage(OpSplit([], None, []), None, self.drop_last, self.pad_value, self.collate_fn)
            explicit = interleave.explicit_batch_sizes or [None] * len(interleave.tags)
            child_stages = [self._stage(mode, epoch, tag if tag is not None else ds_id, False, explicit[child])
                            for child, tag in enumerate(interleave.tags)]
        loader = Loader(dataset, stage.ops, stage.batch_size, mode, epoch, ds_id, shuffle=shuffle,
                        seed=self.shuffle_seed, drop_last=stage.drop_last, steps_per_epoch=steps_per_epoch,
                        start=start, num_process=self.num_process, pad_value=stage.pad_value,
                        collate_fn=stage.collate_fn, batch_ops=stage.batch_ops, child_stages=child_stages)
        if track:
            loader.on_batch = self._tracker(key, epoch, loader.num_batches)
            if loader.remaining == 0:
                self._positions.pop(key, None)
            else:
                self._positions[key] = {"epoch": epoch, "batches": loader.start}
        return loader

    def _framework_loader(self, data: Any, mode: str, epoch: int, ds_id: str, steps_per_epoch: int | None,
                          track: bool) -> FrameworkLoader:
        """A DataLoader / tf.data.Dataset's loader; tracked, it resumes a saved position by skipping batches."""
        return framework_loader(self._positions, data, mode, epoch, ds_id, steps_per_epoch, track)

    def _tracker(self, key: tuple[str, str], epoch: int, total: int) -> Callable[[int], None]:
        def on_batch(handed_out: int) -> None:
            if handed_out >= total:
                # A finished epoch leaves no position behind: there is nothing of it left to resume.
                self._positions.pop(key, None)
            else:
                self._positions[key] = {"epoch": epoch, "batches": handed_out}
        return on_batch

    def get_results(self, mode: str = "train", epoch: int = 1, ds_id: str = "", num_steps: int = 1,
                    shuffle: bool = False) -> Any:
        """Return the first ``num_steps`` batches of an epoch (fewer if the epoch has fewer: one pass over the data,
        as FastEstimator), for inspecting the pipeline's output.

        Never touches the resumable position.

        Returns:
            One batch dict when there is one batch to return, else a list of them. A DataLoader /
            tf.data.Dataset whose batches are not dicts (e.g. a TensorDataset's lists) gives its batches as they
            are, with tensors made numpy arrays, as FastEstimator shows them (training still needs dict batches).
        """
        check_count(num_steps, "num_steps", minimum=1)
        # A DataLoader / tf.data.Dataset is only read up to num_steps batches (it may repeat forever).
        steps = num_steps if framework_kind(self.get_dataset(mode, epoch, ds_id)) is not None else None
        with self(mode, epoch, ds_id, shuffle=shuffle, steps_per_epoch=steps, track=False) as loader:
            if isinstance(loader, FrameworkLoader):
                loader.require_dict = False
            batches = list(itertools.islice(loader, num_steps))
        return batches[0] if len(batches) == 1 else batches

    def benchmark(self, mode: str = "train", epoch: int = 1, ds_id: str | None = None, num_steps: int = 1000,
                  log_interval: int = 100, detailed: bool = True) -> None:
        """Print how fast this Pipeline delivers batches (FastEstimator's ``Pipeline.benchmark``).

        Loads ``num_steps`` batches of the epoch (further passes if one pass has fewer) and prints the steps/sec
        every ``log_interval`` steps; with ``detailed``, then rebuilds ``min(log_interval, num_steps)`` of them op
        by op and prints each op's (and the collation's) share of the time. Like :meth:`get_results` it never
        touches the resumable position.

        Args:
            mode: "train", "eval" or "test".
            epoch: The epoch (1-based) whose datasets, batch size and ops are used.
            ds_id: The dataset id to benchmark; None benchmarks each of the mode's datasets in turn.
            num_steps: Batches to load per dataset.
            log_interval: Steps between speed lines.
            detailed: Also print the per-op breakdown.

        Raises:
            ValueError: For an invalid mode, epoch, ds_id, num_steps or log_interval, or a mode without data.
        """
        run_benchmark(self, mode=mode, epoch=epoch, ds_id=ds_id, num_steps=num_steps, log_interval=log_interval,
                      detailed=detailed)

    def transform(self, data: Mapping[str, Any], mode: str, epoch: int = 1, ds_id: str = "",
                  target_type: str = "np") -> dict[str, Any] | FilteredData:
        """Run the ops of ``mode`` on one sample and return it as a batch of 1 (e.g. for inference).

        Ops after a Batch op run on that batch of 1, made by the Batch op's ``collate_fn`` if it has one.

        Args:
            data: One sample, ``{key: value}`` (not batched).
            mode: The mode whose ops run ("infer" is allowed and needs no data).
            epoch: The epoch that selects scheduled ops.
            ds_id: The dataset id that selects ops.
            target_type: What the values become: "np" (numpy arrays), "torch" or "tf" tensors.

        Returns:
            ``{key: array or tensor}`` with a leading batch axis of size 1, or the
            :class:`~fe_ray.types.FilteredData` of an op that dropped the sample (e.g. a RemoveIf), as FastEstimator.

        Raises:
            ValueError: If ``mode``, ``epoch`` or ``target_type`` is invalid.
        """
        check_mode(mode)
        check_epoch(epoch)
        if target_type not in TARGET_TYPES:
            raise ValueError(f"Pipeline.transform target_type must be one of {list(TARGET_TYPES)}, got "
                             f"{target_type!r}.")
        sample = owned_sample(data)  # ops editing arrays in place must not change the caller's sample
        split = self.get_op_split(mode, epoch, ds_id)
        state = {"mode": mode, "epoch": epoch, "ds_id": ds_id}
        filtered = forward_numpyop(split.sample_ops, sample, state)
        if filtered is not None:
            return filtered  # an op dropped the sample (RemoveIf): FastEstimator returns its FilteredData too
        if split.batch is not None and split.batch.collate_fn is not None:
            batch = Loader.stack_samples([sample], make_stage(split, 1, False, None, split.batch.collate_fn))
        else:
            batch = {key: np.expand_dims(np.asarray(value), 0) for key, value in sample.items()}
        filtered = forward_numpyop(split.batch_ops, batch, state, batched=True)
        if filtered is not None:
            return filtered
        return batch if target_type == "np" else to_tensor(batch, target_type)

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict[str, Any]:
        """The resumable position (see the class docstring): seed, per-(mode, ds_id) positions and op states."""
        positions: dict[str, dict[str, dict[str, Any]]] = {}
        for (mode, ds_id), position in self._positions.items():
            positions.setdefault(mode, {})[ds_id] = dict(position)
        return {"seed": self.shuffle_seed, "positions": positions,
                "ops": [op.state_dict() for op in get_current_items(self.ops)], "datasets": dataset_states(self.data)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the next tracked loader of a saved (mode, ds_id, epoch) resumes it.

        Raises:
            ValueError: If ``state`` is malformed, names an unknown mode, or has op states for different ops.
        """
        missing = {"seed", "positions"} - set(state)
        if missing:
            raise ValueError(f"Pipeline state lacks {sorted(missing)}; it was not made by Pipeline.state_dict().")
        positions = parse_positions(state["positions"])
        ops = get_current_items(self.ops)
        op_states = state.get("ops", [])
        if len(op_states) != len(ops):
            raise ValueError(f"Pipeline state holds {len(op_states)} op state(s) but this Pipeline has {len(ops)} "
                             "op(s); restore into a Pipeline with the same ops.")
        restores = dataset_restores(self.data, state.get("datasets", {}))  # all checked before anything changes
        for op, op_state in zip(ops, op_states):
            op.load_state_dict(copy.deepcopy(op_state))
        restore_datasets(restores)
        self.shuffle_seed = int(state["seed"])
        # Updated in place: loaders already open (and their trackers) share this dict.
        self._positions.clear()
        self._positions.update(positions)
        warn_inexact(positions)

    def __repr__(self) -> str:
        data = {mode: {ds_id: value for ds_id, value in by_id.items()} for mode, by_id in self.data.items()}
        return f"Pipeline(data={data}, batch_size={self.batch_size!r}, ops={self.ops}, num_process={self.num_process})"
