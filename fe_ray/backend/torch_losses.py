"""Loss math for torch tensors. The class axis is the last axis, as in the form detection of CrossEntropy."""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: Probabilities are clipped to [EPSILON, 1 - EPSILON] before taking logs (the Keras convention).
EPSILON = 1e-7


def cross_entropy(y_pred: torch.Tensor, y_true: torch.Tensor, form: str, from_logits: bool = False,
                  class_weights: dict[int, float] | None = None, average: bool = True) -> torch.Tensor:
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
    # The sparse and categorical forms run on a (samples, classes) view through torch's fused kernels: one call
    # instead of log_softmax, gather, negate and mean, which is most of a small model's per-step loss cost.
    if form == "binary":
        y_true = y_true.to(y_pred.dtype).reshape(y_pred.shape)
        if from_logits:
            elementwise = F.binary_cross_entropy_with_logits(y_pred, y_true, reduction="none")
        else:
            p = y_pred.clamp(EPSILON, 1 - EPSILON)
            elementwise = -(y_true * torch.log(p) + (1 - y_true) * torch.log(1 - p))
        loss = elementwise.mean(dim=-1)
        num_classes = 2
    elif form == "sparse":
        num_classes = y_pred.shape[-1]
        flat = y_pred if y_pred.ndim == 2 else y_pred.reshape(-1, num_classes)
        labels = (y_true if y_true.ndim == 1 else y_true.reshape(-1)).long()  # a size mismatch raises in the loss
        if not from_logits:
            flat = _log_probs(flat, from_logits=False)
        reduction = "mean" if average and not class_weights else "none"
        fused = F.cross_entropy if from_logits else F.nll_loss
        loss = fused(flat, labels, reduction=reduction)
        if reduction == "mean":
            return loss
        loss = loss.reshape(y_pred.shape[:-1])
    elif form == "categorical":
        num_classes = y_pred.shape[-1]
        y_true = y_true.to(y_pred.dtype)
        if from_logits:
            loss = F.cross_entropy(y_pred.reshape(-1, num_classes), y_true.reshape(-1, num_classes),
                                   reduction="none").reshape(y_pred.shape[:-1])
        else:
            loss = -(y_true * _log_probs(y_pred, from_logits)).sum(dim=-1)
    else:
        raise ValueError(f"Unknown cross entropy form {form!r}; valid forms are 'binary', 'sparse', 'categorical'.")
    if class_weights:
        loss = loss * _weight_table(class_weights, num_classes, loss)[_true_classes(form, y_true, loss.shape)]
    return loss.mean() if average else loss


def _true_classes(form: str, y_true: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Each sample's true class (the class whose weight scales its loss), shaped like the per-sample losses."""
    if form == "binary":
        return y_true.reshape(shape + (-1,))[..., 0].round().long()
    if form == "sparse":
        return y_true.reshape(shape).long()
    return torch.argmax(y_true, dim=-1)


def _log_probs(y_pred: torch.Tensor, from_logits: bool) -> torch.Tensor:
    if from_logits:
        return F.log_softmax(y_pred, dim=-1)
    # Renormalise first so slightly-off probability vectors behave like Keras' categorical_crossentropy.
    p = y_pred / y_pred.sum(dim=-1, keepdim=True)
    return torch.log(p.clamp(EPSILON, 1 - EPSILON))


def _weight_table(class_weights: dict[int, float], num_classes: int, like: torch.Tensor) -> torch.Tensor:
    size = max(num_classes, max(int(k) for k in class_weights) + 1)
    table = torch.ones(size, dtype=like.dtype, device=like.device)
    for cls, weight in class_weights.items():
        table[int(cls)] = float(weight)
    return table


def mean_squared_error(y_pred: torch.Tensor, y_true: torch.Tensor, average: bool = True) -> torch.Tensor:
    """Squared error averaged over the last axis (per sample), and over samples when ``average``."""
    loss = ((y_pred - y_true.to(y_pred.dtype).reshape(y_pred.shape)) ** 2).mean(dim=-1)
    return loss.mean() if average else loss
