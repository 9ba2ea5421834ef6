"""Schedulers: values (ops, optimizers, datasets, numbers) that change with the epoch, and learning-rate
schedules for LRScheduler."""

from fe_ray.schedule.arc import ARC
from fe_ray.schedule.lr_schedule import cosine_decay
from fe_ray.schedule.schedule import (
    EpochScheduler,
    RepeatScheduler,
    Scheduler,
    get_current_items,
    get_signature_epochs,
)

__all__ = ["ARC", "EpochScheduler", "RepeatScheduler", "Scheduler", "cosine_decay", "get_current_items",
           "get_signature_epochs"]
