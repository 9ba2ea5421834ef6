"""UNet for TensorFlow / Keras: the encoder-decoder segmentation network of Ronneberger et al., as
FastEstimator's."""

from __future__ import annotations

import keras
from keras import layers

from fe_ray.architecture._checks import min_height_width, positive_int, spatial_size


def _conv(x: keras.KerasTensor, channels: int) -> keras.KerasTensor:
    """A 3x3 'same' convolution with ReLU and He-normal weights on ``x``."""
    return layers.Conv2D(channels, 3, activation="relu", padding="same", kernel_initializer="he_normal")(x)


def _up(x: keras.KerasTensor, channels: int) -> keras.KerasTensor:
    """Bilinear 2x upsampling of ``x`` followed by a 3x3 conv-ReLU to ``channels``."""
    return _conv(layers.UpSampling2D(size=2, interpolation="bilinear")(x), channels)


def encode(inputs: keras.KerasTensor) -> tuple[keras.KerasTensor, list[keras.KerasTensor]]:
    """The contracting path UNet and AttentionUNet share: the bottleneck's output and the four skip tensors."""
    x, skips = inputs, []
    for channels in (64, 128, 256, 512):
        x = _conv(_conv(x, channels), channels)
        if channels == 512:
            x = layers.Dropout(0.5)(x)
        skips.append(x)
        x = layers.MaxPooling2D(2)(x)
    return layers.Dropout(0.5)(_conv(_conv(x, 1024), 1024)), skips


def UNet(input_size: tuple[int, int, int] = (128, 128, 1), output_channel: int = 1) -> keras.Model:  # noqa: N802
    """A standard UNet ending in a per-pixel sigmoid, as FastEstimator's TensorFlow UNet.

    The encoder has four stages of two 3x3 conv-ReLU layers (64, 128, 256, 512 channels) each followed by a 2x2
    max-pool, with dropout 0.5 after the 512-channel stage; the bottleneck has two 1024-channel conv-ReLU layers
    and dropout 0.5; each of the four decoder stages upsamples 2x (bilinear), convolves, concatenates the matching
    encoder output and applies two conv-ReLU layers; a 1x1 convolution with a sigmoid gives ``output_channel``
    maps the size of the input. 3x3 convolutions use He-normal weights. With one input and one output channel it
    has 34,512,193 weights, as the PyTorch UNet.

    Args:
        input_size: (height, width, channels) of the inputs; height and width must be multiples of 16.
        output_channel: Number of output channels (e.g. 1 for a binary mask).

    Returns:
        An uncompiled Keras functional model named "unet".

    Raises:
        ValueError: If ``input_size`` is not three positive integers, height or width is not a multiple of 16 (the
            four poolings halve it four times), or ``output_channel`` is not a positive integer.
    """
    _, height, width = spatial_size("UNet", "input_size", input_size, channels_first=False)
    min_height_width("UNet", "input_size", input_size, height, width, minimum=16, multiple=16)
    positive_int("UNet", "output_channel", output_channel)
    inputs = keras.Input(shape=tuple(input_size))
    x, skips = encode(inputs)
    for channels in (512, 256, 128, 64):
        x = layers.Concatenate(axis=-1)([skips.pop(), _up(x, channels)])
        x = _conv(_conv(x, channels), channels)
    outputs = layers.Conv2D(output_channel, 1, activation="sigmoid")(x)
    return keras.Model(inputs, outputs, name="unet")
