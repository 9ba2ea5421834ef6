"""RestoreWizard: periodic checkpoints of the whole training state, and automatic resume from the latest one."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fe_ray.io.background_save import saver_for
from fe_ray.io.checkpoint import CheckpointStore, is_process_local, normalize_location
from fe_ray.io.snapshot import SnapshotTooLargeError
from fe_ray.io.state_files import write_checkpoint
from fe_ray.trace.trace import Data, Trace

logger = logging.getLogger(__name__)


class RestoreWizard(Trace):
    """Checkpoint training into ``directory`` and, when started again with the same directory, resume exactly.

    A checkpoint holds everything a run depends on: weights and optimizer states, op / trace / pipeline states (the
    data position, so a mid-epoch resume sees exactly the remaining samples), the Summary, RNG states and the
    counters. It is taken after the last mode of every ``frequency``-th epoch (after evaluation when there is
    evaluation data), and with ``steps=N`` also after every N-th training step. At ``on_begin`` the newest
    committed checkpoint (if any) is restored and training continues where it stopped.

    Checkpoints go through a :class:`~fe_ray.io.checkpoint.CheckpointStore`, so a run killed while writing
    leaves the previous checkpoint as the one to resume from. ``directory`` may be any fsspec URL.

    Training stops only while the model states are copied in memory; the files are written in the background (by
    replica rank 0 with ``num_replicas``, which holds the states, else by a thread of this process;
    ``background=False`` writes them before training continues). Background writes are committed before ``fit``
    returns, and their errors raised there. A background save keeps one extra copy of the model states in memory
    (in rank 0's process with ``num_replicas``; reused from save to save, freed when training ends); where that copy
    would take more than half of the available memory, the run saves synchronously instead (with a message). With
    ``num_replicas``, ``directory`` must be reachable from rank 0's node (a shared filesystem or an fsspec URL); a
    relative path is made absolute on the driver, and a ``memory://`` directory is written by the driver. With
    ``max_failures`` on the network, a first checkpoint is taken at ``on_begin`` when there is none to restore, so a
    replica failure before the first periodic checkpoint is recovered too.

    Checkpoints contain a pickle (``objects.pkl``): only resume from directories you wrote yourself.

    Args:
        directory: Where checkpoints live (path or fsspec URL).
        frequency: Checkpoint every this many epochs.
        steps: Also checkpoint every this many training steps (None: only at epoch ends).
        keep: How many checkpoints to keep.
        background: Write checkpoints while training goes on (True) or before it continues (False).

    Raises:
        ValueError: If ``frequency``, ``steps`` or ``keep`` is not a positive int.
        TypeError: If ``background`` is not a bool.
    """

    sort_rank = 1  # after every other "*" trace, so their writes of the same event are in the checkpoint

    def __init__(self, directory: str, frequency: int = 1, steps: int | None = None, keep: int = 2,
                 background: bool = True) -> None:
        for name, value in (("frequency", frequency), ("steps", steps), ("keep", keep)):
            if value is None and name == "steps":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"RestoreWizard {name} must be a positive int, got {value!r}.")
        if not isinstance(background, bool):
            raise TypeError(f"RestoreWizard background must be True or False, got {background!r}.")
        super().__init__(inputs="*", mode=("train", "eval"))
        # Absolute: with replicas, rank 0 writes the checkpoints from its own working directory.
        self.directory = normalize_location(directory)
        self.frequency = frequency
        self.steps = steps
        self.background = background
        self.store = CheckpointStore(self.directory, keep=keep)
        self.last_checkpoint: str | None = None
        self._too_large = False  # the in-process snapshot did not fit in memory: synchronous saves this run

    def on_begin(self, data: Data) -> None:
        self._too_large = False
        try:
            saver_for(self.directory).wait()  # an earlier run in this process may still be writing its last one
        except Exception as err:  # noqa: BLE001 - that run's failure was its own; resume from what is committed
            logger.warning("fe_ray: the last background checkpoint write of an earlier run failed: %s", err)
        # Before the first epoch: an unusable directory would otherwise show only when the first checkpoint is due.
        self.store.check_writable()
        latest = self.store.latest()
        if latest is None:
            print(f"FastEstimator-RestoreWizard: Backing up to {self.directory}", flush=True)
            if getattr(self.system.network, "max_failures", 0) > 0:
                # A recoverable distributed run resumes from a committed checkpoint: this one, of the state before
                # any step, covers a replica failure before the first periodic checkpoint. Committed before the
                # first step: rank 0 writes it, and a rank 0 killed while writing would leave nothing to resume.
                self.save()
                self._wait_for_writes()
            return
        self.system.load_state(latest)
        self.last_checkpoint = latest
        where = f"epoch {self.system.epoch_idx}"
        if not self.system.mode_finished:
            where += f", {self.system.mode} batch {self.system.batch_idx}"
        print(f"FastEstimator-RestoreWizard: Restored from {latest} ({where}, step {self.system.global_step or 0})",
              flush=True)

    def on_batch_end(self, data: Data) -> None:
        if self.steps and self.system.mode == "train" and (self.system.global_step or 0) % self.steps == 0:
            self.save()

    def on_epoch_end(self, data: Data) -> None:
        if self.system.epoch_idx % self.frequency != 0:
            return
        modes = self.system.pipeline.get_modes(self.system.epoch_idx)
        if self.system.mode == "eval" or "eval" not in modes:
            self.save()

    def save(self) -> str | None:
        """Capture the training state now and commit it as a new checkpoint.

        With ``background``, training stalls only for an in-memory copy of the model states: a distributed network
        (one with ``save_checkpoint_async``) has replica rank 0 copy and write its own, in process a writer thread
        writes (after the previous write has finished). Otherwise it is written here, synchronously.

        Returns:
            The committed checkpoint's URL, or None while a background write is still in flight.

        Raises:
            Exception: The error of the previous background write, if it failed.
        """
        if self.background and not self._too_large:
            try:
                self._save_in_background()
                self.last_checkpoint = None
                return None
            except SnapshotTooLargeError as err:
                self._too_large = True  # for the rest of this run: the state will not shrink
                print(f"FastEstimator-RestoreWizard: {err} Saving synchronously instead (no extra copy of the state "
                      "in memory; training waits for each save).", flush=True)
        # No copy of the weights: the write is done with them before training continues.
        payload = self.system.capture_state(copy_models=False)
        self.last_checkpoint = self.store.save(lambda directory: write_checkpoint(payload, directory),
                                               info=self._info(payload["system"]))
        return self.last_checkpoint

    def _save_in_background(self) -> None:
        save_async = getattr(self.system.network, "save_checkpoint_async", None)
        # memory:// exists in this process only: there the driver writes, as in process (replicas could not).
        if save_async is not None and not is_process_local(self.directory):
            payload = self.system.capture_state(models=False)  # rank 0 adds its models' states itself
            save_async(self.directory, payload, keep=self.store.keep, info=self._info(payload["system"]))
        else:
            saver_for(self.directory).save(self.store, lambda buffers: self.system.capture_state(buffers=buffers),
                                           info=self._info(vars(self.system)))

    @staticmethod
    def _info(counters: Mapping[str, Any]) -> dict[str, Any]:
        return {key: counters[key] for key in ("epoch_idx", "mode", "batch_idx", "global_step")}

    def on_end(self, data: Data) -> None:
        # Background writes must be committed before fit returns (and their errors surface here).
        try:
            self._wait_for_writes()
        finally:
            saver_for(self.directory).close()  # frees the snapshot buffers (a full copy of the model states)

    def _wait_for_writes(self) -> None:
        """Wait until the background writes in flight (replica rank 0's, this process's) are committed."""
        flush = getattr(self.system.network, "flush_checkpoints", None)
        if flush is not None:
            self.last_checkpoint = flush() or self.last_checkpoint
        self.last_checkpoint = saver_for(self.directory).wait() or self.last_checkpoint

    def on_abort(self, error: BaseException) -> None:
        # Training failed: the checkpoint being written is the one a resume needs, so commit it now.
        flush = getattr(self.system.network, "flush_checkpoints", None)
        if flush is not None:
            try:
                flush()
            except Exception as err:  # noqa: BLE001 - the error that stopped training is the one raised
                logger.warning("fe_ray: the checkpoint being written when training failed was not committed: %s", err)
        saver = saver_for(self.directory)
        if saver.busy:
            print("FastEstimator-RestoreWizard: Training stopped; finishing the checkpoint being written.",
                  flush=True)
        saver.close()  # logs a failed write: the error that stopped training is the one raised

    def state_dict(self) -> dict[str, Any]:
        return {}
