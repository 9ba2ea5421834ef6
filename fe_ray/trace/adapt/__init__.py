"""Traces that adapt training as it runs."""

from fe_ray.trace.adapt.early_stopping import EarlyStopping
from fe_ray.trace.adapt.lr_scheduler import LRScheduler
from fe_ray.trace.adapt.pbm_calibrator import PBMCalibrator
from fe_ray.trace.adapt.reduce_lr_on_plateau import ReduceLROnPlateau
from fe_ray.trace.adapt.terminate_on_nan import TerminateOnNaN

__all__ = ["EarlyStopping", "LRScheduler", "PBMCalibrator", "ReduceLROnPlateau", "TerminateOnNaN"]
