"""LossOp: the base class of loss TensorOps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.op.tensorop.tensorop import TensorOp


class LossOp(TensorOp):
    """A TensorOp computing a loss from ``inputs = (prediction_key, ground_truth_key)``.

    Args:
        inputs: Keys of the prediction and the ground truth (more for some losses).
        outputs: Key of the loss.
        mode: Mode(s) in which to run; by default every mode but "infer" (which has no labels).
        ds_id: Dataset id(s) in which to run; None for all.
        average_loss: Return the mean over the batch (a scalar). False returns one loss per sample, e.g. for
            traces that need per-sample values; UpdateOp averages it anyway.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = "!infer", ds_id: None | str | Iterable[str] = None,
                 average_loss: bool = True) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.average_loss = average_loss
        self._backend: Any = None

    @property
    def pred_key(self) -> str:
        """The key of the prediction."""
        return self.inputs[0]

    @property
    def true_key(self) -> str:
        """The key of the ground truth."""
        return self.inputs[1]

    def build(self, framework: str, device: Any = None) -> None:
        self._backend = get_backend(framework)

    def _get_backend(self, tensor: Any) -> Any:
        # Ops may be run without a Network (e.g. in tests); fall back to the tensor's own framework.
        return self._backend if self._backend is not None else get_backend(tensor)
