"""CrossEntropy: binary, sparse-categorical or categorical cross entropy, chosen from the data's shapes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import get_framework
from fe_ray.op.tensorop.loss.loss import LossOp

FORMS = ("binary", "sparse", "categorical")


class CrossEntropy(LossOp):
    """Cross entropy between predictions and labels.

    Unless ``form`` is given, the kind is inferred per call with FastEstimator's rule: a 2-D ``(N, C)`` prediction
    with ``C > 1`` is categorical against 2-D labels with more than one column and sparse against any other labels;
    every other prediction (``(N,)``, ``(N, 1)``, ``(N, ..., 1)``, ...) is binary. One extension covers the case
    that rule cannot compute (binary needs one label per predicted value): a prediction of rank > 2 with a
    multi-class class axis, against class indices (labels with one dimension fewer, or a size-1 class axis), is
    sparse. Same-shape labels of rank > 2 stay binary (multi-label, as in FastEstimator), so one-hot segmentation
    targets need ``form="categorical"``.

    The class axis is axis 1 for torch tensors (``(N, C, H, W)``, torch's layout) and the last axis for TF tensors
    (``(N, H, W, C)``), as in FastEstimator. Losses are computed and returned in float32, also for float16 /
    bfloat16 (mixed-precision) predictions.

    Args:
        inputs: Keys ``(prediction, ground_truth)``.
        outputs: Key of the loss.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all.
        from_logits: Whether predictions are logits rather than probabilities.
        average_loss: Return the mean loss; False returns per-sample losses: ``(N,)`` for binary (each sample's
            mean over its elements), one per position (``(N, H, W)`` for segmentation) for sparse / categorical.
        form: Force 'binary', 'sparse' or 'categorical'; None infers it.
        class_weights: ``{class_index: weight}`` multiplying each loss value (per label element for binary, per
            position for sparse / categorical) by the weight of its true class; classes not listed weigh 1.

    Raises:
        ValueError: If ``form`` is not a known form or ``class_weights`` is not a dict of int -> number.
    """

    def __init__(self, inputs: Iterable[str], outputs: str, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None, from_logits: bool = False, average_loss: bool = True,
                 form: str | None = None, class_weights: dict[int, float] | None = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, average_loss=average_loss)
        if len(self.inputs) != 2:
            raise ValueError(f"CrossEntropy needs inputs (prediction_key, ground_truth_key), got {self.inputs}.")
        if form is not None and form not in FORMS:
            raise ValueError(f"Unknown CrossEntropy form {form!r}; valid forms are {list(FORMS)}, or None to infer it.")
        if class_weights is not None and (not isinstance(class_weights, dict) or not all(
                isinstance(k, int) and isinstance(v, (int, float)) for k, v in class_weights.items())):
            raise ValueError(f"class_weights must be a dict {{class_index (int): weight}}, got {class_weights!r}.")
        self.from_logits = from_logits
        self.form = form
        self.class_weights = dict(class_weights) if class_weights else None

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        return self._get_backend(y_pred).cross_entropy(y_pred, y_true, form=self.resolve_form(y_pred, y_true),
                                                       from_logits=self.from_logits,
                                                       class_weights=self.class_weights, average=self.average_loss)

    def resolve_form(self, y_pred: Any, y_true: Any) -> str:
        """The form to use for these tensors: ``self.form`` if set, else inferred from their shapes."""
        if self.form is not None:
            return self.form
        pred_shape, true_shape = tuple(y_pred.shape), tuple(y_true.shape)
        if len(pred_shape) == 2 and pred_shape[-1] != 1:
            return "categorical" if len(true_shape) == 2 and true_shape[-1] != 1 else "sparse"
        if len(pred_shape) > 2:
            class_axis = 1 if get_framework(y_pred) == "torch" else -1
            # Unknown (None) sizes count as multi-class: a class axis is almost always static.
            if pred_shape[class_axis] != 1 and (len(true_shape) == len(pred_shape) - 1 or (
                    len(true_shape) == len(pred_shape) and true_shape[class_axis] == 1)):
                return "sparse"
        return "binary"
