"""Ops: the building blocks of Pipelines (NumpyOps) and Networks (TensorOps)."""

from fe_ray.op.op import Op

__all__ = ["Op"]
