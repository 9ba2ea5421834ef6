"""LRScheduler: set a model's learning rate from a function of the step or the epoch."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_lr, set_lr
from fe_ray.trace.trace import Data, Trace


class LRScheduler(Trace):
    """Drive the learning rate of ``model`` with ``lr_fn``.

    If ``lr_fn``'s (single) parameter is named ``step`` it is called with the global step before every training
    step; if it is named ``epoch`` it is called with the epoch index at the start of every training epoch. With
    ``frequency=N`` it is called only every N-th step / epoch (1, N+1, 2N+1, ...) and the rate holds in between.
    The current rate is logged as ``<model_name>_lr`` on logging steps.

    Args:
        model: A model built with :func:`fe_ray.build` (with an optimizer).
        lr_fn: ``lr_fn(step) -> float`` or ``lr_fn(epoch) -> float``. FastEstimator's ``'arc'`` is not supported.
        frequency: Call ``lr_fn`` every this many steps / epochs; None means 1.

    Raises:
        ValueError: If ``lr_fn`` does not take exactly one parameter named ``step`` or ``epoch``, or ``frequency``
            is not a positive int or None.
    """

    changes_batch = False  # on_batch_begin only sets the learning rate

    def __init__(self, model: Any, lr_fn: Callable[[int], float], frequency: int | None = None) -> None:
        if not callable(lr_fn):
            arc = isinstance(lr_fn, str) and lr_fn == "arc"
            hint = " (FastEstimator's 'arc' schedule is not available in fe_ray)" if arc else ""
            raise ValueError(f"LRScheduler lr_fn must be a function of 'step' or 'epoch', got {lr_fn!r}{hint}.")
        if frequency is not None and (not isinstance(frequency, int) or isinstance(frequency, bool)
                                      or frequency < 1):
            raise ValueError(f"LRScheduler frequency must be a positive int (call lr_fn every N steps or epochs) or "
                             f"None (every one), got {frequency!r}.")
        params = list(inspect.signature(lr_fn).parameters)
        if len(params) != 1 or params[0] not in ("step", "epoch"):
            raise ValueError(f"LRScheduler lr_fn must take one argument named 'step' or 'epoch', got parameters "
                             f"{params}; e.g. lr_fn=lambda step: 1e-3 * 0.99 ** step.")
        super().__init__(mode="train", outputs=f"{model.model_name}_lr")
        self.model = model
        self.lr_fn = lr_fn
        self.schedule_mode = params[0]
        self.frequency = frequency or 1

    def _apply(self, index: int) -> None:
        if self.frequency > 1 and index % self.frequency != 1:
            return  # between two calls the rate holds
        # Only the driver's optimizer is touched: a distributed network forwards learning-rate changes to its
        # replicas with the next step, which is far cheaper than pushing whole models. The rate is rounded to
        # float32 first, as FastEstimator does: that is what a Keras optimizer's variable holds, so the rate the
        # driver remembers sending equals the one it later reads back (no spurious "changed without set_lr" at
        # an epoch's end), and torch trains with the same rate as TF.
        set_lr(self.model, float(np.float32(self.lr_fn(index))))

    def on_epoch_begin(self, data: Data) -> None:
        if self.schedule_mode == "epoch":
            self._apply(self.system.epoch_idx)

    def on_batch_begin(self, data: Data) -> None:
        if self.schedule_mode == "step":
            self._apply(self.system.global_step or 0)

    def on_batch_end(self, data: Data) -> None:
        log_steps = self.system.log_steps
        step = self.system.global_step or 0
        if log_steps and (step % log_steps == 0 or step == 1):
            data.write_with_log(self.outputs[0], get_lr(self.model))

    def state_dict(self) -> dict[str, Any]:
        # Stored explicitly so that a resume in the middle of an epoch-scheduled epoch keeps the epoch's rate
        # whatever the framework keeps in its optimizer state.
        return {"lr": float(get_lr(self.model))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        set_lr(self.model, float(state["lr"]))
