"""TensorOps: ops run by a Network on framework tensors."""

from fe_ray.op.tensorop import augmentation, gradient, loss, meta, model
from fe_ray.op.tensorop.argmax import Argmax
from fe_ray.op.tensorop.average import Average
from fe_ray.op.tensorop.dice import Dice
from fe_ray.op.tensorop.gather import Gather
from fe_ray.op.tensorop.loss import CrossEntropy, LossOp, MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.op.tensorop.normalize import Normalize
from fe_ray.op.tensorop.permute import Permute
from fe_ray.op.tensorop.reshape import Reshape
from fe_ray.op.tensorop.resize3d import Resize3D
from fe_ray.op.tensorop.tensorop import Delete, LambdaOp, TensorOp, run_ops
from fe_ray.op.tensorop.un_hadamard import UnHadamard

__all__ = ["Argmax", "Average", "CrossEntropy", "Delete", "Dice", "Gather", "LambdaOp", "LossOp", "MeanSquaredError",
           "ModelOp", "Normalize", "Permute", "Reshape", "Resize3D", "TensorOp", "UnHadamard", "UpdateOp",
           "augmentation", "gradient", "loss", "meta", "model", "run_ops"]
