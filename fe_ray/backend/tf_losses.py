"""Loss math for TF tensors (Keras loss functions), with the class axis last."""

from __future__ import annotations

import keras
import tensorflow as tf


def cross_entropy(y_pred: tf.Tensor, y_true: tf.Tensor, form: str, from_logits: bool = False,
                  class_weights: dict[int, float] | None = None, average: bool = True) -> tf.Tensor:
    """Cross entropy of one of the forms 'binary', 'sparse' or 'categorical'.

    Args:
        y_pred: Predictions (probabilities, or logits when ``from_logits``), class axis last.
        y_true: Labels: 0/1 (binary), class indices (sparse) or one-hot / soft targets (categorical).
        form: Which cross entropy to compute.
        from_logits: Whether ``y_pred`` holds logits.
        class_weights: Optional ``{class: weight}``; each sample's loss is multiplied by its class's weight
            (classes not listed weigh 1).
        average: Return the mean over samples (a scalar) instead of the per-sample losses.
    """
    if form == "binary":
        y_true = tf.reshape(tf.cast(y_true, y_pred.dtype), tf.shape(y_pred))
        loss = keras.losses.binary_crossentropy(y_true, y_pred, from_logits=from_logits)
        labels = tf.cast(tf.round(y_true[..., 0]), tf.int32)
        num_classes = 2
    elif form == "sparse":
        labels = tf.cast(tf.reshape(y_true, tf.shape(y_pred)[:-1]), tf.int32)
        loss = keras.losses.sparse_categorical_crossentropy(labels, y_pred, from_logits=from_logits)
        num_classes = int(y_pred.shape[-1])
    elif form == "categorical":
        y_true = tf.cast(y_true, y_pred.dtype)
        loss = keras.losses.categorical_crossentropy(y_true, y_pred, from_logits=from_logits)
        labels = tf.cast(tf.argmax(y_true, axis=-1), tf.int32)
        num_classes = int(y_pred.shape[-1])
    else:
        raise ValueError(f"Unknown cross entropy form {form!r}; valid forms are 'binary', 'sparse', 'categorical'.")
    if class_weights:
        size = max(num_classes, max(int(k) for k in class_weights) + 1)
        table = [1.0] * size
        for cls, weight in class_weights.items():
            table[int(cls)] = float(weight)
        loss = loss * tf.gather(tf.constant(table, dtype=loss.dtype), labels)
    return tf.reduce_mean(loss) if average else loss


def mean_squared_error(y_pred: tf.Tensor, y_true: tf.Tensor, average: bool = True) -> tf.Tensor:
    """Squared error averaged over the last axis (per sample), and over samples when ``average``."""
    y_true = tf.reshape(tf.cast(y_true, y_pred.dtype), tf.shape(y_pred))
    loss = tf.reduce_mean(tf.square(y_pred - y_true), axis=-1)
    return tf.reduce_mean(loss) if average else loss
