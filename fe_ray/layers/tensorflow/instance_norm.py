"""InstanceNormalization: normalise each sample's channels over height and width (Keras)."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="fe_ray")
class InstanceNormalization(keras.layers.Layer):
    """Instance normalisation of ``(batch, height, width, channels)`` tensors (Ulyanov et al. 2016,
    arXiv:1607.08022), as FastEstimator's ``fe.layers.tensorflow.InstanceNormalization``.

    Every channel of every sample is shifted and scaled to mean 0 and variance 1 over its height and width
    (``(x - mean) / sqrt(variance + epsilon)``, the biased variance), then multiplied by a learned per-channel
    ``scale`` and shifted by a learned per-channel ``offset``. As in FastEstimator (and the pix2pix / CycleGAN
    reference code it follows), ``scale`` starts as random normal values of mean 0 and standard deviation 0.02, not
    as ones, and ``offset`` as zeros.

    Differences from FastEstimator: inputs that are not 4-D and a negative or non-numeric ``epsilon`` raise a
    ValueError; ``get_config`` also records the base Layer settings (name, dtype, trainable), which the constructor
    accepts as keyword arguments. The class is registered for Keras serialisation as ``fe_ray>InstanceNormalization``.

    Args:
        epsilon: Added to the variance before the square root, for numerical stability; >= 0.
        **kwargs: Base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ``trainable``).

    Raises:
        ValueError: If ``epsilon`` is negative or not a finite number; when built, if the input is not 4-D.
    """

    def __init__(self, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(epsilon, bool) or not isinstance(epsilon, Real) or not 0.0 <= epsilon < math.inf:
            raise ValueError(f"InstanceNormalization epsilon must be a finite number >= 0 (e.g. 1e-5), got "
                             f"{epsilon!r}.")
        self.epsilon = float(epsilon)
        self.scale: keras.Variable | None = None
        self.offset: keras.Variable | None = None

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "epsilon": self.epsilon}

    def build(self, input_shape: tuple[Any, ...]) -> None:
        if len(input_shape) != 4:
            raise ValueError(f"InstanceNormalization needs (batch, height, width, channels) inputs, got shape "
                             f"{tuple(input_shape)}.")
        channels = input_shape[-1:]
        self.scale = self.add_weight(name="scale", shape=channels,
                                     initializer=keras.initializers.RandomNormal(mean=0.0, stddev=0.02),
                                     trainable=True)
        self.offset = self.add_weight(name="offset", shape=channels, initializer="zeros", trainable=True)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        mean, variance = tf.nn.moments(x, axes=[1, 2], keepdims=True)
        normalized = (x - mean) * tf.math.rsqrt(variance + tf.cast(self.epsilon, x.dtype))
        return tf.cast(self.scale, x.dtype) * normalized + tf.cast(self.offset, x.dtype)

    def compute_output_shape(self, input_shape: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(input_shape)
