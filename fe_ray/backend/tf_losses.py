"""Loss math for TF tensors (Keras loss functions), with the class axis last (TF's channels-last layout).

Every loss computes in float32 whatever the prediction's dtype: Keras clips probabilities to
``[epsilon, 1 - epsilon]`` in the prediction's dtype, and in float16 ``1 - 1e-7`` rounds to 1, which makes a
saturated sigmoid output's loss inf or NaN.
"""

from __future__ import annotations

import keras
import tensorflow as tf

#: The class axis of sparse / categorical predictions.
CLASS_AXIS = -1


def cross_entropy(y_pred: tf.Tensor, y_true: tf.Tensor, form: str, from_logits: bool = False,
                  class_weights: dict[int, float] | None = None, average: bool = True) -> tf.Tensor:
    """Cross entropy of one of the forms 'binary', 'sparse' or 'categorical', computed in float32.

    Args:
        y_pred: Predictions (probabilities, or logits when ``from_logits``). Binary: any shape ``(N, ...)``;
            sparse / categorical: ``(N, ..., C)`` with the class axis last.
        y_true: Labels: 0/1 with as many elements as ``y_pred`` (binary), class indices shaped ``(N, ...)`` or
            with a size-1 class axis (sparse), or one-hot / soft targets shaped like ``y_pred`` (categorical).
        form: Which cross entropy to compute.
        from_logits: Whether ``y_pred`` holds logits.
        class_weights: Optional ``{class: weight}``; each element's loss is multiplied by its true class's
            weight (classes not listed weigh 1).
        average: Return the mean loss (a float32 scalar) instead of per-sample losses: shape ``(N,)`` for binary
            (the mean over each sample's elements), ``(N, ...)`` (one per position) for sparse / categorical.

    Raises:
        ValueError: If ``form`` is unknown or a sparse / categorical prediction has no class axis.
    """
    if form not in ("binary", "sparse", "categorical"):
        raise ValueError(f"Unknown cross entropy form {form!r}; valid forms are 'binary', 'sparse', 'categorical'.")
    if form != "binary" and y_pred.shape.rank is not None and y_pred.shape.rank < 2:
        raise ValueError(f"{form} cross entropy needs a prediction shaped (batch, ..., classes), got shape "
                         f"{tuple(y_pred.shape)}; use form='binary' for one probability per sample.")
    y_pred = tf.cast(y_pred, tf.float32)
    if form == "binary":
        y_true = tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred))
        # Keras averages over the last axis; a trailing axis of size 1 makes its result element-wise, so that
        # class weights apply per element and a 1-D (N,) prediction still gives one loss per sample.
        loss = keras.losses.binary_crossentropy(y_true[..., None], y_pred[..., None], from_logits=from_logits)
        labels = tf.cast(tf.round(y_true), tf.int32)
        num_classes = 2
    elif form == "sparse":
        labels = tf.cast(tf.reshape(y_true, tf.shape(y_pred)[:-1]), tf.int32)
        loss = keras.losses.sparse_categorical_crossentropy(labels, y_pred, from_logits=from_logits)
        num_classes = int(y_pred.shape[-1])
    else:
        y_true = tf.cast(y_true, tf.float32)
        loss = keras.losses.categorical_crossentropy(y_true, y_pred, from_logits=from_logits)
        labels = tf.cast(tf.argmax(y_true, axis=-1), tf.int32)
        num_classes = int(y_pred.shape[-1])
    if class_weights:
        size = max(num_classes, max(int(k) for k in class_weights) + 1)
        table = [1.0] * size
        for cls, weight in class_weights.items():
            table[int(cls)] = float(weight)
        loss = loss * tf.gather(tf.constant(table, dtype=tf.float32), labels)
    if form == "binary" and loss.shape.rank != 0:
        # One value per sample, as FastEstimator: the mean over every element that belongs to it.
        loss = tf.reduce_mean(tf.reshape(loss, tf.stack([tf.shape(loss)[0], -1])), axis=1)
    return tf.reduce_mean(loss) if average else loss


def mean_squared_error(y_pred: tf.Tensor, y_true: tf.Tensor, average: bool = True) -> tf.Tensor:
    """Squared error averaged over the last axis (per sample), and over samples when ``average``; in float32."""
    y_pred = tf.cast(y_pred, tf.float32)
    y_true = tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred))
    loss = tf.reduce_mean(tf.square(y_pred - y_true), axis=-1)
    return tf.reduce_mean(loss) if average else loss
