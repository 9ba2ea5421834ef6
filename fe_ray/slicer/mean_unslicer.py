"""FastEstimator's module path ``fastestimator.slicer.mean_unslicer``: :class:`~fe_ray.slicer.slicer.MeanUnslicer`."""

from fe_ray.slicer.slicer import MeanUnslicer

__all__ = ["MeanUnslicer"]
