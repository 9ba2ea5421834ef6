"""Loss TensorOps."""

from fe_ray.op.tensorop.loss.cross_entropy import CrossEntropy
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.loss.mean_squared_error import MeanSquaredError

__all__ = ["CrossEntropy", "LossOp", "MeanSquaredError"]
