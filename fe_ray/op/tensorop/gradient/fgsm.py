"""FGSM: adversarial samples by the Fast Gradient Sign Method (https://arxiv.org/abs/1412.6572)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import clip_by_value, get_framework, reduce_max, reduce_min, sign
from fe_ray.op.tensorop.gradient.gradient import GradientRecordingOp


class FGSM(GradientRecordingOp):
    """Write ``data + epsilon * sign(d loss / d data)``, clipped to ``[clip_low, clip_high]``: the input nudged in
    the direction that increases the loss most (per element, at most ``epsilon``).

    The gradient needs ``data`` recorded: put a :class:`~fe_ray.op.tensorop.gradient.Watch` on its key before the
    ops that compute the loss (torch: it must require grad; TF: the step's GradientTape must watch it), as in
    FastEstimator's adversarial-training example. Like every gradient op it makes the Network record gradients in
    the modes it runs in (so it also works in "eval"), and it keeps torch's graph alive when a later op (an
    UpdateOp on the clean and adversarial losses) still needs it.

    A typical adversarial-training step: ``Watch("x")``, ``ModelOp(x -> y_pred)``, ``CrossEntropy(-> ce)``,
    ``FGSM(data="x", loss="ce", outputs="x_adv")``, ``ModelOp(x_adv -> y_pred_adv)``, ``CrossEntropy(-> ce_adv)``,
    ``Average(("ce", "ce_adv") -> avg_ce)``, ``UpdateOp(loss_name="avg_ce")``.

    Differences from FastEstimator: a bound of 0 is a bound (FastEstimator treats ``clip_low=0`` like None and clips
    at the data's minimum instead); a loss that does not depend on ``data`` (an unwatched input) raises a ValueError
    saying how to fix it, in both frameworks; a non-scalar torch loss is summed first, as TF does.

    On replicas (and under a slicer) "the batch" of the default bounds is each replica's slice; give both bounds for
    exactly the samples one process makes from the whole batch.

    Args:
        data: Key of the input to attack.
        loss: Key of the loss to increase (a scalar, e.g. a CrossEntropy's mean).
        outputs: Key of the adversarial sample.
        epsilon: The size of the step along the gradient's sign.
        clip_low: The smallest value the sample may take; None for the batch's minimum of ``data``.
        clip_high: The largest value the sample may take; None for the batch's maximum of ``data``.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        TypeError: If a key is not a string, or a bound or ``epsilon`` is not a number.
        ValueError: If ``clip_low`` is greater than ``clip_high``.
    """

    def __init__(self, data: str, loss: str, outputs: str, epsilon: float = 0.01, clip_low: float | None = None,
                 clip_high: float | None = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        for name, key in (("data", data), ("loss", loss), ("outputs", outputs)):
            if not isinstance(key, str):
                raise TypeError(f"FGSM {name} must be one key (a str), got {key!r}.")
        for name, value in (("epsilon", epsilon), ("clip_low", clip_low), ("clip_high", clip_high)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"FGSM {name} must be a number{'' if name == 'epsilon' else ' or None'}, got "
                                f"{value!r}.")
        if clip_low is not None and clip_high is not None and clip_low > clip_high:
            raise ValueError(f"FGSM clip_low ({clip_low}) is greater than clip_high ({clip_high}); swap them.")
        super().__init__(inputs=[data, loss], outputs=outputs, mode=mode, ds_id=ds_id)
        self.in_list, self.out_list = True, False
        self.epsilon = epsilon
        self.clip_low = clip_low
        self.clip_high = clip_high

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        x, loss = data
        framework = get_framework(x)
        if framework == "torch":
            if not x.requires_grad:
                raise ValueError(self._unwatched())
            if loss.dim() > 0:
                loss = loss.sum()
        grad = self.gradient(loss, x, state, keep_none=True)
        if grad is None:  # TF: the tape did not watch x, or the loss does not use it
            raise ValueError(self._unwatched())
        low = reduce_min(x) if self.clip_low is None else self.clip_low
        high = reduce_max(x) if self.clip_high is None else self.clip_high
        return clip_by_value(x + self.epsilon * sign(grad), min_value=low, max_value=high)

    def _unwatched(self) -> str:
        data, loss = self.inputs
        return (f"FGSM cannot differentiate {loss!r} w.r.t. {data!r}: the input was not recorded for gradients (or the "
                f"loss does not use it). Put Watch(inputs={data!r}) before the ops that compute {loss!r}.")
