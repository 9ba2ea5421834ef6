"""Attention UNet for TensorFlow / Keras (Oktay et al., 2018): a UNet whose skip connections pass through attention
gates, as FastEstimator's."""

from __future__ import annotations

import keras
from keras import layers

from fe_ray.architecture._checks import min_height_width, spatial_size
from fe_ray.architecture.tensorflow.unet import _conv, _up, encode


def _attention_gate(decoder: keras.KerasTensor, encoder: keras.KerasTensor, channels: int) -> keras.KerasTensor:
    """``encoder`` scaled per pixel by sigmoid(BN(conv1x1_to_1(relu(BN(conv1x1(decoder)) + BN(conv1x1(encoder))))))."""
    dec = layers.BatchNormalization()(layers.Conv2D(channels, 1)(decoder))
    enc = layers.BatchNormalization()(layers.Conv2D(channels, 1)(encoder))
    hidden = layers.ReLU()(layers.Add()([enc, dec]))
    gate = layers.BatchNormalization()(layers.Conv2D(1, 1)(hidden))
    return layers.Multiply()([encoder, layers.Activation("sigmoid")(gate)])


def AttentionUNet(input_size: tuple[int, int, int] = (128, 128, 1)) -> keras.Model:  # noqa: N802
    """A UNet with attention-gated skip connections and one sigmoid output map, as FastEstimator's TensorFlow one.

    The same layers as :func:`~fe_ray.architecture.tensorflow.UNet` with one output channel, except that each
    encoder output is multiplied by an attention gate computed from it and the upsampled decoder features before
    being concatenated. For one input channel it has 35,219,093 weights, 35,215,245 of them trainable (as many as
    the PyTorch AttentionUNet has).

    Args:
        input_size: (height, width, channels) of the inputs; height and width must be multiples of 16.

    Returns:
        An uncompiled Keras functional model named "attention_unet".

    Raises:
        ValueError: If ``input_size`` is not three positive integers or height or width is not a multiple of 16
            (the four poolings halve it four times).
    """
    _, height, width = spatial_size("AttentionUNet", "input_size", input_size, channels_first=False)
    min_height_width("AttentionUNet", "input_size", input_size, height, width, minimum=16, multiple=16)
    inputs = keras.Input(shape=tuple(input_size))
    x, skips = encode(inputs)
    for channels in (512, 256, 128, 64):
        up = _up(x, channels)
        x = layers.Concatenate(axis=-1)([_attention_gate(up, skips.pop(), channels), up])
        x = _conv(_conv(x, channels), channels)
    outputs = layers.Conv2D(1, 1, activation="sigmoid")(x)
    return keras.Model(inputs, outputs, name="attention_unet")
