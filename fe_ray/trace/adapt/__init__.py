"""Traces that adapt training as it runs."""

from fe_ray.trace.adapt.early_stopping import EarlyStopping
from fe_ray.trace.adapt.lr_scheduler import LRScheduler

__all__ = ["EarlyStopping", "LRScheduler"]
