"""Background checkpoint writes: one writer thread, training stops only for the in-memory snapshot.

RestoreWizard uses it in the training process for runs without Ray (``num_replicas`` unset), and replica rank 0 uses
it for distributed runs (:mod:`fe_ray.distributed.checkpointing`). A save takes a snapshot of the System into
:class:`~fe_ray.io.snapshot.SnapshotBuffers` (reused between saves, copied by several threads) and hands it to one
writer thread, which writes it through a :class:`~fe_ray.io.checkpoint.CheckpointStore` while training continues. At
most one write is in flight: the next save first waits for it, which bounds the extra memory to one snapshot and
lets that snapshot's buffers be reused.

A failed write raises its error at the next save or at :meth:`wait` (RestoreWizard calls it at the end of training);
a write cut short by a crash has no manifest, so the store never offers it for a restore. The writer thread is not a
daemon, so a process that ends (normally or by an exception in training) finishes the write in flight before it
exits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.snapshot import SnapshotBuffers
from fe_ray.io.state_files import write_checkpoint
from fe_ray.util import lower_priority

logger = logging.getLogger(__name__)

#: Scheduling priority of the writer thread (and the I/O thread it starts): it shares the cores with training, and
#: a lower priority lets it use idle time first instead of preempting an intra-op thread (which stalls a step).
WRITER_NICENESS = 10
#: A save that had to wait this long for the previous write logs a warning (checkpoints outpace the disk).
SLOW_WAIT_S = 1.0


class BackgroundSaver:
    """Writes System snapshots as checkpoints from one background thread.

    Args:
        timeout_s: Longest :meth:`wait` (and a save waiting for the previous write) blocks.
        copy_threads: Threads copying a snapshot (None: see :class:`~fe_ray.io.snapshot.SnapshotBuffers`).

    Raises:
        ValueError: If ``timeout_s`` is not positive.
    """

    def __init__(self, timeout_s: float = 600.0, copy_threads: int | None = None) -> None:
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
            raise ValueError(f"BackgroundSaver timeout_s must be a positive number of seconds, got {timeout_s!r}.")
        self.timeout_s = float(timeout_s)
        self.buffers = SnapshotBuffers(copy_threads)
        self.last_committed: str | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._pending: Future[str] | None = None

    @property
    def busy(self) -> bool:
        """Whether a write is still in flight."""
        return self._pending is not None and not self._pending.done()

    def save(self, store: CheckpointStore, capture: Callable[[SnapshotBuffers], Mapping[str, Any]],
             info: Mapping[str, Any] | None = None) -> Future[str]:
        """Wait for the previous write, take a snapshot with ``capture(buffers)`` and write it in the background.

        Args:
            store: Where the checkpoint is committed.
            capture: Takes the snapshot (e.g. ``lambda b: system.capture_state(buffers=b)``); it may copy into the
                given buffers, which stay untouched until this write has finished.
            info: Extra manifest entries.

        Returns:
            A future resolving to the committed checkpoint's URL.

        Raises:
            TimeoutError: The previous write took longer than ``timeout_s``.
            Exception: The error of the previous write, if it failed (this save is then not taken).
        """
        started = time.perf_counter()
        self.wait()
        waited = time.perf_counter() - started
        if waited > SLOW_WAIT_S:
            logger.warning("fe_ray: a checkpoint save waited %.1fs for the previous one to be written; checkpoints "
                           "are taken faster than the storage writes them (save less often).", waited)
        payload = capture(self.buffers)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="fe_ray-checkpoint-writer",
                                                initializer=lower_priority, initargs=(WRITER_NICENESS,))
        self._pending = self._executor.submit(
            store.save, lambda directory: write_checkpoint(payload, directory), info=dict(info or {}))
        return self._pending

    def wait(self) -> str | None:
        """Wait for the write in flight; returns the URL of the last committed checkpoint (None if none).

        Raises:
            TimeoutError: If the write takes longer than ``timeout_s`` (it goes on; call again to keep waiting).
            Exception: The write's own error (raised once; the next save starts clean).
        """
        pending = self._pending
        if pending is None:
            return self.last_committed
        try:
            url = pending.result(timeout=self.timeout_s)
        except FutureTimeout:
            raise TimeoutError(f"A background checkpoint write did not finish within {self.timeout_s:g}s.") from None
        finally:
            if pending.done():
                self._pending = None
        self.last_committed = url
        return url

    def close(self) -> None:
        """Finish the write in flight (its error is logged, not raised), then free the thread and buffers."""
        try:
            self.wait()
        except Exception as err:  # noqa: BLE001 - closing anyway; the store ignores an uncommitted write
            logger.warning("fe_ray: a background checkpoint write failed: %s", err)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self.buffers.clear()

    def __getstate__(self) -> dict[str, Any]:
        # The thread, the write in flight and the buffers belong to this process: a copy starts idle.
        return {"timeout_s": self.timeout_s, "copy_threads": self.buffers.threads,
                "last_committed": self.last_committed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["timeout_s"], state["copy_threads"])  # type: ignore[misc]
        self.last_committed = state["last_committed"]


_SAVERS: dict[str, BackgroundSaver] = {}
_SAVERS_LOCK = threading.Lock()


def saver_for(root: str) -> BackgroundSaver:
    """The process's one :class:`BackgroundSaver` for the checkpoint root ``root``.

    Shared so that whoever reads that root next in this process (a new RestoreWizard resuming after an exception)
    can first wait for a write still in flight from an earlier one.
    """
    with _SAVERS_LOCK:
        saver = _SAVERS.get(root)
        if saver is None:
            saver = _SAVERS[root] = BackgroundSaver()
        return saver


__all__ = ["BackgroundSaver", "saver_for"]
