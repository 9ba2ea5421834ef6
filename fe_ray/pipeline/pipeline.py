"""The Pipeline: datasets per mode, per-sample NumpyOps, batching, seeded shuffling and a resumable position."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_tensor
from fe_ray.backend.determinism import last_seed
from fe_ray.op.numpyop.numpyop import NumpyOp, check_numpy_ops, forward_numpyop
from fe_ray.pipeline.benchmark import benchmark as run_benchmark
from fe_ray.pipeline.composite import interleaved
from fe_ray.pipeline.framework_data import (
    FrameworkLoader,
    exact_resume,
    framework_kind,
    rng_state,
    set_rng_state,
    warn_inexact,
)
from fe_ray.pipeline.loader import Loader, owned_sample
from fe_ray.pipeline.validation import check_batch_size, check_framework_options, normalize_data
from fe_ray.schedule import Scheduler, get_current_items
from fe_ray.util import MODES, check_count, check_epoch, check_mode, to_list

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
        batch_size: Samples per batch: an int, a Scheduler of ints, or a ``{mode: int or Scheduler}`` dict. A
            BatchDataset, and an InterleaveDataset given per-dataset sizes with ``set_batch_sizes``, size their own
            batches (an InterleaveDataset without them uses this size for each of its datasets).
        ops: Per-sample NumpyOps (or Schedulers of them), run in order on each sample; ``mode`` and ``ds_id`` of an
            op select where it runs (on the batches of an InterleaveDataset built from a dict, its dataset names
            serve as the ds_ids, as in FastEstimator).
        num_process: None or 0 prepares batches in the consuming thread; N > 0 uses N worker threads that prepare
            batches ahead. The batches and their order are identical either way, random fe_ray ops included (they
            draw from per-sample generators); only custom ops drawing from a global RNG (``np.random.*``) differ, as
            their draws interleave across threads.
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
        the op's position in the epoch's op list (``state["rng"]``, see :mod:`fe_ray.op.numpyop.randomness`), so
        their augmentations too are the same after a resume and with any ``num_process``. :meth:`transform` has no
        sample position: there random ops draw anew on each call, from a generator seeded by numpy's global one.

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
        ValueError: For an empty dataset, a missing or non-positive batch size for a mode with data, a bad ds_id or
            an invalid ``num_process``; for ``batch_size``, ``ops``, ``num_process``, ``drop_last``, ``pad_value``
            or ``collate_fn`` when all data is DataLoaders / tf.data.Datasets (FastEstimator refuses the first
            three; fe_ray refuses its own batching options too, as they would be silently ignored).
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
        self._check_batch_sizes()
        self.ops: list[Any] = to_list(ops)
        check_numpy_ops(get_current_items(self.ops), "Pipeline(ops=...)")
        self.num_process = check_count(num_process, "num_process") if num_process is not None else 0
        self.drop_last = bool(drop_last)
        numeric = isinstance(pad_value, (int, float, np.number)) and not isinstance(pad_value, bool)
        if pad_value is not None and not numeric:
            raise TypeError(f"pad_value must be a number (the fill of samples padded to one shape) or None, got "
                            f"{pad_value!r}.")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"collate_fn must be callable (a list of sample dicts -> one batch dict) or None, got "
                            f"{type(collate_fn).__name__}.")
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
    def _check_batch_sizes(self) -> None:
        if self.batch_size is None and any(not _batched(value) for by_id in self.data.values()
                                           for value in by_id.values()):
            raise ValueError(f"Pipeline has data for modes {sorted(self.data)} but no batch_size; pass an int, a "
                             "Scheduler of ints, or a {mode: batch_size} dict.")
        if isinstance(self.batch_size, Mapping):
            for mode in self.batch_size:
                check_mode(mode)
            missing = [mode for mode, by_id in self.data.items() if mode not in self.batch_size
                       and not all(_batched(value) for value in by_id.values())]
            if missing:
                raise ValueError(f"batch_size dict {dict(self.batch_size)} has no entry for mode(s) {missing}, which "
                                 "have data.")
            for value in self.batch_size.values():
                check_batch_size(value)
        elif self.batch_size is not None:
            check_batch_size(self.batch_size)

    def get_batch_size(self, mode: str, epoch: int) -> int:
        """The batch size of ``mode`` at ``epoch``.

        Raises:
            ValueError: If no batch size is configured for ``mode`` or a Scheduler gives None at ``epoch``.
        """
        value: Any = self.batch_size
        if isinstance(value, Mapping):
            if mode not in value:
                raise ValueError(f"No batch_size for mode {mode!r}; the batch_size dict covers {sorted(value)}.")
            value = value[mode]
        if isinstance(value, Scheduler):
            value = value.get_current_value(epoch)
        if value is None:
            raise ValueError(f"No batch_size for mode {mode!r} at epoch {epoch}.")
        return int(value)

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

    def get_epochs_with_data(self, total_epochs: int, mode: str) -> list[int]:
        """The epochs in ``[1, total_epochs]`` in which ``mode`` has data."""
        return [epoch for epoch in range(1, total_epochs + 1) if self.get_ds_ids(epoch, mode)]

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
        """The per-sample ops that run in ``mode`` at ``epoch`` for ``ds_id``."""
        return get_current_items(self.ops, run_modes=mode, epoch=epoch, ds_id=ds_id)

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
        # A dataset of whole batches (BatchDataset) sizes its own batches, as in FastEstimator.
        batch_size = None if _batched(dataset) else self.get_batch_size(mode, epoch)
        interleave = interleaved(dataset)
        # An InterleaveDataset's named datasets select their ops by name, as FastEstimator's ds_id-tagged ops do.
        child_ops = None if interleave is None else \
            [self.get_ops(mode, epoch, tag if tag is not None else ds_id) for tag in interleave.tags]
        loader = Loader(dataset, self.get_ops(mode, epoch, ds_id), batch_size, mode, epoch,
                        ds_id, shuffle=shuffle, seed=self.shuffle_seed, drop_last=self.drop_last,
                        steps_per_epoch=steps_per_epoch, start=start, num_process=self.num_process,
                        pad_value=self.pad_value, collate_fn=self.collate_fn, child_ops=child_ops)
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
        key = (mode, ds_id)
        saved = self._positions.get(key) if track else None
        resumed = saved is not None and saved["epoch"] == epoch
        if resumed:
            set_rng_state(data, saved.get("rng"))  # the pass is re-created from the generators' epoch-start state
        loader = FrameworkLoader(data, mode, epoch, ds_id, steps_per_epoch=steps_per_epoch,
                                 start=saved["batches"] if resumed else 0)
        if not track:
            return loader
        entry = {"epoch": epoch, "batches": loader.start, "exact": exact_resume(data), "rng": rng_state(data)}
        total = loader.num_batches

        def on_batch(handed_out: int) -> None:
            if total is not None and handed_out >= total:
                self._positions.pop(key, None)
            else:
                self._positions[key] = {**entry, "batches": handed_out}

        def on_end() -> None:  # the pass ran out before the expected count: the epoch is over
            if self._positions.get(key, {}).get("epoch") == epoch:
                self._positions.pop(key, None)

        loader.on_batch, loader.on_end = on_batch, on_end
        if loader.remaining == 0:
            self._positions.pop(key, None)
        else:
            self._positions[key] = entry
        return loader

    def _tracker(self, key: tuple[str, str], epoch: int, total: int) -> Callable[[int], None]:
        def on_batch(handed_out: int) -> None:
            if handed_out >= total:
                # A finished epoch leaves no position behind: there is nothing of it left to resume.
                self._positions.pop(key, None)
            else:
                self._positions[key] = {"epoch": epoch, "batches": handed_out}
        return on_batch

    def get_results(self, mode: str = "train", epoch: int = 1, ds_id: str = "", num_steps: int = 1,
                    shuffle: bool = False) -> dict[str, np.ndarray] | list[dict[str, np.ndarray]]:
        """Return the first ``num_steps`` batches of an epoch (fewer if the epoch has fewer: one pass over the data,
        as FastEstimator), for inspecting the pipeline's output.

        Never touches the resumable position.

        Returns:
            One batch dict when there is one batch to return, else a list of them.
        """
        check_count(num_steps, "num_steps", minimum=1)
        # A DataLoader / tf.data.Dataset is only read up to num_steps batches (it may repeat forever).
        steps = num_steps if framework_kind(self.get_dataset(mode, epoch, ds_id)) is not None else None
        with self(mode, epoch, ds_id, shuffle=shuffle, steps_per_epoch=steps, track=False) as loader:
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
                  target_type: str = "np") -> dict[str, Any]:
        """Run the per-sample ops of ``mode`` on one sample and return it as a batch of 1 (e.g. for inference).

        Args:
            data: One sample, ``{key: value}`` (not batched).
            mode: The mode whose ops run ("infer" is allowed and needs no data).
            epoch: The epoch that selects scheduled ops.
            ds_id: The dataset id that selects ops.
            target_type: What the values become: "np" (numpy arrays), "torch" or "tf" tensors.

        Returns:
            ``{key: array or tensor}`` with a leading batch axis of size 1.

        Raises:
            ValueError: If ``mode``, ``epoch`` or ``target_type`` is invalid.
        """
        check_mode(mode)
        check_epoch(epoch)
        if target_type not in TARGET_TYPES:
            raise ValueError(f"Pipeline.transform target_type must be one of {list(TARGET_TYPES)}, got "
                             f"{target_type!r}.")
        sample = owned_sample(data)  # ops editing arrays in place must not change the caller's sample
        forward_numpyop(self.get_ops(mode, epoch, ds_id), sample, {"mode": mode, "epoch": epoch, "ds_id": ds_id})
        batch = {key: np.expand_dims(np.asarray(value), 0) for key, value in sample.items()}
        return batch if target_type == "np" else to_tensor(batch, target_type)

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict[str, Any]:
        """The resumable position (see the class docstring): seed, per-(mode, ds_id) positions and op states."""
        positions: dict[str, dict[str, dict[str, Any]]] = {}
        for (mode, ds_id), position in self._positions.items():
            positions.setdefault(mode, {})[ds_id] = dict(position)
        datasets = {mode: {ds_id: [_dataset_state(dataset) for dataset in get_current_items([value])]
                           for ds_id, value in by_id.items()} for mode, by_id in self.data.items()}
        return {"seed": self.shuffle_seed, "positions": positions,
                "ops": [op.state_dict() for op in get_current_items(self.ops)], "datasets": datasets}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the next tracked loader of a saved (mode, ds_id, epoch) resumes it.

        Raises:
            ValueError: If ``state`` is malformed, names an unknown mode, or has op states for different ops.
        """
        missing = {"seed", "positions"} - set(state)
        if missing:
            raise ValueError(f"Pipeline state lacks {sorted(missing)}; it was not made by Pipeline.state_dict().")
        positions: dict[tuple[str, str], dict[str, Any]] = {}
        for mode, by_id in state["positions"].items():
            if mode not in MODES:
                raise ValueError(f"Pipeline state has a position for unknown mode {mode!r}; valid modes: {MODES}.")
            for ds_id, position in by_id.items():
                positions[(mode, ds_id)] = {"epoch": int(position["epoch"]), "batches": int(position["batches"])}
                if "exact" in position:  # a DataLoader / tf.data.Dataset's position
                    positions[(mode, ds_id)].update(exact=bool(position["exact"]), rng=position.get("rng"))
        ops = get_current_items(self.ops)
        op_states = state.get("ops", [])
        if len(op_states) != len(ops):
            raise ValueError(f"Pipeline state holds {len(op_states)} op state(s) but this Pipeline has {len(ops)} "
                             "op(s); restore into a Pipeline with the same ops.")
        restores = self._dataset_restores(state.get("datasets", {}))  # all checked before anything changes
        for op, op_state in zip(ops, op_states):
            op.load_state_dict(copy.deepcopy(op_state))
        for dataset, dataset_state in restores:
            if framework_kind(dataset) is not None:
                set_rng_state(dataset, dataset_state["rng"])
            else:
                dataset.load_state_dict(copy.deepcopy(dataset_state))
        self.shuffle_seed = int(state["seed"])
        self._positions = positions
        warn_inexact(positions)

    def _dataset_restores(self, states: Mapping[str, Mapping[str, list[Any]]]) -> list[tuple[Any, Any]]:
        """Pair each saved dataset state with this Pipeline's dataset at the same (mode, ds_id, position).

        Raises:
            ValueError: If the saved states name a (mode, ds_id) this Pipeline lacks, hold another number of
                datasets there, or hold a state for a dataset that cannot load one.
        """
        restores = []
        for mode, by_id in states.items():
            for ds_id, saved in by_id.items():
                if ds_id not in self.data.get(mode, {}):
                    raise ValueError(f"Pipeline state holds a dataset state for mode {mode!r}, ds_id {ds_id!r}, which "
                                     f"this Pipeline has no data for; restore into a Pipeline with the same datasets.")
                datasets = get_current_items([self.data[mode][ds_id]])
                if len(saved) != len(datasets):
                    raise ValueError(f"Pipeline state holds {len(saved)} dataset state(s) for mode {mode!r}, ds_id "
                                     f"{ds_id!r}, but this Pipeline has {len(datasets)} dataset(s) there.")
                for dataset, dataset_state in zip(datasets, saved):
                    if dataset_state is None:
                        continue
                    if framework_kind(dataset) is not None:
                        if not isinstance(dataset_state, Mapping) or "rng" not in dataset_state:
                            raise ValueError(f"Pipeline state for the {type(dataset).__name__} of mode {mode!r}, "
                                             f"ds_id {ds_id!r} is not a DataLoader's generator state.")
                        restores.append((dataset, dataset_state))
                        continue
                    if not callable(getattr(dataset, "load_state_dict", None)):
                        raise ValueError(f"Pipeline state holds a state for the {type(dataset).__name__} of mode "
                                         f"{mode!r}, ds_id {ds_id!r}, which has no load_state_dict.")
                    restores.append((dataset, dataset_state))
        return restores

    def __repr__(self) -> str:
        data = {mode: {ds_id: value for ds_id, value in by_id.items()} for mode, by_id in self.data.items()}
        return f"Pipeline(data={data}, batch_size={self.batch_size!r}, ops={self.ops}, num_process={self.num_process})"


def _dataset_state(dataset: Any) -> Any:
    """A dataset's own ``state_dict()`` (copied: the dataset goes on changing), or None if it keeps no state; for a
    DataLoader, its generators' states (a tf.data.Dataset keeps none)."""
    if framework_kind(dataset) is not None:
        states = rng_state(dataset)
        return None if states is None else {"rng": states}
    state_dict = getattr(dataset, "state_dict", None)
    return copy.deepcopy(state_dict()) if callable(state_dict) else None


def _batched(data: Any) -> bool:
    """Whether every dataset ``data`` may be (one, or a Scheduler's) sizes its own batches: gives whole batches
    (``fe_batched``), or is an InterleaveDataset whose batch sizes were set."""
    values = data.get_all_values() if isinstance(data, Scheduler) else [data]
    return all(getattr(value, "fe_batched", False) or _sized_interleave(value) or framework_kind(value) is not None
               for value in values if value is not None)


def _sized_interleave(dataset: Any) -> bool:
    interleave = interleaved(dataset)
    return interleave is not None and interleave.explicit_batch_sizes is not None
