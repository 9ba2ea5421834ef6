"""Watch: record tensors of the batch for later gradient computation (e.g. gradients w.r.t. an image)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import get_framework
from fe_ray.op.tensorop.tensorop import TensorOp


class Watch(TensorOp):
    """Make the input tensors differentiable so that a later :class:`GradientOp` can take gradients w.r.t. them.

    torch: a tensor that does not require grad is replaced (under the same key) by a detached copy that does, so
    the batch's own tensor (which may share memory with the pipeline's numpy array) is left alone. TF: the step's
    GradientTape watches the tensor. Like any gradient op, a Watch makes the Network record gradients in the modes
    it runs in.

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
        self.retain_graph = True

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        # Reporting itself as a gradient op makes the Network record gradients (torch autograd, TF tape).
        if retain is not None:
            self.retain_graph = retain
        return self.retain_graph

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [_watch(tensor, state.get("tape")) for tensor in data]


def _watch(tensor: Any, tape: Any) -> Any:
    """``tensor`` made differentiable: a grad-requiring torch tensor, or a TF tensor watched by ``tape``."""
    framework = get_framework(tensor)
    if framework == "torch":
        if tensor.requires_grad:
            return tensor
        if not (tensor.is_floating_point() or tensor.is_complex()):
            raise TypeError(f"Watch can only differentiate w.r.t. floating-point tensors, got dtype {tensor.dtype}; "
                            "cast the key to float first (e.g. in the Pipeline).")
        return tensor.detach().requires_grad_(True)
    if framework == "tf":
        if tape is not None and hasattr(tape, "watch"):
            tape.watch(tensor)
        return tensor
    raise TypeError(f"Watch needs torch or TF tensors, got {type(tensor).__name__}.")
