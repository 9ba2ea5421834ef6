"""Traces: callbacks the Estimator runs around training events (metrics, logging, saving, adapting)."""

from fe_ray.trace import adapt, io, metric, xai
from fe_ray.trace.adapt import EarlyStopping, LRScheduler
from fe_ray.trace.essential import EvalEssential, TestEssential, TrainEssential
from fe_ray.trace.io import BestModelSaver, ModelSaver, RestoreWizard
from fe_ray.trace.logger import Logger, ProgressBar
from fe_ray.trace.metric import Accuracy
from fe_ray.trace.trace import Data, PerDSTrace, Trace, sort_traces

__all__ = ["Accuracy", "BestModelSaver", "Data", "EarlyStopping", "EvalEssential", "LRScheduler", "Logger",
           "ModelSaver", "PerDSTrace", "ProgressBar", "RestoreWizard", "TestEssential", "Trace", "TrainEssential",
           "adapt", "io", "metric", "sort_traces", "xai"]
