"""FastEstimator's module path ``fastestimator.slicer.axis_slicer``: :class:`~fe_ray.slicer.slicer.AxisSlicer`."""

from fe_ray.slicer.slicer import AxisSlicer

__all__ = ["AxisSlicer"]
