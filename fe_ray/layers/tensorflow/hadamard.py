"""HadamardCode: an error-correcting-code output layer turning features into class probabilities (Keras)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from fe_ray.layers._hadamard import check_max_prob_power, distance_floor, head_sizes, layer_code_length, layer_codes

Shape = Sequence[Any]


def _is_shape(value: Any) -> bool:
    """Whether ``value`` is one tensor's shape (ints / None) rather than a list of shapes."""
    return isinstance(value, (Sequence, tf.TensorShape)) and all(d is None or isinstance(d, int) for d in value)


@keras.saving.register_keras_serializable(package="fe_ray")
class HadamardCode(keras.layers.Layer):
    """Map features to class probabilities through an error-correcting output code, as FastEstimator's
    ``fe.layers.tensorflow.HadamardCode`` (Verma & Swami, NeurIPS 2019: "Error Correcting Output Codes Improve
    Probability Estimation and Adversarial Robustness of Deep Neural Networks").

    A drop-in replacement for a final ``Dense(n_classes, activation="softmax")``. Each class owns one row of a
    Hadamard matrix (without its constant first column), ``code_length - 1`` entries of +1 / -1. The layer maps its
    input(s) linearly to ``code_length - 1`` values, squashes them with tanh, takes the L1 distance ``d_c`` to each
    class's code (at least a floor ``eps``) and returns the inverse-distance weights ``d_c ** -power``, normalised to
    sum to 1 per sample. ``eps`` is chosen so that a prediction exactly on a class's code gets probability
    ``max_prob``.

    Called on a list of ``(batch, n_i)`` tensors (e.g. the outputs of independent sub-networks, which gives the most
    adversarial robustness), the layer builds one ``Dense`` head per tensor, each producing an equal share of the
    code, the first also the remainder; a single ``(batch, n)`` tensor gets one head. The heads are built with the
    layer (``self.heads``), so saved weights reload.

    Differences from FastEstimator: ``get_config`` also records ``max_prob``, ``power`` and the base Layer settings
    (name, dtype, trainable), so a reloaded model computes the same probabilities (FastEstimator's kept only
    ``n_classes`` and ``code_length`` and so reloaded with the defaults); the constructor accepts those base Layer
    keyword arguments; the codebook follows the input's dtype (mixed precision); ``n_classes`` < 2 and calls with a
    number of tensors other than the built one raise a ValueError. The class is registered for Keras serialisation
    as ``fe_ray>HadamardCode``, so ``keras.models.load_model`` needs no ``custom_objects`` once it is imported.

    Args:
        n_classes: How many classes to output probabilities for (at least 2).
        code_length: The code length: a power of 2 >= ``n_classes``; None for the smallest such power, but at least
            16.
        max_prob: The probability of a class whose code the prediction matches exactly; in (0, 1). Values clearly
            below 1 (0.95, 0.8) help adversarial robustness.
        power: The inverse distance weighting power, > 0. 1 gives intuitive probabilities; small values such as 0.25
            help adversarial robustness, large ones (2, 3) converge a little faster.
        **kwargs: Base ``keras.layers.Layer`` arguments (``name``, ``dtype``, ``trainable``).

    Raises:
        ValueError: If an argument is out of range (naming it); when built, if an input is not ``(batch, n)``, the
            inputs' batch sizes differ or there are more inputs than ``code_length - 1``.
    """

    def __init__(self, n_classes: int, code_length: int | None = None, max_prob: float = 0.95, power: float = 1.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.code_length = layer_code_length(n_classes, code_length)
        self.n_classes = int(n_classes)
        self.max_prob, self.power = check_max_prob_power(max_prob, power)
        self.eps = distance_floor(self.n_classes, self.code_length, self.max_prob, self.power)
        self.codes = layer_codes(self.n_classes, self.code_length)  # numpy; cast to the input's dtype when called
        self.labels: tf.Tensor | None = None  # FastEstimator's attribute: the codebook as a tensor, once built
        self.heads: list[keras.layers.Dense] = []

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "n_classes": self.n_classes, "code_length": self.code_length,
                "max_prob": self.max_prob, "power": self.power}

    def build(self, input_shape: Shape | list[Shape]) -> None:
        shapes = [input_shape] if _is_shape(input_shape) else list(input_shape)
        sizes = head_sizes(len(shapes), self.code_length)
        shapes = [tuple(shape) for shape in shapes]
        batch = None
        for shape in shapes:
            if len(shape) != 2:
                raise ValueError(f"HadamardCode needs inputs shaped (batch, features) or a list of them, got an input "
                                 f"of shape {shape}; flatten it first.")
            if batch is not None and shape[0] is not None and shape[0] != batch:
                raise ValueError(f"HadamardCode inputs must share one batch size, got shapes {shapes}.")
            batch = shape[0] if batch is None else batch
        self.heads = []
        for index, (size, shape) in enumerate(zip(sizes, shapes)):
            head = keras.layers.Dense(size, dtype=self.dtype_policy, name=f"head_{index}")
            head.build(shape)
            self.heads.append(head)
        self.labels = tf.constant(self.codes)

    def call(self, x: tf.Tensor | list[tf.Tensor], **kwargs: Any) -> tf.Tensor:
        if isinstance(x, (list, tuple)):
            if len(x) != len(self.heads):
                raise ValueError(f"HadamardCode was built for {len(self.heads)} input head(s) but got {len(x)} "
                                 "tensors.")
            x = tf.concat([head(tensor) for head, tensor in zip(self.heads, x)], axis=-1)
        elif len(self.heads) == 1:
            x = self.heads[0](x)
        else:
            raise ValueError(f"HadamardCode was built for {len(self.heads)} input heads; pass a list of that many "
                             "tensors, not a single one.")
        x = tf.tanh(x)
        codes = tf.cast(self.codes, x.dtype)
        distances = tf.reduce_sum(tf.abs(tf.expand_dims(x, axis=1) - codes), axis=-1)  # L1, (batch, n_classes)
        weights = 1.0 / tf.pow(tf.maximum(distances, tf.cast(self.eps, x.dtype)), tf.cast(self.power, x.dtype))
        return weights / tf.reduce_sum(weights, axis=-1, keepdims=True)

    def compute_output_shape(self, input_shape: Shape | list[Shape]) -> tuple[Any, int]:
        first = input_shape if _is_shape(input_shape) else input_shape[0]
        return (tuple(first)[0], self.n_classes)
