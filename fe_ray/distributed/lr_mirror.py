"""Mirror the driver's learning rates onto the replicas, one step at a time.

Traces such as ``LRScheduler`` set learning rates on the driver's models, which do not train; the replicas' models
do. The coordinator therefore sends, with each step, the rates that changed since it last sent them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from fe_ray.backend import get_backend, get_lr, set_lr

logger = logging.getLogger(__name__)


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
        self._sent: dict[str, float] = {}

    def reset(self) -> None:
        """Forget what was sent (the replicas were replaced)."""
        self._sent = {}

    def assume_synced(self, models: Iterable[Any]) -> None:
        """Record that the replicas hold exactly the rates ``models`` have now (after a state transfer)."""
        self.reset()
        self.changes(models)

    def changes(self, models: Iterable[Any], read: bool = True) -> dict[str, float] | None:
        """Rates of ``models`` that differ from those last sent, now counted as sent; None if none changed.

        Args:
            models: The driver's models.
            read: Read each rate from its optimizer; False asks the backend's ``known_lr`` instead.
        """
        changed: dict[str, float] = {}
        for model in models:
            lr = _rate(model, read)
            if lr is not None and self._sent.get(model.model_name) != lr:
                changed[model.model_name] = lr
                self._sent[model.model_name] = lr
        return changed or None

    def keep_unsent(self, models: list[Any], sync: Any) -> None:
        """Run ``sync()`` (which overwrites the driver's optimizers with the replicas' state) without losing a rate
        the driver's models were given since the last step: it is set again afterwards, and the next context sends
        it. A rate set with ``set_lr`` after the context's last step (by a trace after that step, or before a step
        that did not run) was missed by no step; one written around ``set_lr`` during the epoch was, with a
        warning."""
        # Before reading: a TF read makes the read value the known one.
        known = {model.model_name: _rate(model, read=False) for model in models}
        unsent = self.changes(models, read=True)
        sync()
        if not unsent:
            return
        for model in models:
            if model.model_name in unsent:
                if known[model.model_name] != unsent[model.model_name]:
                    logger.warning("The learning rate of model %r was changed to %g during the epoch without "
                                   "fe_ray.backend.set_lr, so the replicas trained the rest of the epoch with the "
                                   "old rate; they use the new one from the next epoch. Set rates with "
                                   "fe_ray.backend.set_lr (as LRScheduler does) to apply them at the next step.",
                                   model.model_name, unsent[model.model_name])
                set_lr(model, unsent[model.model_name])


def _rate(model: Any, read: bool) -> float | None:
    """``model``'s learning rate: read from its optimizer, or (``read=False``) the backend's ``known_lr``; None
    without an optimizer or a plain rate (e.g. a Keras LearningRateSchedule: the replicas follow it themselves)."""
    if getattr(model, "current_optimizer", None) is None:
        return None
    try:
        return float(get_lr(model) if read else get_backend(model).known_lr(model))
    except Exception:  # noqa: BLE001 - e.g. a LearningRateSchedule
        return None


__all__ = ["LrMirror"]
