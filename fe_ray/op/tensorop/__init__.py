"""TensorOps: ops run by a Network on framework tensors."""

from fe_ray.op.tensorop.loss import CrossEntropy, LossOp, MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.op.tensorop.tensorop import LambdaOp, TensorOp, run_ops

__all__ = ["CrossEntropy", "LambdaOp", "LossOp", "MeanSquaredError", "ModelOp", "TensorOp", "UpdateOp", "run_ops"]
