"""MixLoss: the loss of MixUp / CutMix batches, whose labels are a blend of two samples' labels."""

from __future__ import annotations

from typing import Any

from fe_ray.backend import cast, reduce_mean, reshape, roll
from fe_ray.op.tensorop.loss.loss import LossOp


class MixLoss(LossOp):
    """Wrap a loss for batches mixed by :class:`~fe_ray.op.tensorop.augmentation.MixUpBatch` or
    :class:`~fe_ray.op.tensorop.augmentation.CutMixBatch`: ``lam * loss(y_pred, y) + (1 - lam) * loss(y_pred,
    roll(y, 1))``.

    Those ops blend sample ``i`` with sample ``i - 1`` of the batch (the first with the last) and write ``lam``, the
    share of sample ``i`` itself. When only the images are mixed (the labels left as they are), this op scores each
    prediction against both labels, weighted by ``lam``, so the labels need not be one-hot and no mixed labels are
    needed: ``MixUpBatch(inputs="x", outputs=["x", "lam"])``, ``ModelOp(...)``,
    ``MixLoss(loss=CrossEntropy(inputs=("y_pred", "y"), outputs="ce"), lam="lam")``.

    The wrapped loss computes one loss per sample (its ``average_loss`` is set to False); they are mixed sample by
    sample, with a shared ``lam`` (a scalar) or one per sample (MixUpBatch with ``shared_beta=False``: shaped
    ``(N, 1, ...)``, flattened here to one weight per sample), and then averaged when ``average_loss``.

    Differences from FastEstimator: FastEstimator mixes the wrapped loss's batch means when ``average_loss`` (the
    same value for a shared ``lam``; with one ``lam`` per sample it weights the means by the mean ``lam`` instead of
    weighting each sample's loss by its own ``lam``, as fe_ray does). The op runs in the wrapped loss's mode(s) and
    dataset id(s) (FastEstimator keeps its mode only): give the loss ``mode="train"`` when ``lam`` is written in
    training only (MixUpBatch's default).

    Args:
        loss: The LossOp computing the underlying loss (e.g. CrossEntropy) from ``(prediction, ground_truth)``; its
            inputs, output key, mode and ds_id become this op's (inputs preceded by ``lam``).
        lam: The key of the ``lam`` written by MixUpBatch / CutMixBatch.
        average_loss: Return the batch mean; False returns one loss per sample.

    Raises:
        TypeError: If ``loss`` is not a LossOp or ``lam`` is not a key (a str).
        ValueError: If ``loss`` does not read exactly ``(prediction, ground_truth)`` or writes more than one key.
    """

    def __init__(self, loss: LossOp, lam: str, average_loss: bool = True) -> None:
        if not isinstance(loss, LossOp):
            raise TypeError(f"MixLoss wraps a LossOp (e.g. CrossEntropy), got {type(loss).__name__}.")
        if not isinstance(lam, str):
            raise TypeError(f"MixLoss lam must be the key (a str) MixUpBatch / CutMixBatch writes lambda to, got "
                            f"{lam!r}.")
        if len(loss.inputs) != 2:
            raise ValueError(f"MixLoss wraps a loss of inputs (prediction, ground_truth), got {type(loss).__name__} "
                             f"with inputs {loss.inputs}.")
        if len(loss.outputs) != 1 or loss.out_list:
            raise ValueError(f"MixLoss wraps a loss with a single output key (outputs='name'), got "
                             f"{type(loss).__name__} with outputs {loss.outputs}.")
        super().__init__(inputs=[lam, *loss.inputs], outputs=loss.outputs[0], mode=None, ds_id=None,
                         average_loss=average_loss)
        self.mode, self.ds_id = loss.mode, loss.ds_id  # already parsed by the wrapped op
        self.in_list, self.out_list = True, False
        loss.average_loss = False
        self.loss = loss

    @property
    def pred_key(self) -> str:
        """The key of the prediction."""
        return self.inputs[1]

    @property
    def true_key(self) -> str:
        """The key of the ground truth."""
        return self.inputs[2]

    def build(self, framework: str, device: Any = None) -> None:
        super().build(framework, device)
        self.loss.build(framework, device)

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        lam, y_pred, y_true = data
        own = self.loss.forward([y_pred, y_true], state)
        other = self.loss.forward([y_pred, roll(y_true, shift=1, axis=0)], state)
        lam = _per_sample(lam, own)
        loss = lam * own + (1.0 - lam) * other
        return reduce_mean(loss) if self.average_loss else loss

    def state_dict(self) -> dict[str, Any]:
        """The wrapped loss's state (under 'loss') if it has any."""
        loss_state = self.loss.state_dict()
        return {"loss": loss_state} if loss_state else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds keys other than 'loss'.
        """
        if set(state) - {"loss"}:
            raise ValueError(f"MixLoss state holds only the wrapped loss's state (key 'loss'), got keys "
                             f"{sorted(state)}; the checkpoint belongs to a different configuration.")
        self.loss.load_state_dict(state.get("loss", {}))


def _per_sample(lam: Any, losses: Any) -> Any:
    """``lam`` as a weight for ``losses``: a scalar as is, one value per sample shaped ``(N, 1, ...)`` for the
    losses' rank; in the losses' dtype (and device)."""
    if not isinstance(lam, (int, float)):
        rank = len(lam.shape) if lam.shape is not None else None
        if rank is None or rank > 0:
            loss_rank = len(losses.shape)
            if loss_rank > 0:  # a scalar loss (a LossOp that always averages) takes lam as it comes
                lam = reshape(lam, [-1] + [1] * (loss_rank - 1))
        lam = cast(lam, losses)
    return lam
