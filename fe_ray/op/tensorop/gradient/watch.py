"""Watch: record tensors of the batch for later gradient computation (e.g. gradients w.r.t. an image)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import get_framework, watch
from fe_ray.op.tensorop.gradient.gradient import GradientRecordingOp


class Watch(GradientRecordingOp):
    """Make the input tensors differentiable so that a later :class:`GradientOp` (or :class:`FGSM`) can take
    gradients w.r.t. them.

    torch: a tensor that does not require grad is replaced (under the same key) by a detached copy that does, so
    the batch's own tensor (which may share memory with the pipeline's numpy array) is left alone. TF: the step's
    GradientTape watches the tensor. Both go through :func:`fe_ray.backend.watch`. Like any gradient op, a Watch
    makes the Network record gradients in the modes it runs in.

    Args:
        inputs: Key(s) of the tensors to watch; they are written back under the same keys.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If no key is given.
    """

    def __init__(self, inputs: str | Iterable[str], mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=inputs, mode=mode, ds_id=ds_id)
        if not self.inputs:
            raise ValueError("Watch needs at least one input key to watch, e.g. Watch(inputs='x').")
        self.in_list = self.out_list = True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [_watch(tensor, state.get("tape")) for tensor in data]


def _watch(tensor: Any, tape: Any) -> Any:
    """``tensor`` made differentiable: a grad-requiring torch tensor, or a TF tensor watched by ``tape``."""
    framework = get_framework(tensor)
    if framework == "tf" and (tape is None or not hasattr(tape, "watch")):
        return tensor  # a step that records nothing (run outside a Network): there is no tape to watch with
    if framework in ("torch", "tf"):
        return watch(tensor, tape)
    raise TypeError(f"Watch needs torch or TF tensors, got {type(tensor).__name__}.")
