"""Metric traces."""

from fe_ray.trace.metric.accuracy import Accuracy

__all__ = ["Accuracy"]
