"""LRScheduler: set a model's learning rate from a function of the step or the epoch."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_lr, set_lr, to_number
from fe_ray.backend.optimizers import scheduled_optimizers
from fe_ray.schedule.arc import ARC
from fe_ray.trace.best_value import loss_metric
from fe_ray.trace.trace import Data, Trace


class LRScheduler(Trace):
    """Drive the learning rate of ``model`` with ``lr_fn``.

    If ``lr_fn``'s (single) parameter is named ``step`` it is called with the global step before every training
    step; if it is named ``epoch`` it is called with the epoch index at the start of every training epoch. With
    ``frequency=N`` it is called only every N-th step / epoch (1, N+1, 2N+1, ...) and the rate holds in between.
    The current rate is logged as ``<model_name>_lr`` on logging steps.

    ``lr_fn="arc"`` (or an :class:`~fe_ray.schedule.arc.ARC`) lets FastEstimator's learned controller multiply the
    rate by 1.618, 1.0 or 0.618 every ``frequency`` epochs (default: the ARC's, 3), judging from the model's
    training and evaluation losses; it needs TensorFlow and FastEstimator's ``arc.h5`` weights (see
    :mod:`fe_ray.schedule.arc`). The model must have exactly one loss key, and the controller's history is saved
    in checkpoints.

    Args:
        model: A model built with :func:`fe_ray.build` (with an optimizer).
        lr_fn: ``lr_fn(step) -> float``, ``lr_fn(epoch) -> float``, ``"arc"`` or an ``ARC``.
        ds_id: Dataset id(s) whose batches drive a step schedule (None for all, "!id" to exclude one), as in
            FastEstimator: a ``step`` function is called only before batches of those datasets; epoch events
            (an ``epoch`` function, ARC) run whatever the datasets.
        frequency: Call ``lr_fn`` every this many steps / epochs; None means 1 (for ``"arc"``: the ARC's own).

    Raises:
        ValueError: If ``lr_fn`` does not take exactly one parameter named ``step`` or ``epoch`` (and is not
            ``"arc"``), ``frequency`` is not a positive int or None, or ``"arc"`` is given for a model without
            exactly one loss key.
    """

    changes_batch = False  # on_batch_begin only sets the learning rate

    def __init__(self, model: Any, lr_fn: Callable[[int], float] | str | ARC,
                 ds_id: None | str | Iterable[str] = None, frequency: int | None = None) -> None:
        if frequency is not None and (not isinstance(frequency, int) or isinstance(frequency, bool)
                                      or frequency < 1):
            raise ValueError(f"LRScheduler frequency must be a positive int (call lr_fn every N steps or epochs) or "
                             f"None (every one), got {frequency!r}.")
        self.model = model
        self.loss_key: str | None = None
        arc = isinstance(lr_fn, str) and lr_fn == "arc"
        if arc or isinstance(lr_fn, ARC):
            # The controller reads the evaluation epoch's loss too, after the Estimator's EvalEssential wrote it
            # (declaring it as an input orders this trace after it). Checked before ARC() may download weights.
            self.loss_key = loss_metric(model, "LRScheduler(lr_fn='arc')")
            if arc:
                lr_fn = ARC() if frequency is None else ARC(frequency=frequency)
            super().__init__(inputs=self.loss_key, mode=("train", "eval"), outputs=f"{model.model_name}_lr",
                             ds_id=ds_id)
            self.lr_fn: Any = lr_fn
            self.schedule_mode = "epoch"
            self.frequency = lr_fn.frequency
            return
        if not callable(lr_fn):
            raise ValueError(f"LRScheduler lr_fn must be a function of 'step' or 'epoch', 'arc' or an ARC, got "
                             f"{lr_fn!r}.")
        params = list(inspect.signature(lr_fn).parameters)
        if len(params) != 1 or params[0] not in ("step", "epoch"):
            raise ValueError(f"LRScheduler lr_fn must take one argument named 'step' or 'epoch', got parameters "
                             f"{params}; e.g. lr_fn=lambda step: 1e-3 * 0.99 ** step.")
        super().__init__(mode="train", outputs=f"{model.model_name}_lr", ds_id=ds_id)
        self.lr_fn = lr_fn
        self.schedule_mode = params[0]
        self.frequency = frequency or 1

    def _apply(self, index: int) -> None:
        if self.frequency > 1 and index % self.frequency != 1:
            return  # between two calls the rate holds
        if isinstance(self.lr_fn, ARC):
            if index > 1:  # the first cycle has nothing to judge yet
                multiplier = self.lr_fn.predict_next_multiplier()
                set_lr(self.model, float(np.float32(get_lr(self.model) * multiplier)))
                print(f"FastEstimator-ARC: Multiplying LR by {multiplier}")
            return
        # Only the driver's optimizer is touched: a distributed network forwards learning-rate changes to its
        # replicas with the next step, which is far cheaper than pushing whole models. The rate is rounded to
        # float32 first, as FastEstimator does: that is what a Keras optimizer's variable holds, so the rate the
        # driver remembers sending equals the one it later reads back (no spurious "changed without set_lr" at
        # an epoch's end), and torch trains with the same rate as TF.
        set_lr(self.model, float(np.float32(self.lr_fn(index))))

    def on_epoch_begin(self, data: Data) -> None:
        if self.schedule_mode == "epoch" and self.system.mode == "train":
            self._apply(self.system.epoch_idx)

    def on_batch_begin(self, data: Data) -> None:
        if self.schedule_mode == "step":
            self._apply(self.system.global_step or 0)

    def on_batch_end(self, data: Data) -> None:
        if self.system.mode != "train":
            return
        if self.loss_key is not None:
            self.lr_fn.accumulate_single_train_loss(_scalar(data[self.loss_key]))
        log_steps = self.system.log_steps
        step = self.system.global_step or 0
        if log_steps and (step % log_steps == 0 or step == 1):
            data.write_with_log(self.outputs[0], np.float32(get_lr(self.model)))  # as FastEstimator logs it

    def on_epoch_end(self, data: Data) -> None:
        if self.loss_key is None:
            return
        at_cycle_end = self.system.epoch_idx % self.frequency == 0
        if self.system.mode == "eval":
            self.lr_fn.accumulate_single_eval_loss(_scalar(data[self.loss_key]))
            if at_cycle_end:
                self.lr_fn.gather_multiple_eval_losses()
        elif self.system.mode == "train" and at_cycle_end:
            self.lr_fn.accumulate_all_lrs(get_lr(self.model))
            self.lr_fn.gather_multiple_train_losses()

    def state_dict(self) -> dict[str, Any]:
        # Stored explicitly so that a resume in the middle of an epoch-scheduled epoch keeps the epoch's rate
        # whatever the framework keeps in its optimizer state.
        state: dict[str, Any] = {"lr": float(get_lr(self.model))}
        if isinstance(self.lr_fn, ARC):
            state["arc"] = self.lr_fn.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not scheduled_optimizers(self.model):
            # With a Scheduler of optimizers the saved rate is that of the optimizer current when the checkpoint was
            # taken, not necessarily the current one now; the model's snapshot restores every optimizer's own rate.
            set_lr(self.model, float(state["lr"]))
        if isinstance(self.lr_fn, ARC):
            if "arc" not in state:
                raise ValueError("This LRScheduler uses ARC but the checkpoint holds no ARC history; it was saved by "
                                 "a run with another lr_fn.")
            self.lr_fn.load_state_dict(state["arc"])


def _scalar(value: Any) -> float:
    """A loss (a scalar tensor of either framework, or a number) as a float."""
    return float(np.asarray(to_number(value)).reshape(-1).mean())
