"""Logger and ProgressBar: the console output of a run.

Lines keep FastEstimator's layout (``FastEstimator-Train: step: 100; ce: 0.12; steps/sec: 250.3;``, keys in natural
order, arrays of several values on lines of their own after it, ``Eval Progress: 2/6;`` lines during evaluation) so
that existing log parsers and habits keep working after switching to fe_ray.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np

from fe_ray.summary.summary import ValWithError
from fe_ray.trace.trace import Data, Trace, to_loggable

PREFIX = "FastEstimator-"


def natural_key(key: str) -> list[Any]:
    """Sort key putting ``acc|ds2`` before ``acc|ds10`` and ignoring case, as FastEstimator's ``humansorted``."""
    return [(0, int(part)) if part.isdigit() else (1, part.lower()) for part in re.split(r"(\d+)", key) if part]


def format_value(value: Any) -> str:
    """Render a logged value as FastEstimator's Logger does: a single value as numpy prints it (``2.3113186`` for a
    float32 loss, ``1e-04``, ``0.7555555555555555`` for a Python float, ``[1.]`` for a one-element array), larger
    arrays in numpy's layout, comma-separated, and a :class:`~fe_ray.summary.summary.ValWithError` as its text."""
    if isinstance(value, ValWithError):
        return str(value)
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array.size > 1:
        return np.array2string(array, separator=",")
    return str(array)


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
            # FastEstimator's progress line, without the "FastEstimator-" prefix: parsers that read the epoch lines
            # must not take it for one.
            ds = f" ({system.ds_id})" if system.ds_id else ""
            self._print("", data, header=f"Eval Progress{ds}: {system.batch_idx}/{system.eval_log_steps[1] or '?'}; ")

    def on_epoch_end(self, data: Data) -> None:
        mode = self.system.mode
        if mode == "train":  # whatever log_steps says (0 included), as FastEstimator
            self._print("Train", data, extra=f"epoch: {self.system.epoch_idx}; ")
        elif mode in ("eval", "test"):
            self._print(mode.capitalize(), data, extra=f"epoch: {self.system.epoch_idx}; ")

    def on_end(self, data: Data) -> None:
        if self.system.mode != "test":
            self._print("Finish", data)

    def _print(self, event: str, data: Data, extra: str = "", step: int | None = None, header: str = "") -> None:
        inline, deferred = [], []
        for key, value in sorted(data.read_logs().items(), key=lambda item: natural_key(item[0])):
            value = to_loggable(value)
            if isinstance(value, np.ndarray) and value.size > 1:  # on lines of their own after the line's values
                deferred.append(f"\n{key}:\n{format_value(value)};")
            else:
                inline.append(f"{key}: {format_value(value)}; ")
        if not header:
            # As FastEstimator: before any training step (test() without fit(), a fit stopped in on_begin) the
            # step is None and printed so; the Summary records such values at step 0.
            step = self.system.global_step if step is None else step
            header = f"{PREFIX}{event}: step: {step}; "
        print(f"{header}{extra}{''.join(inline)}".rstrip() + "".join(deferred), flush=True)


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
