"""Estimator: runs a Pipeline through a Network for some epochs, calling Traces around every event."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Iterable, Sequence
from contextlib import closing
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.estimator_warmup import FIT_MODES, EstimatorWarmup
from fe_ray.pipeline.checkpoint import holds_state
from fe_ray.pipeline.lookahead import with_lookahead
from fe_ray.schedule import get_current_items
from fe_ray.summary.summary import Summary
from fe_ray.summary.system import System
from fe_ray.trace.essential import EvalEssential, TestEssential, TrainEssential
from fe_ray.trace.logger import Logger
from fe_ray.trace.trace import Data, PerDSTrace, Trace, may_change_batches, sort_traces
from fe_ray.util import drop_nones, to_list, to_set
from fe_ray.util.compat import warn
from fe_ray.util.fe_state import is_fe_ray_class

logger = logging.getLogger(__name__)



class Estimator(EstimatorWarmup):
    """Trains and tests a Network on a Pipeline, FastEstimator-style.

    Args:
        pipeline: The fe_ray Pipeline providing the data.
        network: The Network (in-process, or a distributed RayNetwork).
        epochs: How many epochs to train.
        train_steps_per_epoch: Cut or extend each training epoch to exactly this many steps (None: one pass).
        eval_steps_per_epoch: Same for evaluation epochs.
        traces: Traces (or Schedulers of Traces) to run.
        log_steps: Log every N training steps; 0 logs only epoch summaries; None disables the Logger (the Summary
            is recorded regardless).
        eval_log_steps: Evaluation batch indices after which a progress line is printed (default: the first, a
            third, two thirds and the last batch of the evaluation epoch).
        monitor_names: Extra keys to log during training besides the losses.

    Network contract. The Estimator uses only ``network(mode, epoch, ds_id, desired_output_keys, warmup, eager)``
    as a context manager, ``run_step(batch)``, ``get_loss_keys()``, ``get_scheduled_items(mode)``, ``models``,
    ``state_dict()`` / ``load_state_dict()`` (and ``transform`` for users), so any BaseNetwork-like object works.
    Two optional methods let a distributed network keep the driver's ``network.models`` meaningful:

    * ``sync_models_to_driver()``: called before the driver reads weights (checkpoint capture, ModelSaver,
      BestModelSaver, EarlyStopping) so that ``network.models`` hold the current weights and optimizer state;
    * ``load_models_from_driver()``: called after the driver changed the weights of ``network.models`` (checkpoint
      restore, EarlyStopping(restore_best_weights=True), BestModelSaver(load_best_final=True)) so the replicas
      train on them. Learning-rate changes (LRScheduler) are not pushed this way: the distributed network reads
      ``get_lr`` of the driver's models and forwards changes with the next step.

    Both go through :meth:`System.sync_models` / :meth:`System.push_models`. A third, ``check_traces(traces)``,
    runs before ``fit`` starts anything, so a network can refuse traces it cannot work with (a distributed one with
    ``max_failures`` needs a RestoreWizard writing to its ``checkpoint_dir``).

    Raises:
        ValueError: For a non-positive ``epochs`` / steps, a negative ``log_steps``, or invalid traces.
        TypeError: If ``pipeline`` or ``network`` is not a Pipeline / Network (e.g. swapped, or a bare model).
    """

    def __init__(self, pipeline: Any, network: Any, epochs: int, train_steps_per_epoch: int | None = None,
                 eval_steps_per_epoch: int | None = None, traces: Any = None, log_steps: int | None = 100,
                 eval_log_steps: Sequence[int] = (), monitor_names: str | Iterable[str] | None = None) -> None:
        _check_parts(pipeline, network)
        _check_positive("epochs", epochs)
        for name, value in (("train_steps_per_epoch", train_steps_per_epoch),
                            ("eval_steps_per_epoch", eval_steps_per_epoch)):
            if value is not None:
                _check_positive(name, value)
        if log_steps is not None and (not isinstance(log_steps, int) or isinstance(log_steps, bool) or log_steps < 0):
            raise ValueError(f"log_steps must be None (no logging), 0 (epoch logs only) or a positive int, got "
                             f"{log_steps!r}.")
        self.pipeline = pipeline
        self.network = network
        traces = drop_nones(to_list(traces))
        for pos, trace in enumerate(get_current_items(traces)):
            if not isinstance(trace, Trace):
                raise ValueError(f"traces[{pos}] is a {type(trace).__name__}, not a Trace; pass fe_ray.trace Traces "
                                 "(or Schedulers of them).")
        # None entries are dropped, as FastEstimator does (its monitor_names are Iterable[Optional[str]]).
        self.monitor_names: set[str] = {name for name in to_set(monitor_names) if name is not None}
        self.traces_in_use: list[Any] = []
        self.system = System(network=network, pipeline=pipeline, traces=traces,
                             num_devices=int(getattr(network, "num_replicas", None) or 1), log_steps=log_steps,
                             total_epochs=epochs, train_steps_per_epoch=train_steps_per_epoch,
                             eval_steps_per_epoch=eval_steps_per_epoch, eval_log_steps=eval_log_steps)
        self.system.traces = traces  # the one list: a trace appended to estimator.traces is the System's too

    # ------------------------------------------------------------------ public API
    @property
    def traces(self) -> list[Any]:
        """The user's traces (and Schedulers of them): ``system.traces`` itself, as in FastEstimator, so a trace
        appended here runs in the next ``fit`` / ``test`` and is part of its checkpoints."""
        return self.system.traces

    def fit(self, summary: str | None = None, warmup: bool = True, eager: bool = False) -> Summary:
        """Train (and evaluate after each epoch, if the pipeline has eval data).

        Args:
            summary: A name for the experiment (the Summary is recorded and returned either way).
            warmup: Run one batch per mode / scheduled configuration first, without updating weights, to fail
                fast on missing keys before training starts.
            eager: Run the network eagerly (TensorFlow: no tf.function).

        Returns:
            The Summary with the history of every logged value.
        """
        self.system.reset(summary, self._config())
        self._prepare_traces(FIT_MODES)
        check_traces = getattr(self.network, "check_traces", None)
        if check_traces is not None:  # a distributed network refuses a recovery it could not carry out
            check_traces(get_current_items(self.traces_in_use))
        if warmup:
            self._warmup(eager)
        while True:
            try:
                self._start(FIT_MODES, eager)
                break
            except BaseException as err:
                # fe_ray.distributed: a RayNetwork with max_failures may replace failed replicas; running the loop
                # again then resumes from the latest checkpoint (the RestoreWizard restores it at on_begin).
                recover = getattr(self.network, "recover", None)
                if isinstance(err, Exception) and recover is not None and recover(err, self.system):
                    continue
                self._abort(err)
                raise
        return self.system.summary

    def test(self, summary: str | None = None, eager: bool = False) -> Summary:
        """Run the test data through the network and the test-mode traces.

        Without test data the test-mode traces run without any batch (as in FastEstimator), with a warning.

        Returns:
            The Summary, now including the test history.
        """
        modes = self.pipeline.get_modes()
        if "test" not in modes:
            warnings.warn(f"Estimator.test() runs the Pipeline's test data, but the Pipeline has data only for modes "
                          f"{sorted(modes)}: the traces run without any batch. Pass fe.Pipeline(test_data=...) "
                          "to test.", UserWarning, stacklevel=2)
        self.system.reset_for_test(summary)
        self._prepare_traces(("test",))
        self._start(("test",), eager)
        return self.system.summary

    # ------------------------------------------------------------------ setup
    def _config(self) -> dict[str, Any]:
        return {"epochs": self.system.total_epochs, "train_steps_per_epoch": self.system.train_steps_per_epoch,
                "eval_steps_per_epoch": self.system.eval_steps_per_epoch, "log_steps": self.system.log_steps,
                "models": [getattr(m, "model_name", type(m).__name__) for m in self.network.models],
                "traces": [type(t).__name__ for t in get_current_items(self.traces)]}

    def _prepare_traces(self, run_modes: Sequence[str]) -> None:
        monitor = self.monitor_names | set(self.network.get_loss_keys())
        traces: list[Any] = []
        if "train" in run_modes:
            traces.append(TrainEssential(monitor_names=monitor))
        modes_with_data = self.pipeline.get_modes()
        if "eval" in run_modes and "eval" in modes_with_data:
            traces.append(EvalEssential(monitor_names=monitor))
        if "test" in run_modes and "test" in modes_with_data:
            traces.append(TestEssential(monitor_names=monitor))
        traces.extend(self.traces)
        if "train" in run_modes:
            _warn_if_nothing_saves(self.traces, run_modes)
        if self.system.log_steps is not None:
            traces.append(Logger())
        for trace in get_current_items(traces):
            trace.system = self.system
        self.traces_in_use = traces
        self.system.traces_in_use = traces  # system.traces stays the user's list, as in FastEstimator

    def _traces(self, mode: str, epoch: int | None, ds_id: str | None = None) -> list[Trace]:
        return sort_traces(get_current_items(self.traces_in_use, run_modes=mode, epoch=epoch, ds_id=ds_id))

    def _data(self, batch: Any = None) -> Data:
        return Data(batch, on_log=self.system.write_summary)

    @staticmethod
    def _lookahead_setter(network: Any, traces: Sequence[Trace]) -> Any:
        set_lookahead = getattr(network, "set_lookahead", None)
        if set_lookahead is None or not may_change_batches(traces):
            return set_lookahead
        return functools.partial(set_lookahead, may_change=True)  # make batches ahead, but put no slices of them

    def _as_tensors(self, batch: Any) -> Any:
        """The Pipeline's numpy batch as the network's framework tensors, which FastEstimator's traces see from
        ``on_batch_begin`` on (torch shares the arrays' memory)."""
        target = getattr(self.network, "target_type", None)
        return get_backend(target).to_tensor(batch) if target in ("torch", "tf") else batch

    # ------------------------------------------------------------------ run loop
    def _start(self, run_modes: Sequence[str], eager: bool) -> None:
        system = self.system
        first_mode = run_modes[0]
        system.mode = first_mode
        # The same mode filter as each epoch's (no mode, None or empty, means every mode).
        all_traces = sort_traces(get_current_items(self.traces_in_use, run_modes=run_modes))
        try:
            self._run_event("on_begin", all_traces)  # a RestoreWizard may restore the whole state here
            if "test" in run_modes:
                system.mode = "test"
                self._run_epoch(eager)
            else:
                self._fit_epochs(eager)
        except _EarlyStop:
            pass  # a trace set system.stop_training: the rest of the run is skipped, on_end still runs
        system.mode = first_mode
        self._run_event("on_end", all_traces)

    def _fit_epochs(self, eager: bool) -> None:
        system = self.system
        # After a restore, epoch_idx/mode/batch_idx/mode_finished locate where the checkpoint was taken.
        restored = system.epoch_idx > 0
        resume_epoch, resume_mode, resume_done = system.epoch_idx, system.mode, system.mode_finished
        for epoch in range(max(1, system.epoch_idx), system.total_epochs + 1):
            modes = [mode for mode in FIT_MODES if mode in self.pipeline.get_modes(epoch)]
            for mode in modes:
                resume = False
                if restored and epoch == resume_epoch and resume_mode in modes:
                    position, target = modes.index(mode), modes.index(resume_mode)
                    if position < target or (position == target and resume_done):
                        continue
                    resume = position == target
                system.epoch_idx = epoch
                system.mode = mode
                self._run_epoch(eager, resume=resume)

    def _run_epoch(self, eager: bool, resume: bool = False) -> None:
        """Run the current mode's epoch over every ds_id; with ``resume``, continue after ``system.batch_idx``."""
        system = self.system
        mode, epoch = system.mode or "train", system.epoch_idx
        ds_ids = list(self.pipeline.get_ds_ids(epoch, mode))
        epoch_traces = self._traces(mode, epoch)
        start = 0
        if resume and system.ds_id in ds_ids:
            start = ds_ids.index(system.ds_id)
        if not resume:
            system.batch_idx = None
            system.mode_finished = False
            self._run_event("on_epoch_begin", epoch_traces)
        else:
            self._begin_stateless_traces(epoch_traces)
        # As FastEstimator: what PerDSTraces write in on_ds_end reaches on_epoch_end's Data too (Logger prints it).
        epoch_data = self._data()
        restored, system.restored_epoch_results = system.restored_epoch_results, None
        if resume and restored:  # the datasets finished before the checkpoint: their results, already in the Summary
            epoch_data.read_logs().update(restored.get("logged", {}))
            epoch_data.maps[1].update(restored.get("unlogged", {}))
        system.epoch_data = epoch_data
        for pos, ds_id in enumerate(ds_ids[start:]):
            resumed = resume and pos == 0  # the dataset a checkpoint was taken in: its on_ds_begin already ran
            if not resumed:
                system.batch_idx = None
            system.ds_id = ds_id
            self._run_dataset(eager, ds_id, epoch_data, begin=not resumed)
        system.mode_finished = True
        system.epoch_data = None
        system.write_summary("epoch", epoch)
        self._run_event("on_epoch_end", epoch_traces, data=epoch_data)

    def _begin_stateless_traces(self, traces: Sequence[Trace]) -> None:
        """On a resume inside an epoch, give ``on_epoch_begin`` to the traces of the user's own that keep no state in
        checkpoints: FastEstimator-style traces set up their epoch's accumulators there, and without it their
        ``on_batch_end`` would meet attributes never set. Their epoch values then cover the resumed batches only."""
        fresh = [trace for trace in traces if _starts_epochs_without_state(trace)]
        if fresh:
            logger.warning("fe_ray: resumed inside epoch %d: %s keep(s) no state in checkpoints, so their values for "
                           "this epoch start from the resumed batch; give them state_dict / load_state_dict (or "
                           "__getstate__) to resume them exactly.", self.system.epoch_idx,
                           ", ".join(type(trace).__name__ for trace in fresh))
            self._run_event("on_epoch_begin", fresh)

    def _run_dataset(self, eager: bool, ds_id: str, epoch_data: Data, begin: bool = True) -> None:
        system = self.system
        mode, epoch = system.mode or "train", system.epoch_idx
        traces = self._traces(mode, epoch, ds_id)
        per_ds = [trace for trace in traces if isinstance(trace, PerDSTrace)]
        steps = system.steps_per_epoch
        # A fit() stopped by a trace's on_begin leaves epoch 0, where FastEstimator still tests: the data and ops
        # of epoch 1 serve it, while the System keeps epoch 0.
        with self.pipeline(mode=mode, epoch=max(epoch, 1), ds_id=ds_id, steps_per_epoch=steps) as loader:
            length = steps if steps is not None else _safe_len(loader)
            system.epoch_length = length
            if mode == "eval":  # known to the dataset's on_ds_begin already, as in FastEstimator
                system.eval_log_steps = _eval_log_steps(system.eval_log_steps_request, system.epoch_length)
            if begin:
                self._run_event("on_ds_begin", per_ds, data=Data())  # FastEstimator logs nothing written here
            # Resumed from a checkpoint taken after this dataset's last batch (before on_epoch_end): the Pipeline
            # has no position left for it, so running the loader would start the epoch over. Batches trained and
            # none left to resume (filtered batches, skipped, make the epoch train fewer than the loader plans).
            finished = bool(system.batch_idx) and getattr(loader, "start", None) == 0
            if not finished and (length is None or (system.batch_idx or 0) < length):
                self._run_batches(eager, ds_id, loader, traces)
        self._run_event("on_ds_end", per_ds, data=epoch_data)

    def _run_batches(self, eager: bool, ds_id: str, loader: Any, traces: list[Trace]) -> None:
        system = self.system
        mode, epoch, steps = system.mode or "train", system.epoch_idx, system.steps_per_epoch
        with self.network(mode=mode, epoch=max(epoch, 1), ds_id=ds_id, desired_output_keys=self._wanted_keys(traces),
                          warmup=False, eager=eager) as network, \
                closing(with_lookahead(loader, self._lookahead_setter(network, traces),
                                        self._as_tensors)) as batches:
            for batch in batches:
                if mode == "train":
                    system.update_global_step()
                system.update_batch_idx()
                self._run_event("on_batch_begin", traces, batch)
                result = network.run_step(batch)
                self._run_event("on_batch_end", traces, result)
                if steps is not None and system.batch_idx >= steps:
                    break

    def _abort(self, error: BaseException) -> None:
        """Tell every trace that fit is failing; a trace's own failure here is logged, never hides ``error``."""
        for trace in get_current_items(self.traces_in_use):
            try:
                trace.on_abort(error)
            except Exception as err:  # noqa: BLE001 - the original error is the one to raise
                logger.warning("fe_ray: %s.on_abort failed: %s", type(trace).__name__, err)

    def _run_event(self, event: str, traces: Sequence[Trace], batch: Any = None, data: Data | None = None) -> None:
        if data is None:
            data = self._data(batch)
        for trace in traces:
            getattr(trace, event)(data)
        if self.system.stop_training and event != "on_end":
            # As FastEstimator: the flag ends the run right after the event that set it (no more batches, no
            # on_epoch_end, no evaluation), and on_end runs.
            raise _EarlyStop


class _EarlyStop(Exception):
    """Raised after an event in which a trace set ``system.stop_training``; caught by ``Estimator._start``."""


def _eval_log_steps(request: Sequence[int], length: int | None) -> tuple[list[int], int]:
    """The evaluation batches that print a progress line, and the epoch's batch count (0 if unknown), as
    FastEstimator's ``System.eval_log_steps``: the request, else the first, a third, two thirds and the last batch."""
    total = length or 0
    if request:
        return list(request), total
    return ([1, total // 3, 2 * total // 3, total] if total else []), total


def _starts_epochs_without_state(trace: Trace) -> bool:
    """Whether ``trace`` is of a class of the user's own that has an ``on_epoch_begin`` and checkpoints nothing."""
    cls = type(trace)
    if is_fe_ray_class(cls) or cls.on_epoch_begin is Trace.on_epoch_begin:
        return False
    return not holds_state(trace.state_dict())


def _check_parts(pipeline: Any, network: Any) -> None:
    """Raise TypeError, naming the value, unless ``pipeline`` and ``network`` look like a Pipeline and a Network
    (swapped arguments, a model given as the network, or a None from a helper that returned nothing)."""
    if not (callable(pipeline) and callable(getattr(pipeline, "get_modes", None))
            and callable(getattr(pipeline, "get_ds_ids", None))):
        raise TypeError(f"Estimator's pipeline must be an fe.Pipeline (or an object with its get_modes / get_ds_ids / "
                        f"__call__ interface), got {type(pipeline).__name__}: {pipeline!r:.100}. Pass "
                        "fe.Estimator(pipeline=fe.Pipeline(...), network=fe.Network(...), epochs=...).")
    if not (callable(network) and callable(getattr(network, "get_loss_keys", None)) and hasattr(network, "models")):
        raise TypeError(f"Estimator's network must be an fe.Network (or an object with its get_loss_keys / models / "
                        f"__call__ interface), got {type(network).__name__}: {network!r:.100}. Wrap models in "
                        "fe.Network(ops=[ModelOp(...), ..., UpdateOp(...)]).")


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")


def _safe_len(loader: Any) -> int | None:
    try:
        return len(loader)
    except TypeError:
        return None


__all__ = ["Estimator"]


def record_history(path: bool | str | None) -> None:
    """FastEstimator's switch for its experiment-history database (``~/fastestimator_data/history.db``).

    fe_ray keeps no such database: every run's values are in the Summary ``fit()`` returns (and in a
    ``CSVLogger``'s file or the log). ``record_history(False)``, the usual call, is accepted silently; asking for a
    history prints a note once, so a FastEstimator script runs unchanged.

    Args:
        path: False to disable history tracking; True, None or a path to enable it (not available in fe_ray).
    """
    if path is False:
        return
    global _history_note_shown
    if not _history_note_shown:
        _history_note_shown = True
        logger.warning("fe_ray: record_history(%r) has no effect: fe_ray keeps no experiment-history database; use "
                       "the Summary fit() returns, a CSVLogger trace or the log instead.", path)


_history_note_shown = False


def _warn_if_nothing_saves(traces: Sequence[Any], run_modes: Sequence[str]) -> None:
    """Print FastEstimator's ``No ModelSaver Trace detected`` warning when training would save no model.

    Args:
        traces: The user's traces (Schedulers count with every value they may take).
        run_modes: The modes of this run.
    """
    from fe_ray.trace.io.best_model_saver import BestModelSaver
    from fe_ray.trace.io.model_saver import ModelSaver

    # A run without a saver loses its weights at the end: say so, as FastEstimator does before each fit.
    if not any(isinstance(trace, (ModelSaver, BestModelSaver)) for trace in get_current_items(traces, run_modes)):
        warn("No ModelSaver Trace detected. Models will not be saved.")
