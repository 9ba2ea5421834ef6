"""Loss TensorOps."""

from fe_ray.op.tensorop.loss.cross_entropy import CrossEntropy
from fe_ray.op.tensorop.loss.dice_loss import DiceLoss
from fe_ray.op.tensorop.loss.focal_loss import FocalLoss
from fe_ray.op.tensorop.loss.hinge import Hinge
from fe_ray.op.tensorop.loss.l1_loss import L1_Loss
from fe_ray.op.tensorop.loss.l2_regularization import L2Regularizaton
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.loss.mean_squared_error import MeanSquaredError
from fe_ray.op.tensorop.loss.mix_loss import MixLoss
from fe_ray.op.tensorop.loss.super_loss import SuperLoss

__all__ = ["CrossEntropy", "DiceLoss", "FocalLoss", "Hinge", "L1_Loss", "L2Regularizaton", "LossOp",
           "MeanSquaredError", "MixLoss", "SuperLoss"]
