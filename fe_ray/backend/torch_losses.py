"""Loss math for torch tensors, following FastEstimator's torch formulas.

The class axis is axis 1 (torch's channels-first layout, as in ``nn.CrossEntropyLoss``): predictions are
``(N, C)`` or ``(N, C, d1, ...)``. Every loss computes in float32 whatever the prediction's dtype, so that
mixed-precision (float16 / bfloat16) outputs neither overflow nor round the log's arguments to 0 or 1.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

#: The class axis of sparse / categorical predictions.
CLASS_AXIS = 1


def cross_entropy(y_pred: torch.Tensor, y_true: torch.Tensor, form: str, from_logits: bool = False,
                  class_weights: dict[int, float] | None = None, average: bool = True) -> torch.Tensor:
    """Cross entropy of one of the forms 'binary', 'sparse' or 'categorical', computed in float32.

    Args:
        y_pred: Predictions (probabilities, or logits when ``from_logits``). Binary: any shape ``(N, ...)``;
            sparse / categorical: ``(N, C, d1, ...)`` with the class axis 1.
        y_true: Labels: 0/1 with as many elements as ``y_pred`` (binary), class indices shaped ``(N, d1, ...)``
            or with a size-1 class axis (sparse), or one-hot / soft targets shaped like ``y_pred`` (categorical).
        form: Which cross entropy to compute.
        from_logits: Whether ``y_pred`` holds logits.
        class_weights: Optional ``{class: weight}``; each element's loss is multiplied by its true class's
            weight (classes not listed weigh 1).
        average: Return the mean loss (a float32 scalar) instead of per-sample losses: shape ``(N,)`` for binary
            (the mean over each sample's elements), ``(N, d1, ...)`` (one per position) for sparse / categorical.

    Raises:
        ValueError: If ``form`` is unknown, a sparse / categorical prediction has no class axis, or the labels'
            shape does not fit the prediction's.
    """
    if form not in ("binary", "sparse", "categorical"):
        raise ValueError(f"Unknown cross entropy form {form!r}; valid forms are 'binary', 'sparse', 'categorical'.")
    if form != "binary" and y_pred.ndim < 2:
        raise ValueError(f"{form} cross entropy needs a prediction shaped (batch, classes, ...), got shape "
                         f"{tuple(y_pred.shape)}; use form='binary' for one probability per sample.")
    # Under autocast the ops below would drop back to half precision (and CUDA autocast refuses
    # binary_cross_entropy outright), so the float32 casts only hold with autocast off for the loss.
    with _no_autocast(y_pred):
        y_pred = y_pred.float()
        if form == "sparse" and from_logits and average and not class_weights:
            # One fused kernel (log_softmax, gather and mean): most of a small model's per-step loss cost.
            return F.cross_entropy(y_pred, _sparse_labels(y_pred, y_true))
        if form == "binary":
            loss, labels = _binary(y_pred, y_true, from_logits)
        elif form == "sparse":
            loss, labels = _sparse(y_pred, y_true, from_logits)
        else:
            loss, labels = _categorical(y_pred, y_true, from_logits)
        if class_weights:
            loss = loss * _weight_table(class_weights, 2 if form == "binary" else y_pred.shape[CLASS_AXIS],
                                        loss.device)[labels]
        if form == "binary" and loss.ndim > 0:
            # One value per sample, as FastEstimator: the mean over every element that belongs to it.
            loss = loss.reshape(loss.shape[0], -1).mean(dim=1)
        return loss.mean() if average else loss


def _binary(y_pred: torch.Tensor, y_true: torch.Tensor, from_logits: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Element-wise binary cross entropy and each element's class (its label rounded to 0 or 1)."""
    if y_true.numel() != y_pred.numel():
        raise ValueError(f"binary cross entropy needs one label per prediction; got labels of shape "
                         f"{tuple(y_true.shape)} for predictions of shape {tuple(y_pred.shape)}.")
    y_true = y_true.float().reshape(y_pred.shape)
    if from_logits:
        loss = F.binary_cross_entropy_with_logits(y_pred, y_true, reduction="none")
    else:
        # torch's BCE clamps each log at -100, so a saturated wrong prediction costs 100 rather than inf, and its
        # gradient stays finite at p = 0 and p = 1.
        loss = F.binary_cross_entropy(y_pred, y_true, reduction="none")
    return loss, y_true.round().long()


#: What :func:`_no_autocast` returns outside autocast, every loss call: a nullcontext can be entered again and again.
_NO_CONTEXT = nullcontext()


def _no_autocast(y_pred: torch.Tensor) -> AbstractContextManager[Any]:
    # is_cuda / is_cpu answer the usual cases without making a torch.device (0.2 us a call).
    device_type = "cuda" if y_pred.is_cuda else "cpu" if y_pred.is_cpu else y_pred.device.type
    return torch.autocast(device_type=device_type, enabled=False) if torch.is_autocast_enabled(device_type) \
        else _NO_CONTEXT


def _sparse_labels(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """The class indices, shaped like the prediction without its class axis."""
    shape = y_pred.shape
    positions = shape[:CLASS_AXIS] + shape[CLASS_AXIS + 1:] if len(shape) > CLASS_AXIS + 1 else shape[:CLASS_AXIS]
    if y_true.numel() != positions.numel():
        raise ValueError(f"sparse cross entropy needs one class index per position: labels shaped {tuple(positions)} "
                         f"(or with a size-1 class axis) for predictions of shape {tuple(y_pred.shape)} (class axis "
                         f"{CLASS_AXIS}), got {tuple(y_true.shape)}.")
    # The usual labels, int64 indices shaped so already, are used as they are: the reshape would only make a view of
    # them (2 us a step) and long() return them.
    labels = y_true if y_true.shape == positions else y_true.reshape(positions)
    return labels if labels.dtype is torch.int64 else labels.long()


def _sparse(y_pred: torch.Tensor, y_true: torch.Tensor, from_logits: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position cross entropy against class indices, and those indices."""
    labels = _sparse_labels(y_pred, y_true)
    if from_logits:
        return F.cross_entropy(y_pred, labels, reduction="none"), labels
    # -log of the true class's probability, as is (no renormalisation): p = 0 gives inf. Gathering first keeps
    # zero probabilities of the other classes out of the log, so they cannot turn the gradient into NaN.
    p_true = y_pred.gather(CLASS_AXIS, labels.unsqueeze(CLASS_AXIS)).squeeze(CLASS_AXIS)
    return -torch.log(p_true), labels


def _categorical(y_pred: torch.Tensor, y_true: torch.Tensor,
                 from_logits: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position cross entropy against one-hot / soft targets, and each position's (argmax) class."""
    if y_true.shape != y_pred.shape:
        raise ValueError(f"categorical cross entropy needs targets shaped like the predictions {tuple(y_pred.shape)} "
                         f"(class axis {CLASS_AXIS}), got {tuple(y_true.shape)}.")
    y_true = y_true.float()
    if from_logits:
        loss = F.cross_entropy(y_pred, y_true, reduction="none")
    else:
        # sum(-y * log p) over the classes, on the probabilities as given (no renormalisation). Classes with zero
        # target take log(1) = 0 instead of 0 * log(p), which would be NaN (value and gradient) where p = 0.
        log_p = torch.log(torch.where(y_true != 0, y_pred, torch.ones_like(y_pred)))
        loss = -(y_true * log_p).sum(dim=CLASS_AXIS)
    return loss, y_true.argmax(dim=CLASS_AXIS)


def _weight_table(class_weights: dict[int, float], num_classes: int, device: torch.device) -> torch.Tensor:
    """A float32 lookup table of class weights, 1 for classes not listed."""
    size = max(num_classes, max(int(k) for k in class_weights) + 1)
    table = torch.ones(size, dtype=torch.float32, device=device)
    for cls, weight in class_weights.items():
        table[int(cls)] = float(weight)
    return table


def mean_squared_error(y_pred: torch.Tensor, y_true: torch.Tensor, average: bool = True) -> torch.Tensor:
    """Squared error averaged over the last axis (per sample), and over samples when ``average``; in float32."""
    with _no_autocast(y_pred):
        y_pred = y_pred.float()
        loss = ((y_pred - y_true.float().reshape(y_pred.shape)) ** 2).mean(dim=-1)
        return loss.mean() if average else loss


def _at_least_float32(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in float32 when it is of lower precision (or not floating), else unchanged (float64 stays)."""
    return tensor if tensor.dtype == torch.float64 else tensor.float()


def _labels_like(y_true: torch.Tensor, y_pred: torch.Tensor, name: str) -> torch.Tensor:
    """``y_true`` in ``y_pred``'s dtype and shape; a ValueError unless it has one label per prediction."""
    if not isinstance(y_true, torch.Tensor):  # numpy labels beside torch predictions
        y_true = torch.as_tensor(np.array(y_true))
    if y_true.numel() != y_pred.numel():
        raise ValueError(f"{name} needs one target per prediction: got y_true of shape {tuple(y_true.shape)} for "
                         f"y_pred of shape {tuple(y_pred.shape)}; reshape y_true to {tuple(y_pred.shape)}.")
    return y_true.to(device=y_pred.device, dtype=y_pred.dtype).reshape(y_pred.shape)


def regression_loss(y_pred: torch.Tensor, y_true: torch.Tensor, kind: str, beta: float = 1.0) -> torch.Tensor:
    """Element-wise 'huber', 'smooth_l1', 'l1' or 'hinge' loss, averaged over the last axis (1-d input: a scalar).

    Computed in float32 at least (float64 input stays float64), with autocast off, as the other losses here.
    """
    with _no_autocast(y_pred):
        y_pred = _at_least_float32(y_pred)
        y_true = _labels_like(y_true, y_pred, kind)
        if kind == "huber":
            loss = F.huber_loss(y_pred, y_true, reduction="none", delta=beta)
        elif kind == "smooth_l1":
            loss = F.smooth_l1_loss(y_pred, y_true, reduction="none", beta=beta)
        elif kind == "l1":
            loss = torch.abs(y_pred - y_true)
        else:  # hinge, for labels of -1 / 1
            loss = torch.clamp(1.0 - y_true * y_pred, min=0.0)
        # FastEstimator's torch losses average over the last axis whatever the rank: 1-d (batch,) input gives one
        # scalar, not one loss per sample.
        return loss if loss.ndim == 0 else loss.mean(dim=-1)


def focal(y_pred: torch.Tensor, y_true: torch.Tensor, gamma: float, alpha: float, from_logits: bool,
          label_smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Element-wise sigmoid focal loss (labels squeezed towards 0.5 by ``label_smoothing``) and the unsmoothed 0/1
    labels in the loss's dtype (for per-sample normalisation)."""
    with _no_autocast(y_pred):
        y_pred = _at_least_float32(y_pred)
        labels = _labels_like(y_true, y_pred, "focal_loss")
        y_true = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing if label_smoothing else labels
        if from_logits:
            prob = torch.sigmoid(y_pred)
            ce = F.binary_cross_entropy_with_logits(y_pred, y_true, reduction="none")
        else:
            prob = y_pred
            ce = F.binary_cross_entropy(y_pred, y_true, reduction="none")  # log clamped at -100: finite at 0 / 1
        p_t = y_true * prob + (1.0 - y_true) * (1.0 - prob)
        loss = ce * (1.0 - p_t) ** gamma
        if alpha >= 0:
            loss = loss * (y_true * alpha + (1.0 - y_true) * (1.0 - alpha))
        return loss, labels


def l2_regularization(model: torch.nn.Module) -> torch.Tensor:
    """Half the sum of squares of every trainable parameter (0 for a model without any)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        return torch.zeros(())
    return torch.stack([torch.sum(p.float() ** 2) for p in params]).sum() / 2
