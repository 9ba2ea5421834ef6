"""LeNet for PyTorch."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def _after_convs(size: int, kernel: int = 3, pool: int = 2) -> int:
    """Spatial size after conv-pool-conv-pool-conv with 'valid' padding."""
    size = (size - (kernel - 1)) // pool
    size = (size - (kernel - 1)) // pool
    return size - (kernel - 1)


class LeNet(nn.Module):
    """A LeNet-style CNN (about 93k parameters for 28x28 inputs) ending in a softmax, as FastEstimator's LeNet.

    Layers: conv3x3(32) - maxpool2 - conv3x3(64) - maxpool2 - conv3x3(64) - dense(64) - dense(classes) - softmax,
    with ReLU activations.

    Args:
        input_shape: (channels, height, width) of the inputs.
        classes: Number of output classes.

    Raises:
        ValueError: If the input is too small for the three convolutions, naming the minimum size.
    """

    def __init__(self, input_shape: tuple[int, int, int] = (1, 28, 28), classes: int = 10) -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"LeNet input_shape must be (channels, height, width), got {input_shape!r}.")
        height, width = _after_convs(input_shape[1]), _after_convs(input_shape[2])
        if height < 1 or width < 1:
            raise ValueError(f"LeNet needs inputs of at least 18x18 pixels, got {input_shape[1]}x{input_shape[2]}.")
        self.conv1 = nn.Conv2d(input_shape[0], 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.conv3 = nn.Conv2d(64, 64, 3)
        self.fc1 = nn.Linear(height * width * 64, 64)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.conv3(x))
        x = F.relu(self.fc1(torch.flatten(x, start_dim=1)))
        return F.softmax(self.fc2(x), dim=-1)
