"""ReflectionPadding2D: pad channels-last image batches by mirroring their edges (Keras)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="fe_ray")
class ReflectionPadding2D(keras.layers.Layer):
    """Pad ``(batch, height, width, channels)`` tensors by reflection, as FastEstimator's
    ``fe.layers.tensorflow.ReflectionPadding2D``: the border pixels are mirrored without repeating the edge row or
    column (TensorFlow's ``"REFLECT"``, numpy's ``np.pad(mode="reflect")``), so ``[0, 1, 2]`` padded by 1 is
    ``[1, 0, 1, 2, 1]``.

    Note the order of ``padding``: (width, height), as in FastEstimator: ``(1, 0)`` adds a column on the left and
    right and no rows. Each amount must be smaller than the input's size along its axis.

    Differences from FastEstimator: ``compute_output_shape`` adds the width padding to the width and the height
    padding to the height (FastEstimator's swapped them, so its declared shapes were wrong for unequal padding);
    amounts that are not two non-negative ints, or not smaller than the input, raise a ValueError;
    ``get_config`` also records the base Layer settings (name, dtype, trainable), which the constructor accepts as
    keyword arguments. The class is registered for Keras serialisation as ``fe_ray>ReflectionPadding2D``.

    Args:
        padding: (width, height): how many columns to add on each side, and how many rows on top and bottom.
        **kwargs: Base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ``trainable``).

    Raises:
        ValueError: If ``padding`` is not two non-negative ints; when built, if the input is not 4-D or an amount is
            not smaller than the input's size along its axis.
    """

    def __init__(self, padding: tuple[int, int] = (1, 1), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(padding, Sequence) or isinstance(padding, str) or len(padding) != 2 or not all(
                isinstance(p, Integral) and not isinstance(p, bool) and p >= 0 for p in padding):
            raise ValueError(f"ReflectionPadding2D padding must be two non-negative ints (width, height), got "
                             f"{padding!r}; e.g. (1, 1).")
        self.padding = (int(padding[0]), int(padding[1]))
        self.input_spec = [keras.layers.InputSpec(ndim=4)]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "padding": self.padding}

    def build(self, input_shape: tuple[Any, ...]) -> None:
        if len(input_shape) != 4:
            raise ValueError(f"ReflectionPadding2D needs (batch, height, width, channels) inputs, got shape "
                             f"{tuple(input_shape)}.")
        w_pad, h_pad = self.padding
        height, width = input_shape[1], input_shape[2]
        if (height is not None and h_pad >= height) or (width is not None and w_pad >= width):
            raise ValueError(f"ReflectionPadding2D padding (width, height) {self.padding} must be smaller than the "
                             f"input's width and height, got an input of {height}x{width} (height x width).")

    def compute_output_shape(self, input_shape: tuple[Any, ...]) -> tuple[Any, ...]:
        w_pad, h_pad = self.padding
        batch, height, width, channels = input_shape
        return (batch, None if height is None else height + 2 * h_pad, None if width is None else width + 2 * w_pad,
                channels)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        w_pad, h_pad = self.padding
        return tf.pad(x, [[0, 0], [h_pad, h_pad], [w_pad, w_pad], [0, 0]], mode="REFLECT")
