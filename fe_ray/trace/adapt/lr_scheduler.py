"""LRScheduler: set a model's learning rate from a function of the step or the epoch."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from fe_ray.backend import get_lr, set_lr
from fe_ray.trace.trace import Data, Trace


class LRScheduler(Trace):
    """Drive the learning rate of ``model`` with ``lr_fn``.

    If ``lr_fn``'s (single) parameter is named ``step`` it is called with the global step before every training
    step; if it is named ``epoch`` it is called with the epoch index at the start of every training epoch. The
    current rate is logged as ``<model_name>_lr`` on logging steps.

    Args:
        model: A model built with :func:`fe_ray.build` (with an optimizer).
        lr_fn: ``lr_fn(step) -> float`` or ``lr_fn(epoch) -> float``.

    Raises:
        ValueError: If ``lr_fn`` does not take exactly one parameter named ``step`` or ``epoch``.
    """

    changes_batch = False  # on_batch_begin only sets the learning rate

    def __init__(self, model: Any, lr_fn: Callable[[int], float]) -> None:
        if not callable(lr_fn):
            raise ValueError(f"LRScheduler lr_fn must be a function of 'step' or 'epoch', got {lr_fn!r}.")
        params = list(inspect.signature(lr_fn).parameters)
        if len(params) != 1 or params[0] not in ("step", "epoch"):
            raise ValueError(f"LRScheduler lr_fn must take one argument named 'step' or 'epoch', got parameters "
                             f"{params}; e.g. lr_fn=lambda step: 1e-3 * 0.99 ** step.")
        super().__init__(mode="train", outputs=f"{model.model_name}_lr")
        self.model = model
        self.lr_fn = lr_fn
        self.schedule_mode = params[0]

    def _apply(self, index: int) -> None:
        # Only the driver's optimizer is touched: a distributed network forwards learning-rate changes to its
        # replicas with the next step, which is far cheaper than pushing whole models.
        set_lr(self.model, float(self.lr_fn(index)))

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
