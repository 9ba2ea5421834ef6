"""Wide Residual Network for TensorFlow / Keras (Zagoruyko & Komodakis, 2016), as FastEstimator's."""

from __future__ import annotations

import keras
from keras import layers

from fe_ray.architecture._checks import min_height_width, positive_int, spatial_size, wrn_blocks


def _conv_bn_relu(x: keras.KerasTensor, channels: int) -> keras.KerasTensor:
    """A bias-free 3x3 'same' He-normal convolution, batch norm (momentum 0.9) and ReLU on ``x``."""
    x = layers.Conv2D(channels, 3, padding="same", kernel_initializer="he_normal", use_bias=False)(x)
    x = layers.BatchNormalization(momentum=0.9)(x)
    return layers.Activation("relu")(x)


def _block(x: keras.KerasTensor, channels: int, dropout: float) -> keras.KerasTensor:
    """Two conv-BN-ReLU units (dropout between them) plus a shortcut: ``x`` itself, or a bias-free 1x1 He-normal
    convolution of it when its channels differ from ``channels``."""
    shortcut = x
    if x.shape[-1] != channels:
        shortcut = layers.Conv2D(channels, 1, padding="same", kernel_initializer="he_normal", use_bias=False)(x)
    y = _conv_bn_relu(x, channels)
    if dropout > 0.0:
        y = layers.Dropout(dropout)(y)
    return layers.Add()([shortcut, _conv_bn_relu(y, channels)])


def WideResidualNetwork(input_shape: tuple[int, int, int], depth: int = 28, widen_factor: int = 10,  # noqa: N802
                        dropout: float = 0.0, classes: int = 10, activation: str | None = "softmax") -> keras.Model:
    """A Wide Residual Network WRN-``depth``-``widen_factor``, as FastEstimator's TensorFlow one.

    A conv-BN-ReLU unit with 16 channels, then three stages of N = (depth - 4) / 6 residual blocks with 16, 32 and
    64 times ``widen_factor`` channels, a 2x2 max-pool between stages, global average pooling and a dense layer
    with ``activation``. Note the argument order differs from the PyTorch WideResidualNetwork (FastEstimator's
    does too) and that this one takes the input shape. WRN-28-10 on (32, 32, 3) inputs with 10 classes has
    36,497,146 weights, 36,479,194 of them trainable (as many as the PyTorch one has).

    Args:
        input_shape: (height, width, channels) of the inputs; height and width must be at least 4.
        depth: Total depth, 6 * N + 4 for some N >= 1 (10, 16, 22, 28, 34, 40, ...).
        widen_factor: Width multiplier of the three stages.
        dropout: Dropout rate between the two convolutions of each block while training (0.0 for none).
        classes: Number of outputs.
        activation: Activation of the last dense layer; "softmax" for probabilities, None for logits.

    Returns:
        An uncompiled Keras functional model named "wide_residual_network".

    Raises:
        ValueError: If ``input_shape`` is not three positive integers or height or width is under 4 (the two
            poolings halve it twice), ``depth`` is not 6 * N + 4 with N >= 1, ``widen_factor`` or ``classes`` is
            not a positive integer, or ``dropout`` is outside [0, 1).
    """
    name = "WideResidualNetwork"
    _, height, width = spatial_size(name, "input_shape", input_shape, channels_first=False)
    min_height_width(name, "input_shape", input_shape, height, width, minimum=4)
    blocks = wrn_blocks(name, depth, widen_factor, dropout)
    positive_int(name, "classes", classes)
    inputs = keras.Input(shape=tuple(input_shape))
    x = _conv_bn_relu(inputs, 16)
    for stage, channels in enumerate((16 * widen_factor, 32 * widen_factor, 64 * widen_factor)):
        if stage:
            x = layers.MaxPooling2D(2)(x)
        for _ in range(blocks):
            x = _block(x, channels, dropout)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(classes, activation=activation)(x)
    return keras.Model(inputs, outputs, name="wide_residual_network")
