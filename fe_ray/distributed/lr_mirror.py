"""Mirror the driver's learning rates onto the replicas, one step at a time.

Traces such as ``LRScheduler`` set learning rates on the driver's models, which do not train; the replicas' models
do. The coordinator therefore sends, with each step, the rates that changed since it last sent them.

A rate belongs to an optimizer, not to a model: a model built with a Scheduler of optimizers holds one per scheduled
entry, and a trace may set the rate of one that is not current (``LRScheduler.on_epoch_begin`` sets the rate of the
optimizer current in the previous epoch, before the next epoch's context switches, as in FastEstimator). So such a
model's rates are keyed ``(model_name, position in the schedule)``; a model with one optimizer's by its name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Union

from fe_ray.backend import get_backend, get_lr, set_lr
from fe_ray.backend.optimizers import scheduled_optimizers

logger = logging.getLogger(__name__)

#: Which optimizer a rate belongs to: a model's name (its only optimizer) or (name, place in its schedule).
RateKey = Union[str, tuple[str, int]]


class LrMirror:
    """The learning rates the replicas hold, as far as the driver sent them.

    Every step asks :meth:`changes` with ``read=False``: the rates last set through ``fe_ray.backend.set_lr``,
    without reading them from the optimizers. Reading a TF optimizer's rate is an op, and an op on the driver
    wakes TF's thread pools, which then spin: ~0.5 ms of driver CPU per step, measured on a 2-core VM where the
    replicas needed that CPU. Entering a context reads the optimizers (``read=True``), so a rate written another
    way (``optimizer.learning_rate.assign``) still reaches the replicas by the next epoch; :meth:`keep_unsent`
    keeps such a write from being overwritten when an epoch's end copies the replicas' state to the driver.
    """

    def __init__(self) -> None:
        self._sent: dict[RateKey, float] = {}

    def reset(self) -> None:
        """Forget what was sent (the replicas were replaced)."""
        self._sent = {}

    def assume_synced(self, models: Iterable[Any]) -> None:
        """Record that the replicas hold exactly the rates ``models`` have now (after a state transfer)."""
        self.reset()
        self.changes(models)

    def changes(self, models: Iterable[Any], read: bool = True) -> dict[RateKey, float] | None:
        """Rates of ``models``' optimizers that differ from those last sent, now counted as sent; None if none
        changed.

        Args:
            models: The driver's models.
            read: Read each rate from its optimizer; False asks the backend's ``known_lr`` instead.
        """
        changed: dict[RateKey, float] = {}
        for model in models:
            for key, lr in optimizer_rates(model, read).items():
                if self._sent.get(key) != lr:
                    changed[key] = lr
                    self._sent[key] = lr
        return changed or None

    def keep_unsent(self, models: list[Any], sync: Any) -> None:
        """Run ``sync()`` (which overwrites the driver's optimizers with the replicas' state) without losing a rate
        the driver's models were given since the last step: it is set again afterwards, and the next context sends
        it. A rate set with ``set_lr`` after the context's last step (by a trace after that step, or before a step
        that did not run) was missed by no step; one written around ``set_lr`` during the epoch was, with a
        warning."""
        # Before reading: a TF read makes the read value the known one.
        known: dict[RateKey, float] = {}
        for model in models:
            known.update(optimizer_rates(model, read=False))
        unsent = self.changes(models, read=True)
        sync()
        if not unsent:
            return
        for key, lr in unsent.items():
            if known.get(key) != lr:
                logger.warning("The learning rate of model %r was changed to %g during the epoch without "
                               "fe_ray.backend.set_lr, so the replicas trained the rest of the epoch with the "
                               "old rate; they use the new one from the next epoch. Set rates with "
                               "fe_ray.backend.set_lr (as LRScheduler does) to apply them at the next step.",
                               key if isinstance(key, str) else key[0], lr)
        set_rates(models, unsent)


def optimizer_rates(model: Any, read: bool = True) -> dict[RateKey, float]:
    """The learning rate of each of ``model``'s optimizers that has a plain one, by :data:`RateKey`.

    Args:
        model: A built model.
        read: Read each rate from its optimizer; False asks the backend's ``known_lr`` instead.
    """
    scheduled = scheduled_optimizers(model)
    if not scheduled:
        lr = _rate(model, read)
        return {} if lr is None else {model.model_name: lr}
    rates: dict[RateKey, float] = {}
    for pos, optimizer in enumerate(scheduled):
        with _current(model, optimizer):
            lr = _rate(model, read)
        if lr is not None:
            rates[(model.model_name, pos)] = lr
    return rates


def set_rates(models: Iterable[Any], rates: Mapping[RateKey, float]) -> None:
    """Give each optimizer of ``models`` its rate in ``rates`` (from :meth:`LrMirror.changes`), where it differs."""
    for model in models:
        scheduled = scheduled_optimizers(model)
        if not scheduled:
            targets = [(model.model_name, getattr(model, "current_optimizer", None))]
        else:
            targets = [((model.model_name, pos), optimizer) for pos, optimizer in enumerate(scheduled)]
        for key, optimizer in targets:
            lr = rates.get(key)
            if lr is None or optimizer is None:
                continue
            with _current(model, optimizer):
                if get_lr(model) != lr:
                    set_lr(model, lr)


@contextmanager
def _current(model: Any, optimizer: Any) -> Iterator[None]:
    """Make ``optimizer`` the model's current one inside the block: the backends' rate functions act on that one."""
    saved = model.current_optimizer
    if optimizer is saved:
        yield
        return
    model.current_optimizer = optimizer
    try:
        yield
    finally:
        model.current_optimizer = saved


def _rate(model: Any, read: bool) -> float | None:
    """``model``'s learning rate: read from its optimizer, or (``read=False``) the backend's ``known_lr``; None
    without an optimizer or a plain rate (e.g. a Keras LearningRateSchedule: the replicas follow it themselves)."""
    if getattr(model, "current_optimizer", None) is None:
        return None
    try:
        return float(get_lr(model) if read else get_backend(model).known_lr(model))
    except Exception:  # noqa: BLE001 - e.g. a LearningRateSchedule
        return None


__all__ = ["LrMirror", "RateKey", "optimizer_rates", "set_rates"]
