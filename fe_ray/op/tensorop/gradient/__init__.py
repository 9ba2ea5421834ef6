"""TensorOps computing gradients inside a Network step."""

from fe_ray.op.tensorop.gradient.fgsm import FGSM
from fe_ray.op.tensorop.gradient.gradient import GradientOp
from fe_ray.op.tensorop.gradient.watch import Watch

__all__ = ["FGSM", "GradientOp", "Watch"]
