"""FastEstimator's remaining loss helpers: huber, smooth_l1_loss, l1_loss, hinge, focal_loss, dice_score and
l2_regularization, under its names, argument order and defaults.

The losses run on torch or TF tensors (the element-wise math lives in :mod:`fe_ray.backend.torch_losses` and
:mod:`fe_ray.backend.tf_losses`, imported only for tensors of their framework); ``dice_score`` is a metric and
takes numpy arrays too. Like fe_ray's cross entropies, losses compute in float32 at least, so that float16 /
bfloat16 predictions neither overflow nor lose the small differences a loss is made of (float64 stays float64).
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from fe_ray.backend.tensor_ops import Tensor, _ops, _shape

_LOSS_MODULES = {"torch": "fe_ray.backend.torch_losses", "tf": "fe_ray.backend.tf_losses"}
REDUCTIONS = ("none", "mean", "sum")


def _losses(y_pred: Any, func: str) -> ModuleType:
    """The loss module of ``y_pred``'s framework; a TypeError unless it is a torch or TF tensor."""
    from fe_ray.backend import get_framework

    framework = get_framework(y_pred)
    if framework not in _LOSS_MODULES or isinstance(y_pred, (list, tuple, dict)):
        raise TypeError(f"{func} needs y_pred as a torch or TensorFlow tensor, got {type(y_pred).__name__}; convert "
                        f"it first, e.g. fe_ray.backend.to_tensor(y_pred, 'torch').")
    return importlib.import_module(_LOSS_MODULES[framework])


def _check_beta(beta: float, func: str) -> None:
    if not beta > 0:
        raise ValueError(f"{func}: beta must be a positive number, got {beta!r}; it is the error size where the loss "
                         f"turns from quadratic to linear (1.0 by default).")


def huber(y_true: Tensor, y_pred: Tensor, beta: float = 1.0) -> Tensor:
    """Return the Huber loss per sample: ``0.5 * e**2`` where ``|e| <= beta``, ``beta * (|e| - beta / 2)`` beyond,
    for the error ``e = y_pred - y_true``, averaged over the last axis.

    Args:
        y_true: Targets with as many elements as ``y_pred`` (any numeric dtype).
        y_pred: Predictions, shaped ``(batch,)`` or ``(batch, ..., n)``: a torch or TF tensor.
        beta: Where the loss turns from quadratic to linear (torch's ``delta``, Keras' ``delta``).

    Returns:
        One loss per sample: shape ``(batch, ...)`` without the last axis. 1-d ``(batch,)`` predictions give one
        scalar (the mean), except with TF tensors, where they give one loss per element, as in FastEstimator.

    Raises:
        TypeError: If ``y_pred`` is no torch / TF tensor.
        ValueError: If ``beta`` is not positive or ``y_true`` does not hold one target per prediction.
    """
    _check_beta(beta, "huber")
    return _losses(y_pred, "huber").regression_loss(y_pred, y_true, "huber", beta)


def smooth_l1_loss(y_true: Tensor, y_pred: Tensor, beta: float = 1.0) -> Tensor:
    """Return the smooth L1 loss per sample: ``0.5 * e**2 / beta`` where ``|e| < beta``, ``|e| - beta / 2`` beyond,
    for the error ``e = y_pred - y_true``, averaged over the last axis (torch's ``SmoothL1Loss``: Huber / beta).

    Args:
        y_true: Targets with as many elements as ``y_pred``.
        y_pred: Predictions, shaped ``(batch,)`` or ``(batch, ..., n)``: a torch or TF tensor.
        beta: Where the loss turns from quadratic to linear.

    Returns:
        One loss per sample: shape ``(batch, ...)`` without the last axis; a scalar (the mean) for 1-d ``(batch,)``
        predictions, as in FastEstimator.

    Raises:
        TypeError: If ``y_pred`` is no torch / TF tensor.
        ValueError: If ``beta`` is not positive or ``y_true`` does not hold one target per prediction.
    """
    _check_beta(beta, "smooth_l1_loss")
    return _losses(y_pred, "smooth_l1_loss").regression_loss(y_pred, y_true, "smooth_l1", beta)


def l1_loss(y_true: Tensor, y_pred: Tensor) -> Tensor:
    """Return the mean absolute error per sample, ``mean(|y_pred - y_true|)`` over the last axis.

    Args:
        y_true: Targets with as many elements as ``y_pred``.
        y_pred: Predictions, shaped ``(batch,)`` or ``(batch, ..., n)``: a torch or TF tensor.

    Returns:
        One loss per sample, shaped as for :func:`huber`.
    """
    return _losses(y_pred, "l1_loss").regression_loss(y_pred, y_true, "l1")


def hinge(y_true: Tensor, y_pred: Tensor) -> Tensor:
    """Return the hinge loss per sample, ``mean(max(1 - y_true * y_pred, 0))`` over the last axis.

    Args:
        y_true: Labels of -1 or 1, with as many elements as ``y_pred``.
        y_pred: Scores, shaped ``(batch,)`` or ``(batch, ..., n)``: a torch or TF tensor.

    Returns:
        One loss per sample, shaped as for :func:`smooth_l1_loss` (1-d predictions: a scalar).
    """
    return _losses(y_pred, "hinge").regression_loss(y_pred, y_true, "hinge")


def focal_loss(y_true: Tensor, y_pred: Tensor, gamma: float = 2.0, alpha: float = 0.25, from_logits: bool = False,
               normalize: bool = True, shape_reduction: str = "sum", sample_reduction: str = "mean",
               label_smoothing: float = 0.0) -> Tensor:
    """Return the sigmoid focal loss (RetinaNet's): binary cross entropy scaled by ``(1 - p_t) ** gamma``, so that
    well-classified elements count less, and weighted ``alpha`` for positives / ``1 - alpha`` for negatives.

    Args:
        y_true: 0/1 labels shaped like ``y_pred``.
        y_pred: Probabilities (or logits, with ``from_logits``) shaped ``(batch, d1, ..., dn)``: torch or TF.
        gamma: The focusing exponent (>= 0); 0 gives plain (alpha-weighted) binary cross entropy.
        alpha: The weight of positive elements, in [0, 1]; -1 turns the weighting off.
        from_logits: Whether ``y_pred`` holds logits.
        normalize: Divide each sample's losses by its number of positive labels (at least 1). For 1-d torch
            ``(batch,)`` input the whole batch counts as one sample, as in FastEstimator's torch path: its losses
            are divided by the batch's number of positives, and shape_reduction 'sum' adds them all up.
        shape_reduction: How each sample's element losses combine: 'sum', 'mean' or 'none'.
        sample_reduction: How the per-sample losses combine: 'mean', 'sum' or 'none'.
        label_smoothing: In [0, 1]: the labels are squeezed towards 0.5 first (``y * (1 - s) + 0.5 * s``), for
            the cross entropy, the focusing factor and the alpha weights; ``normalize`` still counts the positives
            of the unsmoothed labels. FastEstimator 1.7 smooths TF tensors only (its torch path ignores the
            argument); fe_ray smooths both.

    Returns:
        A scalar, or per-sample losses ``(batch,)`` with ``sample_reduction='none'``, or element losses shaped
        like ``y_pred`` when both reductions are 'none'.

    Raises:
        TypeError: If ``y_pred`` is no torch / TF tensor.
        ValueError: If ``gamma``, ``alpha``, ``label_smoothing`` or a reduction is out of range, naming the valid
            values.
    """
    if gamma is None or not gamma >= 0:
        raise ValueError(f"focal_loss: gamma must be a number >= 0, got {gamma!r}; 2.0 is RetinaNet's, 0 disables "
                         f"the focusing.")
    if alpha is None or not (0 <= alpha <= 1 or alpha == -1):
        raise ValueError(f"focal_loss: alpha must lie in [0, 1] or be -1 (no weighting), got {alpha!r}.")
    for name, value in (("shape_reduction", shape_reduction), ("sample_reduction", sample_reduction)):
        if value not in REDUCTIONS:
            raise ValueError(f"focal_loss: unknown {name} {value!r}; valid choices are {list(REDUCTIONS)}.")
    if label_smoothing is None or not 0 <= label_smoothing <= 1:
        raise ValueError(f"focal_loss: label_smoothing must lie in [0, 1], got {label_smoothing!r}; 0 disables it.")
    losses = _losses(y_pred, "focal_loss")
    loss, labels = losses.focal(y_pred, y_true, float(gamma), float(alpha), from_logits, float(label_smoothing))
    ops = _ops(loss, "focal_loss")
    shape = _shape(loss)
    if shape is None or len(shape) == 0:
        raise ValueError(f"focal_loss: y_pred needs a batch axis, shaped (batch, ...); got shape {shape}.")
    element_axes = tuple(range(1, len(shape)))
    if not element_axes and losses.__name__ == _LOSS_MODULES["torch"]:
        # FastEstimator reduces 1-d input over an empty axis list, which torch's sum reads as every axis (TF's as
        # none, which the code below gives): the batch is normalised by its total of positives and summed up.
        if normalize:
            loss = loss / ops.clip_by_value(ops.reduce_sum(labels, None, False), 1.0, None)
        if shape_reduction == "sum":
            loss = ops.reduce_sum(loss, None, False)
    if normalize and element_axes:
        positives = ops.reduce_sum(labels, element_axes, True)
        loss = loss / ops.clip_by_value(positives, 1.0, None)
    if element_axes and shape_reduction != "none":
        loss = (ops.reduce_sum if shape_reduction == "sum" else ops.reduce_mean)(loss, element_axes, False)
    if sample_reduction != "none":
        loss = (ops.reduce_sum if sample_reduction == "sum" else ops.reduce_mean)(loss, None, False)
    return loss


def dice_score(y_pred: Tensor, y_true: Tensor, soft_dice: bool = False, sample_average: bool = False,
               channel_average: bool = False, channel_weights: Tensor | Sequence[float] | None = None,
               mask_overlap: bool = True, threshold: float | None = None, empty_nan: bool = False,
               epsilon: float = 1e-6) -> Tensor:
    """Return the Dice score ``2 |P * T| / (|P| + |T| + epsilon)`` of each sample and channel.

    Channels are axis 1 for torch (``(batch, C, ...)``) and the last axis for TF / numpy (``(batch, ..., C)``);
    the sums run over the spatial axes between. 2-d ``(batch, C)`` input has none, so each element is scored on
    its own, as FastEstimator does for TF tensors.

    Args:
        y_pred: Predicted masks or scores: a torch / TF tensor or numpy array.
        y_true: Target masks shaped like ``y_pred`` (any framework-compatible numeric dtype).
        soft_dice: Sum squares in the denominator (``|P|^2 + |T|^2``).
        sample_average: Average the scores over the batch.
        channel_average: Average the scores over the channels.
        channel_weights: One weight per channel, applied before any averaging.
        mask_overlap: Whether a pixel may belong to several channels; False keeps only each pixel's highest
            channel score (the others become 0).
        threshold: Binarise ``y_pred`` as ``y_pred > threshold`` first; None keeps it continuous (for a loss).
        empty_nan: Give NaN instead of 0 where both the target and the prediction are empty.
        epsilon: Added to the denominator, so that empty masks do not divide by zero.

    Returns:
        Scores shaped ``(batch, C)``, ``(batch,)`` with ``channel_average``, ``(C,)`` with ``sample_average``, or a
        scalar with both; floating point (float32 for integer / boolean input).

    Raises:
        TypeError: If ``y_pred`` is of an unsupported type.
        ValueError: If ``y_pred`` has fewer than 2 axes (batch, channels).
    """
    import numpy as np

    from fe_ray.backend import get_framework
    from fe_ray.backend.tensor_ops import cast, where

    ops, shape = _ops(y_pred, "dice_score", "y_pred"), _shape(y_pred)
    if shape is None or len(shape) < 2:
        raise ValueError(f"dice_score: y_pred of shape {None if shape is None else list(shape)} needs at least 2 "
                         f"axes: (batch, C, spatial...) for torch, (batch, spatial..., C) for TF / numpy.")
    channel_axis = 1 if get_framework(y_pred) == "torch" else len(shape) - 1
    spatial = tuple(axis for axis in range(1, len(shape)) if axis != channel_axis)

    def over_space(tensor: Tensor, reduce: Any) -> Tensor:
        # Without spatial axes nothing is reduced; torch's sum would read an empty axis list as every axis.
        return reduce(tensor, spatial, False) if spatial else tensor

    if not ops.is_floating(y_pred):
        y_pred = cast(y_pred, "float32")
    y_true = ops.cast_like(y_true if ops.is_tensor(y_true) else np.asarray(y_true), y_pred)
    if not mask_overlap:
        best = ops.reduce_max(y_pred, channel_axis, True)
        y_pred = where(y_pred >= best, y_pred, 0.0)
    if threshold is not None:  # 0/1 in y_true's dtype (two numbers alone would give numpy / torch float64)
        y_pred = ops.cast_like(where(y_pred > threshold, 1.0, 0.0), y_true)
    numerator = over_space(y_pred * y_true, ops.reduce_sum)
    if soft_dice:
        denominator = over_space(y_pred * y_pred, ops.reduce_sum) + over_space(y_true * y_true, ops.reduce_sum)
    else:
        denominator = over_space(y_pred, ops.reduce_sum) + over_space(y_true, ops.reduce_sum)
    dice = 2.0 * numerator / (denominator + epsilon)  # (batch, C)
    if channel_weights is not None:
        weights = channel_weights if ops.is_tensor(channel_weights) else np.asarray(channel_weights)
        dice = dice * ops.reshape(ops.cast_like(weights, dice), [1, -1])
    if empty_nan:
        empty = over_space(y_true, ops.reduce_max) + over_space(y_pred, ops.reduce_max) < 1e-4
        dice = where(empty, math.nan, dice)
    if channel_average:
        dice = ops.reduce_mean(dice, -1, False)
    if sample_average:
        dice = ops.reduce_mean(dice, 0, False)
    return dice


def l2_regularization(model: Any, beta: float = 0.01) -> Tensor:
    """Return ``beta`` times half the sum of squares of the model's trainable weights (an L2 / weight-decay term
    to add to a loss), as a float32 scalar of the model's framework.

    Args:
        model: A torch ``nn.Module`` or a Keras model.
        beta: The weight of the penalty.

    Raises:
        TypeError: If ``model`` is neither a torch nor a Keras model.
    """
    torch, keras = sys.modules.get("torch"), sys.modules.get("keras")  # a model implies its framework is loaded
    if torch is not None and isinstance(model, torch.nn.Module):
        framework = "torch"
    elif keras is not None and isinstance(model, keras.layers.Layer):  # keras.Model is a Layer
        framework = "tf"
    else:
        raise TypeError(f"l2_regularization needs a torch nn.Module or a Keras model, got "
                        f"{type(model).__module__}.{type(model).__qualname__}; pass the model itself, not its "
                        f"weights or optimizer.")
    return beta * importlib.import_module(_LOSS_MODULES[framework]).l2_regularization(model)
