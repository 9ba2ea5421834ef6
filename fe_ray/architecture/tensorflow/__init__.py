"""TensorFlow / Keras reference architectures, as FastEstimator's ``fe.architecture.tensorflow`` (each is a function
returning an uncompiled Keras model; inputs are channels-last)."""

from fe_ray.architecture.tensorflow.attention_unet import AttentionUNet
from fe_ray.architecture.tensorflow.lenet import LeNet
from fe_ray.architecture.tensorflow.resnet9 import ResNet9
from fe_ray.architecture.tensorflow.unet import UNet
from fe_ray.architecture.tensorflow.wideresnet import WideResidualNetwork

__all__ = ["AttentionUNet", "LeNet", "ResNet9", "UNet", "WideResidualNetwork"]
