"""Trace: callbacks run by the Estimator around begin/epoch/batch/end events, and the Data they exchange."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.util import parse_modes, to_list, to_set

if TYPE_CHECKING:
    from fe_ray.summary.system import System


class Data(dict):
    """The dict a Trace event sees: the batch (and predictions) plus values traces write.

    Values written with :meth:`write_with_log` are also logged: printed by the Logger and recorded in the
    Summary right away (``history[mode][key][global_step]``), so a checkpoint taken later in the same event
    already contains them.

    Args:
        batch: Initial content (for batch events: the batch overlaid with the network's outputs).
        on_log: Called as ``on_log(key, value)`` for each logged value (the Estimator passes
            ``System.write_summary``).
    """

    def __init__(self, batch: Mapping[str, Any] | None = None,
                 on_log: Callable[[str, Any], None] | None = None) -> None:
        super().__init__(batch or {})
        self._log_keys: list[str] = []
        self._on_log = on_log

    def write_with_log(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` and log it (printed and recorded in the Summary)."""
        value = to_loggable(value)
        self[key] = value
        if key not in self._log_keys:
            self._log_keys.append(key)
        if self._on_log is not None:
            self._on_log(key, value)

    def write_without_log(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` for later traces of this event only."""
        self[key] = value

    def read_logs(self) -> dict[str, Any]:
        """The logged values of this event, in the order they were first written."""
        return {key: self[key] for key in self._log_keys if key in self}


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

    Subclasses keeping state across events override :meth:`state_dict` / :meth:`load_state_dict` so that a
    restored run continues exactly.
    """

    system: System
    checkpointed: bool = True
    #: Sort position among traces reading "*": 0 plain, 1 checkpointing traces, 2 loggers.
    sort_rank: int = 0

    def __init__(self, inputs: None | str | Iterable[str] = None, outputs: None | str | Iterable[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        self.inputs: list[str] = [str(key) for key in to_list(inputs)]
        self.outputs: list[str] = [str(key) for key in to_list(outputs)]
        self.mode: set[str] | None = parse_modes(to_set(mode)) if mode is not None else None
        self.ds_id: set[str] | None = to_set(ds_id) if ds_id is not None else None

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
        """The trace's mutable state (empty for stateless traces)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If a stateless trace is given state (the checkpoint is from another configuration).
        """
        if state:
            raise ValueError(f"{type(self).__name__} has no state but the checkpoint holds keys {sorted(state)}; "
                             "the checkpoint belongs to a different configuration.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(inputs={self.inputs}, outputs={self.outputs}, mode={self.mode})"


def sort_traces(traces: Sequence[Trace]) -> list[Trace]:
    """Order traces so that each runs after the traces producing its inputs (stable otherwise).

    Traces reading ``"*"`` go last, ordered by ``sort_rank`` (plain, then checkpointing, then logging).

    Raises:
        ValueError: If traces depend on each other in a cycle, naming them.
    """
    star = [trace for trace in traces if "*" in trace.inputs]
    pending = [trace for trace in traces if "*" not in trace.inputs]
    ordered: list[Trace] = []
    while pending:
        for trace in pending:
            upstream = {key for other in pending if other is not trace for key in other.outputs}
            if not set(trace.inputs) & upstream:
                ordered.append(trace)
                pending.remove(trace)
                break
        else:
            names = [f"{type(t).__name__}(inputs={t.inputs}, outputs={t.outputs})" for t in pending]
            raise ValueError(f"Traces depend on each other in a cycle: {names}. Break the cycle by renaming an "
                             "output key.")
    return ordered + sorted(star, key=lambda trace: trace.sort_rank)
