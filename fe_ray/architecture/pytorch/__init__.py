"""PyTorch reference architectures, as FastEstimator's ``fe.architecture.pytorch`` (inputs are channels-first)."""

from fe_ray.architecture.pytorch.attention_unet import AttentionUNet
from fe_ray.architecture.pytorch.lenet import LeNet
from fe_ray.architecture.pytorch.resnet9 import ResNet9
from fe_ray.architecture.pytorch.unet import UNet
from fe_ray.architecture.pytorch.wideresnet import WideResidualNetwork

__all__ = ["AttentionUNet", "LeNet", "ResNet9", "UNet", "WideResidualNetwork"]
