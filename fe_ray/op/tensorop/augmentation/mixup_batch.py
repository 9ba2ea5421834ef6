"""MixUpBatch: MixUp augmentation (https://arxiv.org/abs/1710.09412) of a batch in a Network."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import maximum, reshape, roll
from fe_ray.op.tensorop.augmentation.mix_stream import (
    MixStream,
    RandomMixOp,
    check_alpha,
    check_outputs,
    float_weight,
    on_device_of,
    writes_lambda,
)


class MixUpBatch(RandomMixOp):
    """Blend every sample with its neighbour in the batch: ``lam * x + (1 - lam) * roll(x, 1)`` (sample i with
    sample i - 1, the first with the last), for each input alike, and write ``lam`` last.

    ``lam`` is drawn from Beta(alpha, alpha) and then folded to ``max(lam, 1 - lam)``, so each sample keeps at least
    half of itself: one draw per step with ``shared_beta`` (a scalar), else one per sample (shaped ``(N, 1, ...)`` to
    broadcast over the first input). Mix the one-hot labels with the same op (list them among the inputs), or mix
    the losses with the written ``lam``.

    Random draws come from the op's own checkpointable stream (see
    :class:`~fe_ray.op.tensorop.augmentation.mix_stream.MixStream`): reproducible under ``fe.enable_deterministic``,
    resumed exactly from checkpoints, the same on every Ray replica. In TF the draws are part of the traced step.

    Differences from FastEstimator: with Ray replicas each replica mixes within its own slice of the batch (sample i
    with i - 1 of the slice), as FastEstimator's TF multi-GPU training does, and all replicas draw the same ``lam``
    (with ``shared_beta=False`` replicas give the samples at the same position of their slices the same ``lam``).
    With ``shared_beta=False`` the per-sample ``lam`` is shaped for each input's rank, so inputs of different ranks
    (images and labels) mix correctly. Inputs must be floating point (integer labels cannot be blended: one-hot
    encode them first).

    Args:
        inputs: Key(s) of the tensors to mix (e.g. images and one-hot labels: FastEstimator 1.7's
            ``inputs=("x", "y"), outputs=("x", "y")``).
        outputs: One key per input for the mixed tensors, then optionally one for ``lam`` (for :class:`MixLoss`).
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.
        alpha: The Beta distribution's parameter (1.0: ``lam`` uniform in [0.5, 1]).
        shared_beta: Draw one ``lam`` for the batch (True) or one per sample (False, FastEstimator 1.7's default).

    Raises:
        ValueError: If ``alpha`` is not > 0, or there are not as many outputs as inputs (or one more).
    """

    def __init__(self, inputs: str | Iterable[str], outputs: Iterable[str], mode: None | str | Iterable[str] = "train",
                 ds_id: None | str | Iterable[str] = None, alpha: float = 1.0, shared_beta: bool = False) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.alpha = check_alpha(alpha, "MixUpBatch")
        check_outputs(self, "MixUpBatch")
        self.shared_beta = bool(shared_beta)
        self.in_list, self.out_list = True, True
        self.mix = MixStream()

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        first = data[0]
        lam = self.mix.beta(self.alpha, None if self.shared_beta else _batch_size(first))
        lam = on_device_of(lam, first)
        lam = maximum(lam, 1.0 - lam)
        mixed = []
        for key, tensor in zip(self.inputs, data):
            weight = float_weight(_broadcastable(lam, tensor, self.shared_beta), tensor, key)
            mixed.append(weight * tensor + (1.0 - weight) * roll(tensor, shift=1, axis=0))
        return mixed + [_broadcastable(lam, first, self.shared_beta)] if writes_lambda(self) else mixed


def _batch_size(tensor: Any) -> Any:
    """The batch size: an int, or a TF scalar where a traced graph does not know it."""
    size = tensor.shape[0]
    if size is None:
        import tensorflow as tf

        return tf.shape(tensor)[0]
    return int(size)


def _broadcastable(lam: Any, tensor: Any, shared: bool) -> Any:
    """A per-sample ``lam`` reshaped to ``(N, 1, ...)`` for ``tensor``'s rank; a shared one as is."""
    if shared:
        return lam
    return reshape(lam, [-1] + [1] * (len(tensor.shape) - 1))
