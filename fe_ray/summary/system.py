"""System: the training state shared by the Estimator and every Trace, with exact checkpoint capture/restore.

Checkpointing is split in two halves so the distributed layer can snapshot quickly and write in the background:

* :meth:`System.capture_state` takes an in-memory snapshot (numpy arrays and plain Python objects, deep-copied, no
  live references) and :meth:`System.restore_state` applies one;
* :func:`fe_ray.io.state_files.write_checkpoint` / :func:`~fe_ray.io.state_files.read_checkpoint` move a snapshot to
  and from a directory on any fsspec filesystem.

:meth:`System.save_state` / :meth:`System.load_state` chain the two halves.

The snapshot (the "payload") is a dict::

    {
      "system": {"mode", "ds_id", "exp_id", "global_step", "epoch_idx", "batch_idx", "stop_training",
                 "mode_finished", "experiment_time",                            # restored
                 "total_epochs", "log_steps", "train_steps_per_epoch", "eval_steps_per_epoch"},  # informative
      "config": {"models": [model names], "network": {"ops"|"slicers"|"pops": [class names]},
                 "traces": [class names], "datasets": {mode: {ds_id: class name}}},
      "models": {model_name: backend.get_state(model)},   # numpy-only nested dicts: weights + optimizer state
      "network": network.state_dict(),
      "pipeline": pipeline.state_dict() or None,
      "traces": [{"type": class name, "state": trace.state_dict()}, ...],
      "summary": Summary.state_dict(),
      "custom_graphs": {name: [Summary.state_dict(), ...]},
      "rng": {"python": ..., "numpy": ..., "torch": ..., "tf_global_generator": ..., "keras_seeds": ...
              (each only where that framework / generator / model is in use)},
      "epoch_results": {"logged": {...}, "unlogged": {...}} or None,  # the running epoch's on_ds_end results
    }
"""

from __future__ import annotations

import copy
import datetime
import numbers
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.io.snapshot import SnapshotBuffers
from fe_ray.io.state_files import CheckpointError, read_checkpoint, write_checkpoint
from fe_ray.schedule import get_current_items
from fe_ray.summary.state_parts import (
    auto_name_hint,
    capture_rng,
    epoch_results,
    layout_differences,
    missing_message,
    model_layout,
    model_name,
    restore_rng,
    snapshot_models,
)
from fe_ray.summary.summary import Summary
from fe_ray.util import to_list

#: Counters restored from a checkpoint (the run position).
RESTORED_COUNTERS = ("mode", "ds_id", "exp_id", "global_step", "epoch_idx", "batch_idx", "stop_training",
                     "mode_finished", "experiment_time")
#: The configuration fingerprint's entry for each model's optimizer classes and weight shapes.
LAYOUTS_KEY = "model_layouts"
#: Settings recorded for humans but taken from the current Estimator on restore (so a run can be extended).
RECORDED_SETTINGS = ("total_epochs", "log_steps", "train_steps_per_epoch", "eval_steps_per_epoch")


class MissingCheckpointError(CheckpointError, FileNotFoundError):
    """A file of the checkpoint to load does not exist. Both a :class:`~fe_ray.io.state_files.CheckpointError` and,
    as FastEstimator's ``System.load_state`` raises for a missing file, a ``FileNotFoundError``: code that starts
    afresh when there is nothing to resume from keeps working."""


class System:
    """Run-time state of an Estimator, shared with its Traces (``trace.system``).

    Args:
        network: The Network being trained (any object with ``models`` and ``state_dict``/``load_state_dict``).
        pipeline: The Pipeline feeding it (``data`` and optionally ``state_dict``/``load_state_dict``).
        traces: The Traces (or Schedulers of Traces) in use.
        mode: The current mode ('train', 'eval', 'test'), or None before training.
        ds_id: The current dataset id ('' when each mode has a single dataset).
        num_devices: How many replicas train in parallel (1 in-process).
        log_steps: Log every N training steps (0: only epoch summaries; None: no logging at all).
        total_epochs: How many epochs training runs for.
        train_steps_per_epoch: Cut or extend every training epoch to this many steps (None: one pass over the data).
        eval_steps_per_epoch: Same for evaluation.
        eval_log_steps: Evaluation batch indices after which a progress line is printed (kept as
            ``eval_log_steps_request``; default: the first, a third, two thirds and the last batch; ``[-1]``, an
            index no batch has: none).
        system_config: A description of the Estimator configuration, stored in the Summary.

    Attributes:
        exp_id: A random 64-bit id of this experiment.
        global_step: Training steps done so far (None before the first one).
        epoch_idx: The current epoch (from 1; 0 before training).
        batch_idx: The current batch within the epoch (from 1; None between epochs).
        stop_training: Set by a Trace to end the run right after the current event (as FastEstimator: no more
            batches, no ``on_epoch_end``, no evaluation); ``on_end`` still runs.
        mode_finished: True once the current mode's epoch has run all of its batches; a checkpoint taken then
            resumes with the next mode/epoch, otherwise within the current epoch after ``batch_idx``.
        summary: The history of logged values.
        custom_graphs: Extra Summaries that do not fit the main history.
    """

    def __init__(self, network: Any, pipeline: Any, traces: Sequence[Any] | None = None, mode: str | None = None,
                 ds_id: str = "", num_devices: int = 1, log_steps: int | None = None, total_epochs: int = 0,
                 train_steps_per_epoch: int | None = None, eval_steps_per_epoch: int | None = None,
                 eval_log_steps: Sequence[int] = (), system_config: Any = None) -> None:
        self.network = network
        self.pipeline = pipeline
        #: The user's traces, as FastEstimator's ``system.traces`` holds them.
        self.traces: list[Any] = to_list(traces)
        #: The traces a fit()/test() runs: the Estimator's own (TrainEssential, Logger, ...) around the user's. Their
        #: states are what checkpoints hold; empty before the first run.
        self.traces_in_use: list[Any] = []
        self.mode = mode
        self.ds_id = ds_id
        self.num_devices = num_devices
        self.log_steps = log_steps
        self.total_epochs = total_epochs
        self.train_steps_per_epoch = train_steps_per_epoch
        self.eval_steps_per_epoch = eval_steps_per_epoch
        self.eval_log_steps_request: list[int] = _step_list(eval_log_steps)
        #: (the evaluation batch indices that print a progress line, the batches in this evaluation epoch; 0 if
        #: unknown): set as each evaluation dataset starts, from the request or, without one, four evenly spaced.
        self.eval_log_steps: tuple[list[int], int] = ([], 0)
        self.batch_idx: int | None = None
        self.epoch_length: int | None = None  # batches in the current epoch when known (for progress bars)
        self.stop_training = False
        self.mode_finished = False
        self.experiment_time = ""
        self.summary = Summary(None, system_config)
        self.custom_graphs: dict[str, list[Summary]] = {}
        # The running epoch's Data, where PerDSTraces' on_ds_end results wait for on_epoch_end (set by the
        # Estimator): a checkpoint taken in a later dataset of the epoch keeps them for the resumed epoch's end.
        self.epoch_data: Any = None
        self.restored_epoch_results: dict[str, dict[str, Any]] | None = None
        self._initialize_state()

    def _initialize_state(self) -> None:
        self.global_step: int | None = None
        self.epoch_idx = 0
        # 64 random bits; uuid4 rather than time-based ids so parallel runs never collide.
        self.exp_id = int.from_bytes(uuid.uuid4().bytes[:8], byteorder="big", signed=True)

    @property
    def steps_per_epoch(self) -> int | None:
        """The cut/extend length of the current mode's epochs (None: one pass over the data)."""
        if self.mode == "train":
            return self.train_steps_per_epoch
        if self.mode == "eval":
            return self.eval_steps_per_epoch
        return None

    # ------------------------------------------------------------------ counters
    def update_global_step(self) -> None:
        """Count one more training step."""
        self.global_step = 1 if self.global_step is None else self.global_step + 1

    def update_batch_idx(self) -> None:
        """Count one more batch in the current epoch."""
        self.batch_idx = 1 if self.batch_idx is None else self.batch_idx + 1

    def reset(self, summary_name: str | None = None, system_config: Any = None) -> None:
        """Start a fresh training run: new experiment id, counters at zero, a new Summary."""
        self.experiment_time = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.mode = "train"
        self.ds_id = ""
        self._initialize_state()
        self.batch_idx = None
        self.stop_training = False
        self.mode_finished = False
        self.summary = Summary(summary_name, system_config)
        self.custom_graphs = {}
        self.epoch_data, self.restored_epoch_results = None, None

    def reset_for_test(self, summary_name: str | None = None) -> None:
        """Prepare for testing after (or without) training, keeping the training history."""
        self.experiment_time = self.experiment_time or datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.mode = "test"
        self.ds_id = ""
        if not self.stop_training:
            self.epoch_idx = self.total_epochs
        self.stop_training = False
        self.summary.name = summary_name or self.summary.name
        self.summary.history.pop("test", None)
        for graphs in self.custom_graphs.values():
            for graph in graphs:
                graph.history.pop("test", None)

    def write_summary(self, key: str, value: Any) -> None:
        """Record ``value`` under ``key`` for the current mode at the current global step."""
        self.summary.history[self.mode or "train"][key][self.global_step or 0] = value

    def add_graph(self, graph_name: str, graph: Summary | Sequence[Summary]) -> None:
        """Store extra Summaries (e.g. per-class curves) under ``graph_name``, replacing earlier ones."""
        self.custom_graphs[graph_name] = [graph] if isinstance(graph, Summary) else list(graph)

    # ------------------------------------------------------------------ distributed hooks
    def sync_models(self) -> None:
        """Make the driver-side ``network.models`` current (a distributed network pulls replica weights)."""
        pull = getattr(self.network, "sync_models_to_driver", None)
        if pull is not None:
            pull()

    def push_models(self) -> None:
        """Propagate driver-side weight changes to where training runs (a distributed network's replicas)."""
        push = getattr(self.network, "load_models_from_driver", None)
        if push is not None:
            push()

    # ------------------------------------------------------------------ checkpoint: memory half
    def config_fingerprint(self) -> dict[str, Any]:
        """What must match between a checkpoint and the objects it is restored into."""
        network_state = self.network.state_dict()
        datasets = {mode: {str(ds_id): type(ds).__name__ for ds_id, ds in by_id.items()}
                    for mode, by_id in getattr(self.pipeline, "data", {}).items()}
        return {"models": [model_name(model) for model in self.network.models],
                "network": {group: [entry["type"] for entry in entries] for group, entries in network_state.items()},
                "traces": [type(trace).__name__ for trace in self._checkpointed_traces()],
                "datasets": datasets,
                LAYOUTS_KEY: {model_name(model): model_layout(model) for model in self.network.models}}

    def _checkpointed_traces(self) -> list[Any]:
        # Output-only traces (Logger, ProgressBar) opt out so that changing the logging setup keeps checkpoints valid.
        return [trace for trace in get_current_items(self.traces_in_use or self.traces)
                if getattr(trace, "checkpointed", True)]

    def capture_state(self, copy_models: bool = True, buffers: SnapshotBuffers | None = None,
                      models: bool = True) -> dict[str, Any]:
        """An in-memory, self-contained snapshot of the whole training state (see the module docstring).

        Args:
            copy_models: True (default) copies everything, so training may continue (and the snapshot be written
                in another thread) right away. False lets model weights and optimizer state be views of the live
                tensors, which saves one copy of the largest part of the state: only for a consumer that is done
                with the snapshot before training continues (a synchronous write).
            buffers: With ``copy_models``, copy model states that would otherwise be views into these reused
                buffers (several threads, no fresh memory); the previous snapshot taken into them changes.
            models: False leaves the model states out (no ``"models"`` key, and a distributed network's replicas
                are not asked for them): for a distributed save, where replica rank 0 adds its own.
        """
        if models:
            self.sync_models()
        counters = {key: getattr(self, key) for key in RESTORED_COUNTERS + RECORDED_SETTINGS}
        model_states = {"models": snapshot_models(self.network.models, copy_models, buffers)} if models else {}
        pipeline_state = self.pipeline.state_dict() if hasattr(self.pipeline, "state_dict") else None
        objects = {
            "network": self.network.state_dict(),
            "pipeline": pipeline_state,
            "traces": [{"type": type(trace).__name__, "state": trace.state_dict()}
                       for trace in self._checkpointed_traces()],
            "summary": self.summary.state_dict(),
            "custom_graphs": {name: [graph.state_dict() for graph in graphs]
                              for name, graphs in self.custom_graphs.items()},
            "rng": capture_rng(self.network),
            "epoch_results": epoch_results(self.epoch_data),
        }
        return {"system": counters, "config": self.config_fingerprint(), **model_states, **copy.deepcopy(objects)}

    def restore_state(self, payload: Mapping[str, Any], source: str = "the checkpoint", copy: bool = True) -> None:
        """Apply a :meth:`capture_state` snapshot to this System and the objects it references.

        Args:
            payload: The snapshot.
            source: Where it came from, used in error messages.
            copy: False lets the optimizers adopt the payload's arrays instead of copying them (less time and
                memory); only for a payload nobody uses afterwards, such as one just read from disk.

        Raises:
            ValueError: If the snapshot was taken with a different configuration (other models, ops, traces or
                datasets); nothing is modified in that case. The message names what differs.
        """
        self.check_config(payload.get("config", {}), source)
        models = payload["models"]
        for model in self.network.models:
            get_backend(model).set_state(model, models[model_name(model)], copy=copy)
        self.network.load_state_dict(payload["network"])
        if payload.get("pipeline") is not None:
            self.pipeline.load_state_dict(payload["pipeline"])
        for trace, entry in zip(self._checkpointed_traces(), payload["traces"]):
            trace.load_state_dict(entry["state"])
        self.summary.load_state_dict(payload["summary"])
        self.custom_graphs = {}
        for name, graphs in payload.get("custom_graphs", {}).items():
            restored = []
            for graph_state in graphs:
                graph = Summary(None)
                graph.load_state_dict(graph_state)
                restored.append(graph)
            self.custom_graphs[name] = restored
        for key in RESTORED_COUNTERS:
            if key in payload["system"]:
                setattr(self, key, payload["system"][key])
        restore_rng(self.network, payload.get("rng") or {})
        # A checkpoint written before they were kept has none: the resumed epoch then ends without them.
        self.restored_epoch_results = payload.get("epoch_results")
        self.push_models()

    def check_config(self, saved: Mapping[str, Any], source: str = "the checkpoint") -> None:
        """Raise a ValueError naming every part of the configuration that differs from ``saved``."""
        current = self.config_fingerprint()
        differences = [f"{key}: checkpoint has {saved.get(key)!r}, this run has {current.get(key)!r}"
                       for key in sorted(set(saved) | set(current))
                       if key != LAYOUTS_KEY and saved.get(key) != current.get(key)]
        # A checkpoint written before they were recorded has no layouts: nothing to compare them with.
        differences += layout_differences(saved.get(LAYOUTS_KEY, {}), current[LAYOUTS_KEY])
        if differences:
            raise ValueError(f"Cannot restore {source}: it was written by a different configuration. "
                             + "; ".join(differences)
                             + ". Restore into the same models, ops, traces and datasets, or use a new directory."
                             + auto_name_hint(saved.get("models"), current.get("models")))

    def state_dict(self) -> dict[str, Any]:
        """Alias of :meth:`capture_state`, for symmetry with every other stateful fe_ray object."""
        return self.capture_state()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Alias of :meth:`restore_state`."""
        self.restore_state(state)

    # ------------------------------------------------------------------ checkpoint: disk half
    def save_state(self, save_dir: str) -> None:
        """Capture the state and write it into ``save_dir`` (a path or fsspec URL)."""
        write_checkpoint(self.capture_state(copy_models=False), save_dir)  # written before training goes on

    def load_state(self, load_dir: str) -> None:
        """Read a checkpoint written by :meth:`save_state` and restore it. Only load checkpoints you wrote.

        Raises:
            MissingCheckpointError: If a file is missing (naming it); also a FileNotFoundError.
            fe_ray.io.state_files.CheckpointError: If a file is corrupt (naming it).
            ValueError: If the checkpoint belongs to a different configuration.
        """
        try:
            payload = read_checkpoint(load_dir)
        except CheckpointError as err:
            if isinstance(err.__cause__, FileNotFoundError):
                raise MissingCheckpointError(missing_message(load_dir, str(err))) from err
            raise
        # The payload read from disk is ours alone: the optimizers may keep its arrays (no second copy in memory).
        self.restore_state(payload, source=f"checkpoint {load_dir}", copy=False)


def _step_list(steps: Any) -> list[int]:
    """``eval_log_steps`` as a list of batch indices (an int or a sequence of them; None or empty: the default).

    As in FastEstimator, an entry matching no batch (below 1, or past the epoch's end) is accepted and prints
    nothing: ``eval_log_steps=[-1]`` is FastEstimator's way to silence evaluation progress lines.

    Raises:
        TypeError: If it, or an entry, is not an int (a "1,2" string, a float).
    """
    if steps is None:
        return []
    entries = list(steps) if hasattr(steps, "__iter__") and not isinstance(steps, (str, bytes)) else [steps]
    for step in entries:
        if not isinstance(step, numbers.Integral) or isinstance(step, bool):
            raise TypeError(f"eval_log_steps must be a sequence of batch indices (ints from 1), got {steps!r}: entry "
                            f"{step!r} is a {type(step).__name__}. Pass e.g. eval_log_steps=[1, 50, 100], or [-1] "
                            "for no evaluation progress lines.")
    return [int(step) for step in entries]
