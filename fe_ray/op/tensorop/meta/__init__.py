"""Meta TensorOps: ops that run other TensorOps (in sequence, repeatedly, sometimes, or one of several)."""

from fe_ray.op.tensorop.meta.fuse import Fuse
from fe_ray.op.tensorop.meta.one_of import OneOf
from fe_ray.op.tensorop.meta.repeat import Repeat
from fe_ray.op.tensorop.meta.sometimes import Sometimes

__all__ = ["Fuse", "OneOf", "Repeat", "Sometimes"]
