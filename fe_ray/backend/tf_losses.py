"""Loss math for TF tensors (Keras loss functions), with the class axis last (TF's channels-last layout).

Every loss computes in float32 whatever the prediction's dtype: Keras clips probabilities to
``[epsilon, 1 - epsilon]`` in the prediction's dtype, and in float16 ``1 - 1e-7`` rounds to 1, which makes a
saturated sigmoid output's loss inf or NaN.
"""

from __future__ import annotations

import warnings

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
    if not from_logits:
        y_pred, from_logits = _logits_behind(y_pred, "Sigmoid" if form == "binary" else "Softmax")
    elif getattr(y_pred, "_keras_logits", None) is not None:
        # ``from_logits=True`` on a Keras sigmoid / softmax output, which holds probabilities: Keras 2 (and so
        # FastEstimator 1.7) computes the loss from the logits behind the activation and warns, where Keras 3
        # would apply the activation a second time and train on a wrong loss.
        warnings.warn(f"{form} cross entropy got from_logits=True, but the prediction is the output of a Keras "
                      "sigmoid / softmax activation (probabilities, not logits): the loss is computed from the "
                      "logits behind the activation, as Keras 2 and FastEstimator do. Pass from_logits=False, or "
                      "drop the model's final activation.", stacklevel=2)
        y_pred = y_pred._keras_logits
    y_pred = tf.cast(y_pred, tf.float32)
    if form == "binary":
        y_true = tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred))
        if from_logits:
            loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
        else:
            # Keras 2's formula (FastEstimator 1.7's), not Keras 3's: a saturated wrong prediction costs
            # -log(2e-7) ~ 15.42 there, where Keras 3 (no epsilon inside the log) gives ~ 16.12.
            loss = _binary_crossentropy_keras2(y_true, y_pred)
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


def _logits_behind(y_pred: tf.Tensor, activation: str) -> tuple[tf.Tensor, bool]:
    """``(logits, True)`` when ``y_pred`` is the output of a sigmoid / softmax whose input is known, else
    ``(y_pred, False)``.

    Keras' own losses (and so FastEstimator 1.7, which hands the model's output straight to them) recover these
    logits: from the ``_keras_logits`` that Keras' activations attach to their result, or, in a traced graph, from
    the activation op's input. The loss is then exact with a gradient, where the clipped probability caps a
    saturated wrong prediction's loss near 16 and gives it no gradient at all. It must happen here, before the
    float32 cast and reshapes that would hide the activation, also for float16 (mixed-precision) outputs, which
    saturate much sooner.
    """
    logits = getattr(y_pred, "_keras_logits", None)
    if logits is not None:
        return logits, True
    if tf.is_symbolic_tensor(y_pred) and y_pred.op.type == activation:
        return y_pred.op.inputs[0], True
    return y_pred, False


#: Keras' fuzz factor: probabilities are clipped to ``[EPSILON, 1 - EPSILON]`` and EPSILON is added inside the logs.
EPSILON = 1e-7


def _binary_crossentropy_keras2(y_true: tf.Tensor, prob: tf.Tensor) -> tf.Tensor:
    """Element-wise binary cross entropy of probabilities as Keras 2 (``tf.keras.backend.binary_crossentropy``)
    computes it, which FastEstimator 1.7 uses: ``-(y log(p + eps) + (1 - y) log(1 - p + eps))`` on ``p`` clipped
    to ``[eps, 1 - eps]``.

    The clip keeps both logs finite, so that the gradient stays finite (0 outside the clip range) even at p = 0
    or 1, where the unused branch of an unclipped log would give 0 * inf = NaN.

    Args:
        y_true: Labels (0/1 or soft) shaped like ``prob``, in its dtype.
        prob: Probabilities, float32 or float64.

    Returns:
        One loss per element, shaped like ``prob``.
    """
    eps = tf.cast(EPSILON, prob.dtype)
    prob = tf.clip_by_value(prob, eps, 1.0 - eps)
    return -(y_true * tf.math.log(prob + eps) + (1.0 - y_true) * tf.math.log(1.0 - prob + eps))


def mean_squared_error(y_pred: tf.Tensor, y_true: tf.Tensor, average: bool = True) -> tf.Tensor:
    """Squared error averaged over the last axis (per sample), and over samples when ``average``; in float32."""
    y_pred = tf.cast(y_pred, tf.float32)
    y_true = tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred))
    loss = tf.reduce_mean(tf.square(y_pred - y_true), axis=-1)
    return tf.reduce_mean(loss) if average else loss


def _at_least_float32(tensor: tf.Tensor) -> tf.Tensor:
    """``tensor`` in float32 when it is of lower precision (or not floating), else unchanged (float64 stays)."""
    tensor = tf.convert_to_tensor(tensor)
    return tensor if tensor.dtype == tf.float64 else tf.cast(tensor, tf.float32)


def _labels_like(y_true: tf.Tensor, y_pred: tf.Tensor, name: str) -> tf.Tensor:
    """``y_true`` in ``y_pred``'s dtype and shape; a ValueError unless it has one label per prediction."""
    y_true = tf.convert_to_tensor(y_true)
    if y_true.shape.is_fully_defined() and y_pred.shape.is_fully_defined() and \
            y_true.shape.num_elements() != y_pred.shape.num_elements():
        raise ValueError(f"{name} needs one target per prediction: got y_true of shape {tuple(y_true.shape)} for "
                         f"y_pred of shape {tuple(y_pred.shape)}; reshape y_true to {tuple(y_pred.shape)}.")
    return tf.reshape(tf.cast(y_true, y_pred.dtype), tf.shape(y_pred))


def regression_loss(y_pred: tf.Tensor, y_true: tf.Tensor, kind: str, beta: float = 1.0) -> tf.Tensor:
    """Element-wise 'huber', 'smooth_l1', 'l1' or 'hinge' loss, averaged over the last axis (for 1-d input too,
    which gives a scalar, except with 'l1' and 'huber', which keep 1-d input element-wise as FastEstimator does).

    Computed in float32 at least (float64 input stays float64).
    """
    y_pred = _at_least_float32(y_pred)
    y_true = _labels_like(y_true, y_pred, kind)
    error = tf.abs(y_pred - y_true)
    beta = tf.cast(beta, y_pred.dtype)
    if kind == "huber":  # quadratic up to beta, then linear with slope beta (torch's HuberLoss, Keras' huber)
        loss = tf.where(error <= beta, 0.5 * tf.square(error), beta * (error - 0.5 * beta))
    elif kind == "smooth_l1":  # huber / beta: quadratic below beta, then |error| - beta / 2 (torch's SmoothL1Loss)
        loss = tf.where(error < beta, 0.5 * tf.square(error) / beta, error - 0.5 * beta)
    elif kind == "l1":
        loss = error
    else:  # hinge, for labels of -1 / 1
        loss = tf.maximum(1.0 - y_true * y_pred, tf.zeros_like(y_pred))
    rank = loss.shape.rank
    # FastEstimator averages over the last axis, also of a 1-d (batch,) input, which then gives one scalar; only
    # its TF l1 and huber add a last axis to 1-d input first (Keras' MAE / huber need one) and so keep one loss
    # per element.
    if rank == 0 or (rank == 1 and kind in ("l1", "huber")):
        return loss
    return tf.reduce_mean(loss, axis=-1)


def focal(y_pred: tf.Tensor, y_true: tf.Tensor, gamma: float, alpha: float, from_logits: bool,
          label_smoothing: float = 0.0) -> tuple[tf.Tensor, tf.Tensor]:
    """Element-wise sigmoid focal loss (labels squeezed towards 0.5 by ``label_smoothing``) and the unsmoothed 0/1
    labels in the loss's dtype (for per-sample normalisation)."""
    # Before the cast, which would hide the sigmoid that produced y_pred (see _logits_behind).
    logits, recovered = (y_pred, True) if from_logits else _logits_behind(y_pred, "Sigmoid")
    y_pred = _at_least_float32(y_pred)
    labels = _labels_like(y_true, y_pred, "focal_loss")
    y_true = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing if label_smoothing else labels
    prob = tf.sigmoid(y_pred) if from_logits else y_pred
    if recovered:  # exact from the logits, as Keras 2 (and so FastEstimator) does when they are known
        ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=y_true, logits=tf.cast(logits, y_pred.dtype))
    else:
        ce = _binary_crossentropy_keras2(y_true, prob)
    p_t = y_true * prob + (1.0 - y_true) * (1.0 - prob)
    loss = ce * tf.pow(1.0 - p_t, tf.cast(gamma, y_pred.dtype))
    if alpha >= 0:
        loss = loss * (y_true * alpha + (1.0 - y_true) * (1.0 - alpha))
    return loss, labels


def l2_regularization(model: keras.Model) -> tf.Tensor:
    """Half the sum of squares of every trainable weight (``tf.nn.l2_loss`` summed; 0 without any)."""
    weights = [tf.cast(w, tf.float32) for w in model.trainable_weights]
    if not weights:
        return tf.zeros(())
    return tf.add_n([tf.nn.l2_loss(w) for w in weights])
