"""FocalLoss: RetinaNet's sigmoid focal loss as a loss TensorOp."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import focal_loss
from fe_ray.backend.losses import REDUCTIONS
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.loss.pair import check_pair


class FocalLoss(LossOp):
    """Sigmoid focal loss: binary cross entropy scaled by ``(1 - p_t) ** gamma`` so that well-classified elements
    count less, weighted ``alpha`` for positive and ``1 - alpha`` for negative labels.

    Each sample's element losses are divided by its number of positive labels (``normalize``, at least 1), then
    combined by ``shape_reduction``; the per-sample losses are combined by ``sample_reduction``. Computed and
    returned in float32, also for float16 / bfloat16 (mixed-precision) predictions.

    As in FastEstimator, ``sample_reduction`` (not ``average_loss``) decides whether the batch is averaged. Setting
    the ``average_loss`` attribute to False (what :class:`SuperLoss` does to the loss it wraps) asks for per-sample
    losses: the batch reduction is then skipped.

    Args:
        inputs: Keys ``(prediction, ground_truth)``: probabilities (or logits with ``from_logits``) shaped
            ``(batch, d1, ..., dn)`` and 0/1 labels of the same shape.
        outputs: Key of the loss.
        gamma: The focusing exponent, >= 0 (0 gives alpha-weighted binary cross entropy).
        alpha: The weight of positive labels, in [0, 1]; -1 turns the weighting off.
        sample_reduction: How per-sample losses combine: 'mean', 'sum' or 'none'.
        shape_reduction: How each sample's element losses combine: 'sum', 'mean' or 'none'.
        from_logits: Whether the predictions are logits.
        normalize: Divide each sample's losses by its number of positive labels.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all (an addition: FastEstimator's FocalLoss has none).

    Raises:
        ValueError: If ``inputs`` is not a pair of keys, or ``gamma``, ``alpha`` or a reduction is invalid.
    """

    def __init__(self, inputs: Iterable[str], outputs: str, gamma: float = 2.0, alpha: float = 0.25,
                 sample_reduction: str = "mean", shape_reduction: str = "sum", from_logits: bool = False,
                 normalize: bool = True, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, average_loss=True)
        check_pair(self, "FocalLoss")
        # Validated when the program is built rather than at the first step (the backend would raise the same).
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma >= 0:
            raise ValueError(f"FocalLoss gamma must be a number >= 0, got {gamma!r}; 2.0 is RetinaNet's, 0 disables "
                             "the focusing.")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0 <= alpha <= 1 or alpha == -1):
            raise ValueError(f"FocalLoss alpha must lie in [0, 1] or be -1 (no weighting), got {alpha!r}.")
        for name, value in (("sample_reduction", sample_reduction), ("shape_reduction", shape_reduction)):
            if value not in REDUCTIONS:
                raise ValueError(f"FocalLoss {name} {value!r} is unknown; valid choices are {list(REDUCTIONS)}.")
        self.gamma = float(gamma)
        self.alpha = float(alpha)
        self.sample_reduction = sample_reduction
        self.shape_reduction = shape_reduction
        self.from_logits = from_logits
        self.normalize = normalize

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        sample_reduction = self.sample_reduction if self.average_loss else "none"
        return focal_loss(y_true, y_pred, gamma=self.gamma, alpha=self.alpha, from_logits=self.from_logits,
                          normalize=self.normalize, shape_reduction=self.shape_reduction,
                          sample_reduction=sample_reduction)
