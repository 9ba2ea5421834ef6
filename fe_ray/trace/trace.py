"""Trace: callbacks run by the Estimator around begin/epoch/batch/end events, and the Data they exchange."""

from __future__ import annotations

from collections import ChainMap, deque
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.trace.freq import Freq, parse_freq  # noqa: F401 - FastEstimator's module path for them
from fe_ray.util import parse_ds_ids, parse_modes, to_list, to_set
from fe_ray.util.fe_state import checkpoint_getstate, setstate_from_checkpoint, uses_getstate
from fe_ray.util.lazy import lazy_attributes

if TYPE_CHECKING:
    from fe_ray.summary.system import System


class Data(ChainMap):
    """What a Trace event sees, laid out as FastEstimator's ``Data``: three layers read in this order.

    * ``maps[0]``, the logged values: an assignment ``data[key] = value`` or :meth:`write_with_log` stores the value
      as given (a tensor stays a tensor for later traces) and logs it: printed by the Logger and recorded in the
      Summary right away (``history[mode][key][global_step]``, tensors as numpy), so a checkpoint taken later in the
      same event already contains it.
    * ``maps[1]``, the event's batch: in ``on_batch_begin`` the very dict the network runs next, so a value written
      there with :meth:`write_without_log` reaches the step (replacing a key, or adding one the ops read); in
      ``on_batch_end`` the step's outputs over the batch.
    * ``maps[2]``, per-instance values from :meth:`write_per_instance_log`, for detailed loggers.

    Args:
        batch_data: The dict for ``maps[1]`` (used as is, not copied); FastEstimator's argument name.
        on_log: Called as ``on_log(key, value)`` for each logged value, tensors converted to numpy (the Estimator
            passes ``System.write_summary``).
    """

    def __init__(self, batch_data: MutableMapping[str, Any] | None = None, *,
                 on_log: Callable[[str, Any], None] | None = None) -> None:
        super().__init__({}, batch_data if batch_data is not None else {}, {})
        self.per_instance_enabled = True  # a trace may turn it off to keep per-instance values out
        self._on_log = on_log

    def __setitem__(self, key: str, value: Any) -> None:
        self.maps[0][key] = value
        if self._on_log is not None:
            self._on_log(key, to_loggable(value))

    def write_with_log(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` and log it (printed and recorded in the Summary)."""
        self[key] = value

    def write_without_log(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` in the batch layer: later traces of this event read it and, in
        ``on_batch_begin``, the network's step does."""
        self.maps[1][key] = value

    def write_per_instance_log(self, key: str, value: Any) -> None:
        """Store per-sample ``value`` (one entry per sample of the batch) for detailed loggers, unless
        ``per_instance_enabled`` is False."""
        if self.per_instance_enabled:
            self.maps[2][key] = value

    def read_logs(self) -> MutableMapping[str, Any]:
        """The logged values of this event, in the order they were first written (as written, not converted)."""
        return self.maps[0]

    def read_per_instance_logs(self) -> MutableMapping[str, Any]:
        """The per-instance values of this event."""
        return self.maps[2]



class DSData(Data):
    """A view of ``data`` whose writes go to ``<key>|<ds_id>`` (FastEstimator's per-dataset keys, as
    :class:`PerDSTrace` traces log them): the same three layers and logging as ``data``, reads unchanged.

    Args:
        ds_id: The dataset id the written keys name.
        data: The event's :class:`Data`.
    """

    def __init__(self, ds_id: str, data: Data) -> None:  # shares data's maps, so no ChainMap.__init__
        self.maps = data.maps
        self.ds_id = ds_id
        self.per_instance_enabled = data.per_instance_enabled
        self._on_log = data._on_log

    def write_with_log(self, key: str, value: Any) -> None:
        super().write_with_log(f"{key}|{self.ds_id}", value)

    def write_without_log(self, key: str, value: Any) -> None:
        super().write_without_log(f"{key}|{self.ds_id}", value)

    def write_per_instance_log(self, key: str, value: Any) -> None:
        super().write_per_instance_log(f"{key}|{self.ds_id}", value)

def to_loggable(value: Any) -> Any:
    """Convert tensors to numpy; 0-d arrays become numpy scalars (picklable, printable, comparable)."""
    if hasattr(value, "detach") or type(value).__module__.startswith("tensorflow"):
        from fe_ray.backend import to_number

        value = to_number(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


class Trace:
    """Base class of Estimator callbacks.

    The Estimator calls, in order: ``on_begin`` once; per epoch and mode ``on_epoch_begin``, then per batch
    ``on_batch_begin`` / ``on_batch_end``, then ``on_epoch_end``; finally ``on_end`` (or, when fit fails,
    ``on_abort``). Within an event, traces run
    sorted so that a trace reading a key runs after the trace writing it; traces reading ``"*"`` run after all
    others, then the checkpointing trace, then the Logger.

    Args:
        inputs: Keys this trace reads (``"*"``: everything the other traces write).
        outputs: Keys this trace writes.
        mode: Mode(s) in which the trace runs ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) in which the trace runs; None for all; '!id' to exclude.

    Attributes:
        system: The Estimator's :class:`~fe_ray.summary.system.System`, set before ``on_begin``.
        checkpointed: Whether the trace's state is part of checkpoints (False only for output-only traces).
        fe_monitor_names: Keys the Estimator's essential traces should monitor for this trace (log at training log
            steps, average over evaluation and test epochs) although the user did not list them in
            ``monitor_names``: e.g. a BestModelSaver's metric that is a network output but not a loss. Keys another
            trace writes are left to that trace.

    Subclasses keeping state across events override :meth:`state_dict` / :meth:`load_state_dict` so that a
    restored run continues exactly.
    """

    system: System
    checkpointed: bool = True
    #: Whether ``on_batch_begin`` may change the batch (replace, add or edit values in place) before the step; None
    #: decides by whether the class overrides ``on_batch_begin``. A distributed network puts a batch's slices
    #: ahead of its step only when no trace may change it.
    changes_batch: bool | None = None
    #: Sort position among traces reading "*": 0 plain, 1 checkpointing traces, 2 loggers.
    sort_rank: int = 0

    def __init__(self, inputs: None | str | Iterable[str] = None, outputs: None | str | Iterable[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        self.inputs: list[str] = [str(key) for key in to_list(inputs)]
        self.outputs: list[str] = [str(key) for key in to_list(outputs)]
        # Empty sets for "every mode / dataset", as FastEstimator keeps them (a trace may iterate or union them).
        self.mode: set[str] = parse_modes(to_set(mode)) if mode is not None else set()
        self.ds_id: set[str] = parse_ds_ids(ds_id) or set()
        self.fe_monitor_names: set[str] = set()

    def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
        """The keys this trace writes in a mode whose datasets are ``ds_ids``: :attr:`outputs`, plus the
        ``<key>|<ds_id>`` keys of a trace that also logs per dataset (such as :class:`Accuracy`)."""
        return list(self.outputs)

    def on_begin(self, data: Data) -> None:
        """Runs once when fit()/test() starts."""

    def on_epoch_begin(self, data: Data) -> None:
        """Runs at the start of each epoch of each mode."""

    def on_batch_begin(self, data: Data) -> None:
        """Runs before each batch goes through the network (``data`` holds the batch)."""

    def on_batch_end(self, data: Data) -> None:
        """Runs after each batch (``data`` holds the batch and the network's outputs)."""

    def on_epoch_end(self, data: Data) -> None:
        """Runs at the end of each epoch of each mode."""

    def on_end(self, data: Data) -> None:
        """Runs once when fit()/test() finishes (not after an exception)."""

    def on_abort(self, error: BaseException) -> None:
        """Runs once when fit() is about to raise ``error`` instead of finishing: finish what must not be lost
        (e.g. a checkpoint still being written). An fe_ray addition; FastEstimator has no such event."""

    def state_dict(self) -> dict[str, Any]:
        """The trace's mutable state (empty for stateless traces; a FastEstimator-style ``__getstate__`` of the trace's
        own class gives it, see :mod:`fe_ray.util.fe_state`)."""
        state = checkpoint_getstate(self)
        return {} if state is None else state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If a stateless trace is given state (the checkpoint is from another configuration).
        """
        if uses_getstate(self):
            setstate_from_checkpoint(self, dict(state))
        elif state:
            raise ValueError(f"{type(self).__name__} has no state but the checkpoint holds keys {sorted(state)}; "
                             "the checkpoint belongs to a different configuration.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(inputs={self.inputs}, outputs={self.outputs}, mode={self.mode})"


class PerDSTrace(Trace):
    """A Trace that also hears when each dataset of an epoch starts and ends (FastEstimator's ``PerDSTrace``).

    In an epoch whose Pipeline has several datasets (``{"ds1": ..., "ds2": ...}``), the Estimator runs them one
    after the other; around each it calls :meth:`on_ds_begin` and :meth:`on_ds_end` of the PerDSTraces active for
    that dataset (``system.ds_id`` names it). Typical use: reset per-dataset accumulators in ``on_ds_begin`` and
    write ``<key>|<ds_id>`` results in ``on_ds_end``.

    A run resumed from a checkpoint taken inside a dataset does not call ``on_ds_begin`` for that dataset again (its
    state comes from the checkpoint, through :meth:`~Trace.state_dict`), as ``on_epoch_begin`` is not called again.
    """

    def on_ds_begin(self, data: Data) -> None:
        """Runs before the first batch of each dataset. Values written to ``data`` are not logged."""

    def on_ds_end(self, data: Data) -> None:
        """Runs after the last batch of each dataset. ``data`` is the epoch's: values written here are logged, and
        ``on_epoch_end`` sees them (the Logger prints them with the epoch's other results)."""


def may_change_batches(traces: Iterable[Trace]) -> bool:
    """Whether any of ``traces`` may change a batch in ``on_batch_begin`` (see :attr:`Trace.changes_batch`)."""
    return any(trace.changes_batch if trace.changes_batch is not None
               else type(trace).on_batch_begin is not Trace.on_batch_begin for trace in traces)


def sort_traces(traces: Sequence[Trace]) -> list[Trace]:
    """Order traces so that each runs after the traces producing its inputs, in FastEstimator's order.

    A first pass keeps, in the given order, every trace whose inputs no trace still to be placed writes, and
    defers the others; deferred traces then follow, each as soon as its producers are placed (so a consumer runs
    after independent traces listed after it, as in FastEstimator). Traces reading ``"*"`` go last, ordered by
    ``sort_rank`` (plain, then checkpointing, then logging).

    Raises:
        ValueError: If traces depend on each other in a cycle, naming them.
    """
    star = [trace for trace in traces if "*" in trace.inputs]
    unplaced = [trace for trace in traces if "*" not in trace.inputs]

    def ready(trace: Trace) -> bool:
        return not any(trace_writes(other, key) for other in unplaced if other is not trace for key in trace.inputs)

    ordered: list[Trace] = []
    deferred: deque[Trace] = deque()
    for trace in list(unplaced):
        if ready(trace):
            ordered.append(trace)
            unplaced.remove(trace)
        else:
            deferred.append(trace)
    stalled = 0  # deferred traces looked at since one was last placed
    while deferred:
        trace = deferred.popleft()
        if ready(trace):
            ordered.append(trace)
            unplaced.remove(trace)
            stalled = 0
            continue
        deferred.append(trace)
        stalled += 1
        if stalled >= len(deferred):  # every deferred trace waits on another
            names = [f"{type(t).__name__}(inputs={t.inputs}, outputs={t.outputs})" for t in deferred]
            raise ValueError(f"Traces depend on each other in a cycle: {names}. Break the cycle by renaming an "
                             "output key.")
    return ordered + sorted(star, key=lambda trace: trace.sort_rank)


def per_ds_keys(keys: Iterable[str], ds_ids: None | str | Iterable[str]) -> list[str]:
    """The ``<key>|<ds_id>`` keys a trace that also logs per dataset writes for ``ds_ids`` (None: no datasets; the
    unnamed dataset ``''`` has none: its values are the overall ones)."""
    listed = [] if ds_ids is None else [ds_ids] if isinstance(ds_ids, str) else list(ds_ids)
    return [f"{key}|{ds_id}" for ds_id in listed if ds_id for key in keys]


def trace_outputs(trace: Trace, ds_ids: None | str | Iterable[str] = None) -> list[str]:
    """The keys ``trace`` writes in a mode with datasets ``ds_ids`` (:meth:`Trace.get_outputs`; a duck-typed trace
    without it writes its ``outputs``)."""
    get_outputs = getattr(trace, "get_outputs", None)
    return list(get_outputs(ds_ids)) if get_outputs is not None else list(trace.outputs)


def trace_writes(trace: Trace, key: str) -> bool:
    """Whether ``trace`` writes ``key``, a per-dataset key ``<key>|<ds_id>`` included."""
    if key in trace.outputs:
        return True
    _, sep, ds_id = key.rpartition("|")
    return bool(sep) and key in trace_outputs(trace, [ds_id])


# FastEstimator defines its Estimator-added traces in this module; fe_ray keeps them in modules of their own that
# import this one, so they load on first access here.
__getattr__, __dir__ = lazy_attributes(__name__, {
    "TrainEssential": "fe_ray.trace.essential:TrainEssential", "EvalEssential": "fe_ray.trace.essential:EvalEssential",
    "TestEssential": "fe_ray.trace.essential:TestEssential", "Logger": "fe_ray.trace.logger:Logger"})
