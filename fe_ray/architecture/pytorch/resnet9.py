"""ResNet9 for PyTorch: the fast CIFAR-10 network of David Page's "How to train your ResNet", as FastEstimator's."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fe_ray.architecture._checks import min_height_width, positive_int, spatial_size
from fe_ray.architecture.pytorch.fe_layout import accept_same_order_layout

_SLOPE = 0.1  # negative slope of every LeakyReLU


class _ConvBN(nn.Module):
    """3x3 'same' convolution (with bias), optional 2x2 max-pool, batch norm, then LeakyReLU(0.1).

    Args:
        in_channels: Channels entering the unit.
        out_channels: Channels leaving the unit.
        pool: Whether to max-pool (halving height and width) between the convolution and the batch norm.
        momentum: PyTorch batch-norm momentum (the weight of the newest batch in the running statistics).
    """

    def __init__(self, in_channels: int, out_channels: int, pool: bool = False, momentum: float = 0.1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels, momentum=momentum)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.pool:
            x = F.max_pool2d(x, 2)
        return F.leaky_relu(self.bn(x), negative_slope=_SLOPE)


class _Residual(nn.Module):
    """Two channel-preserving conv-BN-LeakyReLU units whose output is added to their input.

    Args:
        channels: Channels entering and leaving the unit.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.unit1 = _ConvBN(channels, channels)
        self.unit2 = _ConvBN(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.unit2(self.unit1(x))


class ResNet9(nn.Module):
    """A 9-layer residual CNN for CIFAR-10-sized images ending in a softmax, as FastEstimator's PyTorch ResNet9.

    Layers: a 64-channel prep unit, then three stages of conv(128 / 256 / 512 channels) - maxpool2 - batch norm -
    LeakyReLU(0.1), each followed by a two-unit residual block, then a global max-pool, a dense layer and a softmax.
    Every convolution is 3x3 with 'same' padding. For (3, 32, 32) inputs and 10 classes it has 7,756,554 trainable
    parameters. (FastEstimator's TensorFlow ResNet9 has no residual block after the 256-channel stage, so it is
    smaller; ``fe_ray.architecture.tensorflow.ResNet9`` keeps that difference.)

    Args:
        input_size: (channels, height, width) of the inputs; height and width must be at least 16.
        classes: Number of output classes.

    Raises:
        ValueError: If ``input_size`` is not three positive integers, height or width is under 16, or ``classes``
            is not a positive integer.
    """

    def __init__(self, input_size: tuple[int, int, int] = (3, 32, 32), classes: int = 10) -> None:
        channels, height, width = spatial_size("ResNet9", "input_size", input_size, channels_first=True)
        min_height_width("ResNet9", "input_size", input_size, height, width, minimum=16)
        positive_int("ResNet9", "classes", classes)
        super().__init__()
        accept_same_order_layout(self)  # FastEstimator's saved weights load too (fe_layout)
        momentum = 0.2  # PyTorch's convention for Keras' momentum=0.8, which FastEstimator's TF ResNet9 uses
        self.prep = _ConvBN(channels, 64, momentum=momentum)
        self.layer1 = _ConvBN(64, 128, pool=True, momentum=momentum)
        self.residual1 = _Residual(128)
        self.layer2 = _ConvBN(128, 256, pool=True, momentum=momentum)
        self.residual2 = _Residual(256)
        self.layer3 = _ConvBN(256, 512, pool=True, momentum=momentum)
        self.residual3 = _Residual(512)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class probabilities of shape (batch, classes) for images of shape (batch, channels, height, width)."""
        x = self.prep(x)
        x = self.residual1(self.layer1(x))
        x = self.residual2(self.layer2(x))
        x = self.residual3(self.layer3(x))
        x = torch.amax(x, dim=(2, 3))  # global max-pool
        return F.softmax(self.fc(x), dim=-1)
