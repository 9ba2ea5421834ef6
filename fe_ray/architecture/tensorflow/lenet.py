"""LeNet for TensorFlow / Keras."""

from __future__ import annotations

import keras
from keras import layers


def LeNet(input_shape: tuple[int, int, int] = (28, 28, 1), classes: int = 10) -> keras.Model:
    """A LeNet-style CNN (about 93k parameters for 28x28 inputs) ending in a softmax, as FastEstimator's LeNet.

    Layers: conv3x3(32) - maxpool2 - conv3x3(64) - maxpool2 - conv3x3(64) - dense(64) - dense(classes) - softmax,
    with ReLU activations.

    Args:
        input_shape: (height, width, channels) of the inputs.
        classes: Number of output classes.

    Returns:
        An uncompiled Keras Sequential model.

    Raises:
        ValueError: If ``input_shape`` is not (height, width, channels), or height or width is under 18 (the
            smallest size its three convolutions and two poolings leave a pixel of).
    """
    if len(input_shape) != 3:
        raise ValueError(f"LeNet input_shape must be (height, width, channels), got {input_shape!r}.")
    if min(input_shape[0], input_shape[1]) < 18:
        raise ValueError(f"LeNet needs inputs of at least 18x18 pixels, got input_shape {tuple(input_shape)!r}; "
                         "resize or pad the images in the Pipeline.")
    return keras.Sequential([
        keras.Input(shape=input_shape),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 3, activation="relu"),
        layers.Flatten(),
        layers.Dense(64, activation="relu"),
        layers.Dense(classes, activation="softmax"),
    ], name="lenet")
