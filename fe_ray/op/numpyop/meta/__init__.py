"""Ops that run other NumpyOps (``fe.op.numpyop.meta``): Fuse, OneOf, Repeat, Sometimes, and FastEstimator's
Delete."""

from fe_ray.op.numpyop.meta.fuse import Fuse
from fe_ray.op.numpyop.meta.one_of import OneOf
from fe_ray.op.numpyop.meta.repeat import Repeat
from fe_ray.op.numpyop.meta.sometimes import Sometimes
from fe_ray.op.numpyop.numpyop import Delete

__all__ = ["Delete", "Fuse", "OneOf", "Repeat", "Sometimes"]
