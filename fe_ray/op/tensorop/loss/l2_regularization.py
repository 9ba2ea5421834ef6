"""L2Regularizaton: add an L2 penalty on a model's weights to a loss (FastEstimator's class name and spelling)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from fe_ray.backend import l2_regularization
from fe_ray.op.tensorop.tensorop import TensorOp


class L2Regularizaton(TensorOp):
    """Output ``loss + beta * sum(w**2) / 2`` over the model's trainable weights ``w``.

    The class name keeps FastEstimator's spelling (no second "i"), so that programs port unchanged; the module is
    ``fe_ray.op.tensorop.loss.l2_regularization`` as in FastEstimator.

    Args:
        inputs: The key of the loss to add the penalty to.
        outputs: The key of the regularised loss.
        model: The model whose trainable weights are penalised (built with :func:`fe_ray.build`, or any torch
            ``nn.Module`` / Keras model).
        mode: Mode(s) in which to run; None for all.
        beta: The weight of the penalty.
        ds_id: Dataset id(s) in which to run; None for all (an addition: FastEstimator's has none).

    Raises:
        ValueError: If ``inputs`` or ``outputs`` is not a single key.
        TypeError: If ``model`` is neither a torch nor a Keras model, or ``beta`` is not a number.
    """

    def __init__(self, inputs: str, outputs: str, model: Any, mode: None | str | Iterable[str] = None,
                 beta: float = 0.01, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != 1 or len(self.outputs) != 1:
            raise ValueError(f"L2Regularizaton takes one loss key and writes one key, got inputs={self.inputs} and "
                             f"outputs={self.outputs}; e.g. L2Regularizaton(inputs='ce', outputs='l2', model=model).")
        if isinstance(beta, bool) or not isinstance(beta, (int, float)):
            raise TypeError(f"L2Regularizaton beta must be a number, got {beta!r} ({type(beta).__name__}).")
        _check_model(model)
        self.model = model
        self.beta = float(beta)
        self.in_list = self.out_list = False

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data + l2_regularization(self.model, self.beta)


def _check_model(model: Any) -> None:
    """Raise a TypeError unless ``model`` is a torch ``nn.Module`` or a Keras model (checked when the op is made, so
    the mistake does not wait for the first step)."""
    torch, keras = sys.modules.get("torch"), sys.modules.get("keras")  # a model implies its framework is loaded
    if torch is not None and isinstance(model, torch.nn.Module):
        return
    if keras is not None and isinstance(model, keras.layers.Layer):
        return
    raise TypeError(f"L2Regularizaton needs model= a torch nn.Module or a Keras model, got "
                    f"{type(model).__module__}.{type(model).__qualname__}; pass the model built with fe_ray.build.")
