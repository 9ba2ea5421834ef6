"""ResNet9 for TensorFlow / Keras: the fast CIFAR-10 network of David Page's "How to train your ResNet", as
FastEstimator's."""

from __future__ import annotations

import keras
from keras import layers

from fe_ray.architecture._checks import min_height_width, positive_int, spatial_size


def _conv_bn(x: keras.KerasTensor, channels: int, pool: bool = False) -> keras.KerasTensor:
    """3x3 'same' convolution, optional 2x2 max-pool, batch norm (momentum 0.8) and LeakyReLU(0.1) on ``x``."""
    x = layers.Conv2D(channels, 3, padding="same")(x)
    if pool:
        x = layers.MaxPooling2D(2)(x)
    x = layers.BatchNormalization(momentum=0.8)(x)
    return layers.LeakyReLU(negative_slope=0.1)(x)


def _residual(x: keras.KerasTensor, channels: int) -> keras.KerasTensor:
    """``x`` plus two channel-preserving conv-BN-LeakyReLU units applied to it."""
    return layers.Add()([x, _conv_bn(_conv_bn(x, channels), channels)])


def ResNet9(input_size: tuple[int, int, int] = (32, 32, 3), classes: int = 10) -> keras.Model:  # noqa: N802
    """A 9-layer residual CNN for CIFAR-10-sized images ending in a softmax, as FastEstimator's TensorFlow ResNet9.

    Layers: a 64-channel prep unit, then three stages of conv(128 / 256 / 512 channels) - maxpool2 - batch norm
    (momentum 0.8) - LeakyReLU(0.1); the 128- and 512-channel stages are followed by a two-unit residual block (as
    in FastEstimator, the 256-channel stage has none, unlike its PyTorch ResNet9). Then a global max-pool, a dense
    layer and a float32 softmax (float32 also under mixed precision). Every convolution is 3x3 with 'same' padding.
    For (32, 32, 3) inputs and 10 classes it has 6,579,850 weights, 6,575,370 of them trainable.

    Args:
        input_size: (height, width, channels) of the inputs; height and width must be at least 16.
        classes: Number of output classes.

    Returns:
        An uncompiled Keras functional model named "resnet9".

    Raises:
        ValueError: If ``input_size`` is not three positive integers, height or width is under 16, or ``classes``
            is not a positive integer.
    """
    _, height, width = spatial_size("ResNet9", "input_size", input_size, channels_first=False)
    min_height_width("ResNet9", "input_size", input_size, height, width, minimum=16)
    positive_int("ResNet9", "classes", classes)
    inputs = keras.Input(shape=tuple(input_size))
    x = _conv_bn(inputs, 64)
    x = _residual(_conv_bn(x, 128, pool=True), 128)
    x = _conv_bn(x, 256, pool=True)
    x = _residual(_conv_bn(x, 512, pool=True), 512)
    x = layers.GlobalMaxPooling2D()(x)
    x = layers.Dense(classes)(x)
    outputs = layers.Activation("softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="resnet9")
