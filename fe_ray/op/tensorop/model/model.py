"""ModelOp: run a model built by :func:`fe_ray.build` inside a Network."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.op.tensorop.tensorop import TensorOp
from fe_ray.util import NonContext, to_list


class ModelOp(TensorOp):
    """Feed the input key(s) through ``model`` and write its prediction(s) to the output key(s).

    Args:
        model: A torch ``nn.Module`` or Keras ``Model`` built with :func:`fe_ray.build`.
        inputs: Input key(s); several keys are passed to the model as separate inputs.
        outputs: Output key(s): the final output, then one key per ``intermediate_layers`` entry.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.
        trainable: Run the model in training mode (dropout, batch-norm updates) when the mode is "train".
        gradients: Record gradients through the model. False runs it without tracking (torch ``no_grad``, TF
            ``stop_gradient``), e.g. for a frozen teacher.
        intermediate_layers: Names of layers whose outputs are also returned (torch: submodule names from
            ``named_modules()``; TF: layer names).

    Raises:
        TypeError: If ``model`` was not built with :func:`fe_ray.build`.
        ValueError: If the number of outputs does not match 1 + len(intermediate_layers).
    """

    def __init__(self, model: Any, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 trainable: bool = True, gradients: bool = True,
                 intermediate_layers: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not getattr(model, "fe_compiled", False):
            raise TypeError(f"ModelOp needs a model built with fe_ray.build, got an unbuilt {type(model).__name__}. "
                            "Wrap it: model = fe_ray.build(model_fn=..., optimizer_fn=...).")
        self.model = model
        self.trainable = trainable
        self.gradients = gradients
        self.intermediate_layers: list[str] = [str(name) for name in to_list(intermediate_layers)]
        if len(self.outputs) != 1 + len(self.intermediate_layers):
            raise ValueError(f"ModelOp outputs {self.outputs} must hold one key for the final output plus one per "
                             f"intermediate layer {self.intermediate_layers}.")
        self.out_list = bool(self.intermediate_layers) or self.out_list
        self._backend: Any = None
        self._call: Callable[[Any, bool], Any] | None = None

    def build(self, framework: str, device: Any = None) -> None:
        self._backend = get_backend(framework)
        if self.intermediate_layers:
            self._call = self._backend.build_model_fn(self.model, self.intermediate_layers)
        else:
            backend = self._backend
            self._call = lambda x, training: backend.feed_forward(self.model, x, training=training)

    def get_fe_models(self) -> set[Any]:
        return {self.model}

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        if self._call is None:
            raise ValueError("ModelOp.build(framework) must run before forward; the Network does this for you.")
        training = self.trainable and state["mode"] == "train"
        with NonContext() if self.gradients else self._backend.no_grad():
            result = self._call(data, training)
        if not self.gradients:
            result = self._backend.stop_gradient(result)
        return result
