"""Wide Residual Network for PyTorch (Zagoruyko & Komodakis, 2016), as FastEstimator's."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fe_ray.architecture._checks import positive_int, wrn_blocks
from fe_ray.architecture.pytorch.fe_layout import accept_same_order_layout


class _PreActBlock(nn.Module):
    """A pre-activation residual block: BN-ReLU-conv3x3-BN-ReLU-(dropout)-conv3x3 plus a shortcut.

    When the channels change, the shortcut is a 1x1 convolution of the pre-activated input; otherwise it is the
    input itself. Convolutions have no bias.

    Args:
        in_channels: Channels entering the block.
        out_channels: Channels leaving the block.
        stride: Stride of the first convolution and the shortcut (2 halves height and width).
        dropout: Dropout rate between the two convolutions while training.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.dropout = dropout
        self.shortcut = (None if in_channels == out_channels
                         else nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = F.relu(self.bn1(x))
        out = F.relu(self.bn2(self.conv1(activated)))
        if self.dropout > 0:
            out = F.dropout(out, p=self.dropout, training=self.training)
        out = self.conv2(out)
        return out + (x if self.shortcut is None else self.shortcut(activated))


class WideResidualNetwork(nn.Module):
    """A Wide Residual Network WRN-``depth``-``widen_factor`` for 3-channel images, as FastEstimator's PyTorch one.

    A 3x3 convolution to 16 channels, three stages of N = (depth - 4) / 6 pre-activation residual blocks with
    16, 32 and 64 times ``widen_factor`` channels (the second and third stages start with stride 2), then
    BN-ReLU, global average pooling and a dense layer. Like FastEstimator's, it returns **logits** (no softmax):
    pair it with a cross-entropy loss built with ``from_logits=True``. WRN-28-10 for 10 classes has 36,477,994
    trainable parameters. Any height and width of at least 1 pixel work.

    Args:
        depth: Total depth, 6 * N + 4 for some N >= 1 (10, 16, 22, 28, 34, 40, ...).
        classes: Number of outputs.
        widen_factor: Width multiplier of the three stages.
        dropout: Dropout rate between the two convolutions of each block while training (0.0 for none).

    Raises:
        ValueError: If ``depth`` is not 6 * N + 4 with N >= 1, ``classes`` or ``widen_factor`` is not a positive
            integer, or ``dropout`` is outside [0, 1).
    """

    def __init__(self, depth: int = 28, classes: int = 10, widen_factor: int = 10, dropout: float = 0.0) -> None:
        blocks = wrn_blocks("WideResidualNetwork", depth, widen_factor, dropout)
        positive_int("WideResidualNetwork", "classes", classes)
        super().__init__()
        accept_same_order_layout(self)  # FastEstimator's saved weights load too (fe_layout)
        widths = (16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor)
        self.conv1 = nn.Conv2d(3, widths[0], 3, padding=1, bias=False)
        self.stages = nn.ModuleList(
            nn.Sequential(*(_PreActBlock(widths[stage] if i == 0 else widths[stage + 1], widths[stage + 1],
                                         stride if i == 0 else 1, dropout) for i in range(blocks)))
            for stage, stride in enumerate((1, 2, 2)))
        self.bn = nn.BatchNorm2d(widths[3])
        self.fc = nn.Linear(widths[3], classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, classes) for images of shape (batch, 3, height, width)."""
        x = self.conv1(x)
        for stage in self.stages:
            x = stage(x)
        x = F.relu(self.bn(x))
        return self.fc(torch.mean(x, dim=(2, 3)))
