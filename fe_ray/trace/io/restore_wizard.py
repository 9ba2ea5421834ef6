"""RestoreWizard: periodic checkpoints of the whole training state, and automatic resume from the latest one."""

from __future__ import annotations

from typing import Any

from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.state_files import write_checkpoint
from fe_ray.trace.trace import Data, Trace


class RestoreWizard(Trace):
    """Checkpoint training into ``directory`` and, when started again with the same directory, resume exactly.

    A checkpoint holds everything a run depends on: weights and optimizer states, op / trace / pipeline states (the
    data position, so a mid-epoch resume sees exactly the remaining samples), the Summary, RNG states and the
    counters. It is taken after the last mode of every ``frequency``-th epoch (after evaluation when there is
    evaluation data), and with ``steps=N`` also after every N-th training step. At ``on_begin`` the newest
    committed checkpoint (if any) is restored and training continues where it stopped.

    Checkpoints go through a :class:`~fe_ray.io.checkpoint.CheckpointStore`, so a run killed while writing
    leaves the previous checkpoint as the one to resume from. ``directory`` may be any fsspec URL.

    Checkpoints contain a pickle (``objects.pkl``): only resume from directories you wrote yourself.

    Args:
        directory: Where checkpoints live (path or fsspec URL).
        frequency: Checkpoint every this many epochs.
        steps: Also checkpoint every this many training steps (None: only at epoch ends).
        keep: How many checkpoints to keep.

    Raises:
        ValueError: If ``frequency``, ``steps`` or ``keep`` is not a positive int.
    """

    sort_rank = 1  # after every other "*" trace, so their writes of the same event are in the checkpoint

    def __init__(self, directory: str, frequency: int = 1, steps: int | None = None, keep: int = 2) -> None:
        for name, value in (("frequency", frequency), ("steps", steps), ("keep", keep)):
            if value is None and name == "steps":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"RestoreWizard {name} must be a positive int, got {value!r}.")
        super().__init__(inputs="*", mode=("train", "eval"))
        self.directory = str(directory)
        self.frequency = frequency
        self.steps = steps
        self.store = CheckpointStore(self.directory, keep=keep)
        self.last_checkpoint: str | None = None

    def on_begin(self, data: Data) -> None:
        latest = self.store.latest()
        if latest is None:
            print(f"FastEstimator-RestoreWizard: Backing up to {self.directory}", flush=True)
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

        A distributed network (one with ``save_checkpoint_async``) commits it from a background writer actor, so
        training stalls only for the in-memory capture; otherwise it is written here, synchronously.

        Returns:
            The committed checkpoint's URL, or None while a background write is still in flight.
        """
        # No copy of the weights: both paths are done with them before training continues (a synchronous write, or
        # AsyncCheckpointer's ray.put, which copies into the object store before it returns).
        payload = self.system.capture_state(copy_models=False)
        info = {key: payload["system"][key] for key in ("epoch_idx", "mode", "batch_idx", "global_step")}
        save_async = getattr(self.system.network, "save_checkpoint_async", None)
        if save_async is not None:
            save_async(self.directory, payload, keep=self.store.keep, info=info)
            self.last_checkpoint = None
            return None
        self.last_checkpoint = self.store.save(lambda directory: write_checkpoint(payload, directory), info=info)
        return self.last_checkpoint

    def on_end(self, data: Data) -> None:
        # Background writes must be committed before fit returns (and their errors surface here).
        flush = getattr(self.system.network, "flush_checkpoints", None)
        if flush is not None:
            self.last_checkpoint = flush() or self.last_checkpoint

    def state_dict(self) -> dict[str, Any]:
        return {}
