"""UNet for PyTorch: the encoder-decoder segmentation network of Ronneberger et al., as FastEstimator's."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fe_ray.architecture._checks import min_height_width, positive_int, spatial_size
from fe_ray.architecture.pytorch.fe_layout import accept_same_order_layout


def _conv(in_channels: int, out_channels: int, kernel: int = 3) -> nn.Conv2d:
    """A 'same'-padded convolution with He-normal weights and zero bias."""
    conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)
    nn.init.kaiming_normal_(conv.weight)
    nn.init.zeros_(conv.bias)
    return conv


def encode(encoders: nn.ModuleList, bottleneck: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor,
                                                                                       list[torch.Tensor]]:
    """The contracting path UNet and AttentionUNet share: the bottleneck's output and each encoder's output."""
    skips = []
    for encoder in encoders:
        x = encoder(x)
        skips.append(x)
        x = F.max_pool2d(x, 2)
    return bottleneck(x), skips


def _double_conv(in_channels: int, out_channels: int) -> list[nn.Module]:
    """Two 3x3 conv-ReLU pairs, the first changing the channels to ``out_channels``."""
    return [_conv(in_channels, out_channels), nn.ReLU(), _conv(out_channels, out_channels), nn.ReLU()]


class _Up(nn.Sequential):
    """Two 3x3 conv-ReLU pairs to ``mid_channels``, 2x upsampling, and a 3x3 conv-ReLU to ``out_channels``.

    Args:
        in_channels: Channels entering the block.
        mid_channels: Channels of the two convolutions before the upsampling.
        out_channels: Channels leaving the block.
        bilinear: Upsample bilinearly (corners aligned) rather than to the nearest pixel.
    """

    def __init__(self, in_channels: int, mid_channels: int, out_channels: int, bilinear: bool = False) -> None:
        upsample = (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True) if bilinear
                    else nn.Upsample(scale_factor=2))
        super().__init__(*_double_conv(in_channels, mid_channels), upsample, _conv(mid_channels, out_channels),
                         nn.ReLU())


class UNet(nn.Module):
    """A standard UNet ending in a per-pixel sigmoid, as FastEstimator's PyTorch UNet.

    The encoder has four stages of two 3x3 conv-ReLU pairs (64, 128, 256, 512 channels) each followed by a 2x2
    max-pool; the bottleneck has two 1024-channel conv-ReLU pairs; each of the four decoder stages upsamples 2x
    (nearest), convolves, concatenates the matching encoder output and applies two conv-ReLU pairs; a 1x1
    convolution and a sigmoid give ``output_channel`` maps the size of the input. Convolutions use He-normal
    weights and zero biases. With one input and one output channel it has 34,512,193 parameters.

    Args:
        input_size: (channels, height, width) of the inputs; height and width must be multiples of 16.
        output_channel: Number of output channels (e.g. 1 for a binary mask).

    Raises:
        ValueError: If ``input_size`` is not three positive integers, height or width is not a multiple of 16 (the
            four poolings halve it four times), or ``output_channel`` is not a positive integer.
    """

    def __init__(self, input_size: tuple[int, int, int] = (1, 128, 128), output_channel: int = 1) -> None:
        channels, height, width = spatial_size("UNet", "input_size", input_size, channels_first=True)
        min_height_width("UNet", "input_size", input_size, height, width, minimum=16, multiple=16)
        positive_int("UNet", "output_channel", output_channel)
        super().__init__()
        accept_same_order_layout(self)  # FastEstimator's saved weights load too (fe_layout)
        self.input_size = tuple(input_size)
        widths = (64, 128, 256, 512)
        self.encoders = nn.ModuleList(nn.Sequential(*_double_conv(c_in, c_out))
                                      for c_in, c_out in zip((channels, *widths[:-1]), widths))
        self.bottleneck = _Up(512, 1024, 512)
        # Each decoder takes the previous output concatenated with the encoder output of the same size.
        self.decoders = nn.ModuleList([_Up(1024, 512, 256), _Up(512, 256, 128), _Up(256, 128, 64)])
        self.head = nn.Sequential(*_double_conv(128, 64), _conv(64, output_channel, kernel=1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per-pixel probabilities of shape (batch, output_channel, height, width) for inputs of shape (batch,
        channels, height, width)."""
        x, skips = encode(self.encoders, self.bottleneck, x)
        for decoder in self.decoders:
            x = decoder(torch.cat((x, skips.pop()), dim=1))
        return self.head(torch.cat((x, skips.pop()), dim=1))
