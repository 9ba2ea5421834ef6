"""Background checkpoint writing: a small Ray actor that commits checkpoints while training goes on.

Saving a checkpoint has two halves (see :class:`fe_ray.summary.system.System`): taking the in-memory snapshot
(``capture_state``: rank 0's weights and optimizer state, pulled to the driver, plus op / trace / pipeline states)
and writing it to storage. Only the first half must stop training. :class:`AsyncCheckpointer` puts the snapshot
into Ray's object store (one copy) and hands it to a :class:`CheckpointWriter` actor, which writes it through a
:class:`~fe_ray.io.checkpoint.CheckpointStore` (numbered checkpoints, committed by a manifest). The actor runs one
call at a time, so checkpoints commit in the order they were taken; :meth:`AsyncCheckpointer.flush` waits for all
of them (before recovery looks for the latest checkpoint, and at the end of training). A write interrupted by a
crash leaves no manifest, so the store never offers it for a restore.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fe_ray.util import lower_priority

logger = logging.getLogger(__name__)


class CheckpointWriterError(RuntimeError):
    """The background checkpoint writer died (killed, out of memory) before committing a checkpoint.

    The interrupted checkpoint was never committed: :class:`~fe_ray.io.checkpoint.CheckpointStore` ignores it and
    deletes its leftovers on the next save. ``latest`` holds the newest committed checkpoint of that root (or None).
    """

    def __init__(self, message: str, root: str, latest: str | None) -> None:
        super().__init__(message)
        self.root = root
        self.latest = latest


class CheckpointWriter:
    """Writes checkpoint payloads into CheckpointStores (a plain class, made remote by :class:`AsyncCheckpointer`)."""

    def __init__(self, niceness: int = 10) -> None:
        self._stores: dict[tuple[str, int | None], Any] = {}
        lower_priority(niceness)  # it reserves no CPU: training threads go first

    def save(self, root: str, keep: int | None, payload: Mapping[str, Any], info: Mapping[str, Any] | None) -> str:
        """Write ``payload`` as the next checkpoint of the store at ``root``; returns its URL once committed."""
        from fe_ray.io.checkpoint import CheckpointStore
        from fe_ray.io.state_files import write_checkpoint

        key = (root, keep)
        if key not in self._stores:
            self._stores[key] = CheckpointStore(root, keep=keep)
        return self._stores[key].save(lambda directory: write_checkpoint(payload, directory), info=dict(info or {}))

    def ping(self) -> bool:
        """Liveness check."""
        return True


class AsyncCheckpointer:
    """Driver-side handle of the :class:`CheckpointWriter` actor (started on first use, 0 CPUs reserved).

    Args:
        timeout_s: Longest :meth:`flush` waits for pending writes.
    """

    def __init__(self, timeout_s: float = 600.0) -> None:
        self.timeout_s = timeout_s
        self._actor: Any = None
        self._pending: list[Any] = []
        self._roots: dict[Any, str] = {}
        self.last_committed: str | None = None

    def save(self, root: str, payload: Mapping[str, Any], keep: int | None = 2,
             info: Mapping[str, Any] | None = None) -> Any:
        """Queue ``payload`` for writing as the next checkpoint under ``root``; returns at once.

        The payload is copied into the object store before this returns, so the caller may keep mutating its own
        objects (``payload`` may even hold views of live weights: ``System.capture_state(copy_models=False)``).

        Returns:
            An ObjectRef resolving to the committed checkpoint's URL.
        """
        import ray

        from fe_ray.distributed import cluster

        if self._actor is None:
            cluster.ensure_ray()
            self._actor = ray.remote(CheckpointWriter).options(num_cpus=0, max_restarts=0).remote()
        self._collect_done()
        ref = self._actor.save.remote(str(root), keep, ray.put(dict(payload)), dict(info or {}))
        self._pending.append(ref)
        self._roots[ref] = str(root)
        return ref

    def _get(self, ref: Any) -> str:
        """The committed URL of one write; a dead writer becomes a CheckpointWriterError (and a fresh writer)."""
        import ray

        root = self._roots.pop(ref, "?")
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as err:
            from fe_ray.io.checkpoint import CheckpointStore

            self._actor = None  # the next save starts a fresh writer
            self._pending = []
            try:
                latest = CheckpointStore(root, keep=None).latest()
            except Exception:  # noqa: BLE001 - report the death either way
                latest = None
            raise CheckpointWriterError(
                f"The background checkpoint writer died while writing a checkpoint under {root} ({_first_line(err)})."
                f" That checkpoint was not committed and will never be restored; the latest committed checkpoint is "
                f"{latest}. Training state in memory is unaffected: save again (a fresh writer starts), or resume "
                "from the latest checkpoint.", root, latest) from None

    def _collect_done(self) -> None:
        """Drop finished writes from the queue, remembering the last URL (a failed write raises here)."""
        while self._pending and _done(self._pending[0]):
            self.last_committed = self._get(self._pending.pop(0))

    def flush(self) -> str | None:
        """Wait until every queued checkpoint is committed; returns the URL of the last one (None if none).

        Raises:
            TimeoutError: If writes take longer than ``timeout_s``.
            Exception: The error of a failed write.
        """
        import ray

        if not self._pending:
            return self.last_committed
        pending, self._pending = self._pending, []
        ready, not_ready = ray.wait(pending, num_returns=len(pending), timeout=self.timeout_s)
        if not_ready:
            self._pending = not_ready
            raise TimeoutError(f"{len(not_ready)} checkpoint write(s) did not finish within {self.timeout_s:g}s.")
        for ref in pending:
            self.last_committed = self._get(ref)
        return self.last_committed

    def shutdown(self) -> None:
        """Finish pending writes (best effort) and stop the writer actor."""
        import ray

        if self._actor is None or not ray.is_initialized():  # after ray.shutdown() the actor is gone already
            self._actor = None
            return
        try:
            self.flush()
        except Exception as err:  # noqa: BLE001 - shutting down anyway; the store ignores uncommitted writes
            logger.warning("fe_ray: a background checkpoint write failed during shutdown: %s", err)
        from fe_ray.distributed.cluster import kill_actor

        kill_actor(self._actor)
        self._actor = None


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _done(ref: Any) -> bool:
    import ray

    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)


__all__ = ["AsyncCheckpointer", "CheckpointWriter", "CheckpointWriterError"]
