"""Logger and ProgressBar: the console output of a run.

Lines keep FastEstimator's ``FastEstimator-<Event>:`` prefix (``FastEstimator-Train: step: 100; ce: 0.12;
steps/sec: 250.3;``) so that existing log parsers and habits keep working after switching to fe_ray.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from fe_ray.trace.trace import Data, Trace, to_loggable

PREFIX = "FastEstimator-"


def format_value(value: Any) -> str:
    """Render a logged value compactly: scalars as numbers, small arrays inline, big arrays by shape."""
    if isinstance(value, np.ndarray):
        if value.size == 1:
            value = value.reshape(-1)[0]
        elif value.size <= 10:
            return np.array2string(value, separator=", ", precision=6).replace("\n", "")
        else:
            return f"<array shape={value.shape} dtype={value.dtype}>"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.7g}"
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


class Logger(Trace):
    """Prints logged values: at the start, every ``log_steps`` training steps, after each epoch, and at the end.

    Added by the Estimator automatically unless ``log_steps=None``; it prints what other traces wrote with
    ``write_with_log`` during the event. It keeps no state and is not part of checkpoints.
    """

    checkpointed = False
    sort_rank = 2

    def __init__(self) -> None:
        super().__init__(inputs="*")

    def on_begin(self, data: Data) -> None:
        if self.system.mode != "test":  # as FastEstimator: test() prints its epoch line only
            self._print("Start", data, step=self.system.global_step or 1)

    def on_batch_end(self, data: Data) -> None:
        system = self.system
        if system.mode == "train":
            step = system.global_step or 0
            if system.log_steps and (step % system.log_steps == 0 or step == 1):
                self._print("Train", data)
        elif system.mode == "eval" and system.batch_idx in system.eval_log_steps[0]:
            self._print("Eval", data, extra=f"progress: {system.batch_idx}/{system.eval_log_steps[1] or '?'}; ")

    def on_epoch_end(self, data: Data) -> None:
        mode = self.system.mode
        if mode == "train" and self.system.log_steps:
            self._print("Train", data, extra=f"epoch: {self.system.epoch_idx}; ")
        elif mode in ("eval", "test"):
            self._print(mode.capitalize(), data, extra=f"epoch: {self.system.epoch_idx}; ")

    def on_end(self, data: Data) -> None:
        if self.system.mode != "test":
            self._print("Finish", data)

    def _print(self, event: str, data: Data, extra: str = "", step: int | None = None) -> None:
        body = "".join(f"{key}: {format_value(to_loggable(value))}; " for key, value in data.read_logs().items())
        step = (self.system.global_step or 0) if step is None else step
        print(f"{PREFIX}{event}: step: {step}; {extra}{body}".rstrip(), flush=True)


class ProgressBar(Trace):
    """A tqdm progress bar over the batches of each training/evaluation epoch.

    Args:
        force: Show the bar even when stdout is not a terminal (by default it only shows on a TTY, keeping
            log files clean).
        mode: Modes in which to show the bar.
    """

    checkpointed = False
    sort_rank = 2

    def __init__(self, force: bool = False, mode: Any = ("train", "eval")) -> None:
        super().__init__(inputs="*", mode=mode)
        self.enabled = force or sys.stdout.isatty()
        self._bar: Any = None

    def on_epoch_begin(self, data: Data) -> None:
        if not self.enabled:
            return
        from tqdm.auto import tqdm

        total = self.system.steps_per_epoch
        if total is None:
            total = self._loader_length()
        self._bar = tqdm(total=total, desc=f"{self.system.mode} epoch {self.system.epoch_idx}", leave=False,
                         unit="batch", file=sys.stdout)

    def _loader_length(self) -> int | None:
        length = getattr(self.system, "epoch_length", None)
        return int(length) if length else None

    def on_batch_end(self, data: Data) -> None:
        if self._bar is not None:
            if self._bar.total is None and self.system.epoch_length:
                self._bar.total = self.system.epoch_length  # known once the loader has opened
            self._bar.update(1)

    def on_epoch_end(self, data: Data) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
