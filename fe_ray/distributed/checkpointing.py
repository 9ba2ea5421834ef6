"""Background checkpoints of a distributed run: replica rank 0 writes them, the driver keeps track.

A save (``RestoreWizard`` with ``num_replicas``) sends rank 0 the System's snapshot *without* the models (counters,
op / trace / pipeline states, Summary, random states: small). Rank 0 copies its own models' weights and optimizer
states into buffers it reuses from save to save (several threads, no fresh memory) and returns: that copy is all
training waits for. Its writer thread (:class:`~fe_ray.io.background_save.BackgroundSaver`, the same one in-process
runs use) then writes and commits the checkpoint through a :class:`~fe_ray.io.checkpoint.CheckpointStore` while
training goes on, one write in flight at a time.

Why rank 0 and not a writer process of its own: the state lives in the replicas, and every other route moves all of
it between processes while training waits. The earlier design (pull rank 0's state into the driver, ``ray.put`` it,
a writer actor maps and writes it) blocked a one-replica run for 3.96 s per 1.2 GB save on the benchmark VM, 8
in-memory copies of the state; this one blocks it for 0.08-0.23 s (benchmarks/RESULTS.md). Data-parallel replicas
hold identical states, so one of them writes, as in DeepSpeed and torch's distributed checkpointing. The checkpoint
directory must therefore be reachable from rank 0's node (a shared filesystem or an fsspec URL such as ``s3://``),
as resuming needs anyway.

Failures:

* A write error (disk full, permissions) is raised on the driver, with its original type and the remote traceback,
  at the next save or at :meth:`ReplicaCheckpoints.finish` (RestoreWizard calls it at the end of ``fit``); the
  replicas keep running and the previous checkpoint stays the latest committed one.
* When the group is stopped while rank 0 writes (a peer died or hung, shutdown, recovery), the coordinator first
  lets the write finish, so recovery resumes from it.
* If rank 0 itself dies mid-write, that checkpoint was never committed (the store never offers it and deletes its
  leftovers on the next save); :class:`CheckpointWriterError` names the latest committed one. A death after the
  commit loses nothing: the newest checkpoint's manifest carries the write's counters, and it is returned as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fe_ray.distributed.errors import ReplicaDiedError

#: The rank whose replica writes the checkpoints (data-parallel replicas hold identical states).
WRITER_RANK = 0


class CheckpointWriterError(RuntimeError):
    """The replica writing a checkpoint died before committing it.

    The interrupted checkpoint was never committed: :class:`~fe_ray.io.checkpoint.CheckpointStore` ignores it and
    deletes its leftovers on the next save. ``latest`` holds the newest committed checkpoint of that root (or None).
    """

    def __init__(self, message: str, root: str, latest: str | None) -> None:
        super().__init__(message)
        self.root = root
        self.latest = latest

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.root, self.latest)


class ReplicaCheckpoints:
    """The driver's side of rank 0's background checkpoint writes (see the module docstring).

    Attributes:
        last_committed: URL of the newest checkpoint rank 0 reported committed (None before the first).
    """

    def __init__(self) -> None:
        self.last_committed: str | None = None
        self._pending: str | None = None  # the root of the write in flight on rank 0
        self._pending_info: dict[str, Any] = {}  # its manifest's info (the System's counters), to recognise it

    @property
    def pending(self) -> bool:
        """Whether rank 0 may still be writing a checkpoint."""
        return self._pending is not None

    def save(self, group: Any, root: str, payload: Mapping[str, Any], keep: int | None,
             info: Mapping[str, Any] | None, timeout_s: float) -> None:
        """Have rank 0 snapshot its models and commit them with ``payload`` under ``root`` in the background.

        Returns once rank 0 has copied its state (after waiting for its previous write).

        Raises:
            Exception: The previous write's error (this snapshot is then not taken), or the group's errors.
        """
        # Every replica's last update must have ended: one that failed leaves rank 0 blocked in its all-reduce.
        group.settle_steps(timeout_s)
        answer = group.call_one(WRITER_RANK, "save_checkpoint", args=(str(root), keep, dict(payload), dict(info or {})),
                                timeout_s=timeout_s, what="taking a checkpoint snapshot")
        self._pending = None  # the previous write is over either way
        self._settle(answer)
        self._pending, self._pending_info = str(root), dict(info or {})

    def finish(self, group: Any, timeout_s: float) -> str | None:
        """Wait for rank 0's write in flight; returns the URL of the newest committed checkpoint (None if none).

        Args:
            group: The running :class:`~fe_ray.distributed.supervisor.ReplicaGroup` (its rank 0 wrote).
            timeout_s: Longest to wait.

        Raises:
            CheckpointWriterError: Rank 0 died before committing the checkpoint (not after: the committed one is
                returned).
            Exception: The write's own error (e.g. an OSError naming the checkpoint and what is intact).
        """
        root, self._pending = self._pending, None
        if root is None:
            return self.last_committed
        try:
            answer = group.call_one(WRITER_RANK, "finish_checkpoint", timeout_s=timeout_s,
                                    what="finishing a checkpoint write")
        except ReplicaDiedError as err:
            from fe_ray.io.checkpoint import CheckpointStore

            try:
                store = CheckpointStore(root, keep=None)
                latest = store.latest()
                # Rank 0 may die after committing the write (a death seen only now): then nothing was lost.
                if (latest is not None and latest != self.last_committed and self._pending_info
                        and store.manifest(latest).get("info") == self._pending_info):
                    self.last_committed = latest
                    return latest
            except Exception:  # noqa: BLE001 - report the death either way
                latest = None
            raise CheckpointWriterError(
                f"Replica rank {WRITER_RANK}, which was writing a checkpoint under {root}, died before committing it. "
                f"That checkpoint will never be restored; the latest committed checkpoint is {latest}.",
                root, latest) from err
        return self._settle(answer)

    def _settle(self, answer: Mapping[str, Any]) -> str | None:
        error = answer.get("error")
        if error is not None:
            raise error.to_exception()
        if answer.get("committed"):
            self.last_committed = answer["committed"]
        return self.last_committed


__all__ = ["WRITER_RANK", "CheckpointWriterError", "ReplicaCheckpoints"]
