"""Traces that write to or read from storage."""

from fe_ray.trace.io.batch_display import BatchDisplay
from fe_ray.trace.io.best_model_saver import BestModelSaver
from fe_ray.trace.io.csv_logger import CSVLogger
from fe_ray.trace.io.grid_display import GridDisplay
from fe_ray.trace.io.image_saver import ImageSaver
from fe_ray.trace.io.image_viewer import ImageViewer
from fe_ray.trace.io.model_saver import ModelSaver
from fe_ray.trace.io.restore_wizard import RestoreWizard
from fe_ray.trace.io.tensorboard import TensorBoard
from fe_ray.trace.io.test_report import TestReport

__all__ = ["BatchDisplay", "BestModelSaver", "CSVLogger", "GridDisplay", "ImageSaver", "ImageViewer", "ModelSaver",
           "RestoreWizard", "TensorBoard", "TestReport"]
