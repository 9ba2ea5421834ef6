"""Dice: the Dice score of predicted masks as a TensorOp (a per-step metric value, or a loss when negated)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import cast, dice_score
from fe_ray.op.tensorop.loss.pair import check_pair
from fe_ray.op.tensorop.tensorop import TensorOp


class Dice(TensorOp):
    """Write the Dice score ``2 |P * T| / (|P| + |T| + epsilon)`` of each sample and channel.

    Channels are axis 1 for torch tensors (``(N, C, H, W)``) and the last axis for TF tensors (``(N, H, W, C)``).
    Float16 / bfloat16 predictions are scored in float32. For a loss to minimise use ``negate=True`` or
    :class:`~fe_ray.op.tensorop.loss.DiceLoss`.

    Args:
        inputs: Keys ``(prediction, ground_truth)``.
        outputs: Key of the score.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all.
        soft_dice: Sum squares in the denominator (``|P|^2 + |T|^2``).
        sample_average: Average over the batch.
        channel_average: Average over the channels.
        negate: Return the negative score.
        epsilon: Added to the denominator so that empty masks do not divide by zero.

    Raises:
        ValueError: If ``inputs`` is not a pair of keys.
    """

    def __init__(self, inputs: Iterable[str], outputs: str, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None, soft_dice: bool = False, sample_average: bool = False,
                 channel_average: bool = False, negate: bool = False, epsilon: float = 1e-6) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_pair(self, "Dice")
        self.soft_dice = soft_dice
        self.sample_average = sample_average
        self.channel_average = channel_average
        self.negate = negate
        self.epsilon = epsilon

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        if "float16" in str(getattr(y_pred, "dtype", "")):  # float16 and bfloat16: sums over pixels need float32
            y_pred = cast(y_pred, "float32")
        dice = dice_score(y_pred=y_pred, y_true=y_true, soft_dice=self.soft_dice, sample_average=self.sample_average,
                          channel_average=self.channel_average, epsilon=self.epsilon)
        return -dice if self.negate else dice
