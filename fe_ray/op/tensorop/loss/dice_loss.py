"""DiceLoss: the negative Dice score of predicted masks, as a loss to minimise."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from fe_ray.backend import cast, dice_score, get_framework
from fe_ray.op.tensorop.loss.loss import LossOp
from fe_ray.op.tensorop.loss.pair import check_pair


class DiceLoss(LossOp):
    """The negative Dice score ``-2 |P * T| / (|P| + |T| + epsilon)`` of each sample and channel (FastEstimator's
    sign convention: the loss runs from 0 down to -1 for a perfect overlap).

    Channels are axis 1 for torch tensors (``(N, C, H, W)``) and the last axis for TF tensors (``(N, H, W, C)``).
    Float16 / bfloat16 (mixed-precision) predictions give a float32 loss, since the sums over every pixel would lose
    precision (or overflow) in half precision.

    Args:
        inputs: Keys ``(prediction, ground_truth)``: mask scores and target masks of the same shape.
        outputs: Key of the loss.
        mode: Mode(s) in which to run; every mode but "infer" by default.
        ds_id: Dataset id(s) in which to run; None for all.
        soft_dice: Sum squares in the denominator (``|P|^2 + |T|^2``).
        average_loss: Average over the batch; False keeps one loss per sample (and per channel unless
            ``channel_average``).
        channel_average: Average over the channels.
        channel_weights: ``{channel_index: weight}`` multiplying each channel's score before averaging; channels
            not listed weigh 1.
        epsilon: Added to the denominator so that empty masks do not divide by zero.

    Raises:
        ValueError: If ``inputs`` is not a pair of keys, or ``channel_weights`` is not a dict of int -> number.
    """

    def __init__(self, inputs: Iterable[str], outputs: str, mode: None | str | Iterable[str] = "!infer",
                 ds_id: None | str | Iterable[str] = None, soft_dice: bool = False, average_loss: bool = True,
                 channel_average: bool = True, channel_weights: dict[int, float] | None = None,
                 epsilon: float = 1e-6) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id, average_loss=average_loss)
        check_pair(self, "DiceLoss")
        if channel_weights is not None and (not isinstance(channel_weights, dict) or not all(
                isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 0
                and isinstance(v, numbers.Real) and not isinstance(v, bool) for k, v in channel_weights.items())):
            raise ValueError(f"DiceLoss channel_weights must be a dict {{channel_index (int >= 0): weight}}, got "
                             f"{channel_weights!r}.")
        self.soft_dice = soft_dice
        self.channel_average = channel_average
        self.channel_weights = {int(k): float(v) for k, v in channel_weights.items()} if channel_weights else None
        self.epsilon = epsilon

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        y_pred, y_true = data
        if "float16" in str(getattr(y_pred, "dtype", "")):  # float16 and bfloat16 (mixed precision)
            y_pred = cast(y_pred, "float32")
        dice = dice_score(y_pred=y_pred, y_true=y_true, soft_dice=self.soft_dice, sample_average=self.average_loss,
                          channel_average=self.channel_average, channel_weights=self._weights(y_pred),
                          epsilon=self.epsilon)
        return -dice

    def _weights(self, y_pred: Any) -> list[float] | None:
        """One weight per channel of ``y_pred`` (1 for channels not listed), or None without channel weights."""
        if not self.channel_weights:
            return None
        axis = 1 if get_framework(y_pred) == "torch" else -1
        channels = y_pred.shape[axis]
        if channels is None:
            raise ValueError("DiceLoss with channel_weights needs a static number of channels; give the prediction "
                             "a known channel size.")
        if max(self.channel_weights) >= int(channels):
            raise ValueError(f"DiceLoss channel_weights names channel {max(self.channel_weights)} but the prediction "
                             f"has {int(channels)} channels (shape {tuple(y_pred.shape)}); valid channel indexes "
                             f"are 0..{int(channels) - 1}.")
        return [self.channel_weights.get(idx, 1.0) for idx in range(int(channels))]
