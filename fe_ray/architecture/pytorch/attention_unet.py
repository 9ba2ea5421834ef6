"""Attention UNet for PyTorch (Oktay et al., 2018): a UNet whose skip connections pass through attention gates,
as FastEstimator's."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fe_ray.architecture._checks import min_height_width, spatial_size
from fe_ray.architecture.pytorch.fe_layout import accept_same_order_layout
from fe_ray.architecture.pytorch.unet import _conv, _double_conv, _Up, encode


class _AttentionGate(nn.Module):
    """Scales an encoder feature map per pixel by a sigmoid gate computed from it and a decoder feature map.

    gate = sigmoid(BN(conv1x1_to_1(relu(BN(conv1x1(decoder)) + BN(conv1x1(encoder)))))); output = encoder * gate.

    Args:
        channels: Channels of both inputs (and of the gate's hidden layer).
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.decoder_proj = nn.Sequential(nn.Conv2d(channels, channels, 1), nn.BatchNorm2d(channels))
        self.encoder_proj = nn.Sequential(nn.Conv2d(channels, channels, 1), nn.BatchNorm2d(channels))
        self.gate = nn.Sequential(nn.Conv2d(channels, 1, 1), nn.BatchNorm2d(1), nn.Sigmoid())

    def forward(self, decoder: torch.Tensor, encoder: torch.Tensor) -> torch.Tensor:
        hidden = F.relu(self.decoder_proj(decoder) + self.encoder_proj(encoder))
        return encoder * self.gate(hidden)


class AttentionUNet(nn.Module):
    """A UNet with attention-gated skip connections and one sigmoid output map, as FastEstimator's PyTorch one.

    The same encoder, bottleneck and decoder as :class:`~fe_ray.architecture.pytorch.UNet` (but with bilinear,
    corner-aligned upsampling), except that each encoder output is multiplied by an attention gate computed from
    it and the upsampled decoder features before being concatenated. For one input channel it has 35,215,245
    trainable parameters.

    Args:
        input_size: (channels, height, width) of the inputs; height and width must be multiples of 16.

    Raises:
        ValueError: If ``input_size`` is not three positive integers or height or width is not a multiple of 16
            (the four poolings halve it four times).
    """

    def __init__(self, input_size: tuple[int, int, int] = (1, 128, 128)) -> None:
        channels, height, width = spatial_size("AttentionUNet", "input_size", input_size, channels_first=True)
        min_height_width("AttentionUNet", "input_size", input_size, height, width, minimum=16, multiple=16)
        super().__init__()
        accept_same_order_layout(self)  # FastEstimator's saved weights load too (fe_layout)
        self.input_size = tuple(input_size)
        widths = (64, 128, 256, 512)
        self.encoders = nn.ModuleList(nn.Sequential(*_double_conv(c_in, c_out))
                                      for c_in, c_out in zip((channels, *widths[:-1]), widths))
        self.bottleneck = _Up(512, 1024, 512, bilinear=True)
        self.gates = nn.ModuleList(_AttentionGate(c) for c in reversed(widths))  # 512, 256, 128, 64
        self.decoders = nn.ModuleList([_Up(1024, 512, 256, bilinear=True), _Up(512, 256, 128, bilinear=True),
                                       _Up(256, 128, 64, bilinear=True)])
        self.head = nn.Sequential(*_double_conv(128, 64), _conv(64, 1, kernel=1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per-pixel probabilities of shape (batch, 1, height, width) for inputs of shape (batch, channels, height,
        width)."""
        x, skips = encode(self.encoders, self.bottleneck, x)
        for gate, decoder in zip(self.gates, [*self.decoders, self.head]):
            x = decoder(torch.cat((x, gate(x, skips.pop())), dim=1))
        return x
