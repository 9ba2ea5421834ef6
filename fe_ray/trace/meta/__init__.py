"""Trace decorators (FastEstimator's ``fastestimator.trace.meta``)."""

from fe_ray.trace.meta._per_ds import per_ds

__all__ = ["per_ds"]
