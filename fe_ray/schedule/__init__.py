"""Schedulers: values (ops, optimizers, datasets, numbers) that change with the epoch."""

from fe_ray.schedule.schedule import (
    EpochScheduler,
    RepeatScheduler,
    Scheduler,
    get_current_items,
    get_signature_epochs,
)

__all__ = ["EpochScheduler", "RepeatScheduler", "Scheduler", "get_current_items", "get_signature_epochs"]
