"""TensorOps: ops run by a Network on framework tensors."""

from fe_ray.op.tensorop import gradient, loss, meta, model
from fe_ray.op.tensorop.average import Average
from fe_ray.op.tensorop.dice import Dice
from fe_ray.op.tensorop.loss import CrossEntropy, LossOp, MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.op.tensorop.tensorop import LambdaOp, TensorOp, run_ops

__all__ = ["Average", "CrossEntropy", "Dice", "LambdaOp", "LossOp", "MeanSquaredError", "ModelOp", "TensorOp",
           "UpdateOp", "gradient", "loss", "meta", "model", "run_ops"]
