"""Metric traces."""

from fe_ray.trace.metric.accuracy import Accuracy
from fe_ray.trace.metric.auc import AUCScore
from fe_ray.trace.metric.bleu_score import BleuScore
from fe_ray.trace.metric.calibration_error import CalibrationError
from fe_ray.trace.metric.confusion_matrix import ConfusionMatrix
from fe_ray.trace.metric.dice import Dice
from fe_ray.trace.metric.f1_score import F1Score
from fe_ray.trace.metric.mcc import MCC
from fe_ray.trace.metric.mean_average_precision import MeanAveragePrecision
from fe_ray.trace.metric.precision import Precision
from fe_ray.trace.metric.recall import Recall

__all__ = ["MCC", "AUCScore", "Accuracy", "BleuScore", "CalibrationError", "ConfusionMatrix", "Dice", "F1Score",
           "MeanAveragePrecision", "Precision", "Recall"]
