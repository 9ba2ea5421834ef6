"""TensorOps that run and update models."""

from fe_ray.op.tensorop.model.model import ModelOp
from fe_ray.op.tensorop.model.update import UpdateOp

__all__ = ["ModelOp", "UpdateOp"]
