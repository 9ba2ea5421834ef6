"""ModelOp: run a model built by :func:`fe_ray.build` inside a Network."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.op.tensorop.tensorop import TensorOp
from fe_ray.util import to_list


class ModelOp(TensorOp):
    """Feed the input key(s) through ``model`` and write its prediction(s) to the output key(s).

    Behaves like FastEstimator 1.7's ModelOp.

    Args:
        model: A torch ``nn.Module`` or Keras ``Model`` built with :func:`fe_ray.build`.
        inputs: Input key(s). Several keys are spread into positional arguments when the model takes several
            (torch: ``forward`` has more than one parameter; Keras: a subclassed model whose ``call`` takes more than
            one input besides ``training`` / ``mask``); otherwise the model receives them as one list (e.g. the
            inputs of a functional Keras model).
        outputs: Output key(s). Without ``intermediate_layers``, the model's output(s). With them, one key per
            model output (a tuple or list counts as several) followed by one key per intermediate layer.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.
        trainable: Run the model in training mode (dropout, batch-norm updates) when the mode is "train".
        gradients: Record gradients through the model. False runs it without tracking (torch ``no_grad``, TF
            ``stop_gradient``), e.g. for a frozen teacher.
        intermediate_layers: Layers whose outputs are also returned, each a name or an index. Torch: a key of
            ``dict(model.named_modules())`` or an index into ``list(model.named_modules())`` (0 is the model
            itself). TF: a layer name or an index into the recursive layer list as FastEstimator (tf.keras 2)
            numbers it: each layer followed by the layers nested in it, a nested Sequential's input layer first
            (:func:`fe_ray.backend.tf.nested_layers`), so layers of nested sub-models count.
            Their outputs are recorded during the model's ordinary forward pass (torch forward hooks; Keras: the
            layer's ``call`` is wrapped), installed once when the op is built.

    Raises:
        TypeError: If ``model`` was not built with :func:`fe_ray.build`, or an ``intermediate_layers`` entry is
            neither a str nor an int.
        ValueError: If there are intermediate layers but no more output keys than layers; at build, if a layer name
            or index does not exist (the message lists the valid names and index range); when the op runs, if the
            number of output keys is not the model's number of outputs plus the number of intermediate layers.
    """

    def __init__(self, model: Any, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 trainable: bool = True, gradients: bool = True,
                 intermediate_layers: None | str | int | Iterable[str | int] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not getattr(model, "fe_compiled", False):
            raise TypeError(f"ModelOp needs a model built with fe_ray.build, got an unbuilt {type(model).__name__}. "
                            "Wrap it: model = fe_ray.build(model_fn=..., optimizer_fn=...).")
        self.model = model
        self.trainable = trainable
        self.gradients = gradients
        self.intermediate_layers: list[str | int] = [_check_layer_entry(e) for e in to_list(intermediate_layers)]
        # How many outputs the model has is only known when it runs (forward checks the total then).
        if self.intermediate_layers and len(self.outputs) <= len(self.intermediate_layers):
            raise ValueError(f"ModelOp outputs {self.outputs} must hold at least one key for the model's output(s) "
                             f"plus one per intermediate layer {self.intermediate_layers}.")
        self.out_list = bool(self.intermediate_layers) or self.out_list
        self._backend: Any = None
        self._call: Callable[[Any, bool], list[Any]] | None = None

    def build(self, framework: str, device: Any = None) -> None:
        # Layers are looked up and hooked, and the way several inputs are passed is decided, once here rather than
        # every step; also here rather than in __init__ because ops travel pickled to the Ray replicas, which build
        # them again on their own copies of the models.
        self._backend = get_backend(framework)
        self._call = self._backend.build_model_fn(self.model, self.intermediate_layers)

    def get_fe_models(self) -> set[Any]:
        return {self.model}

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        if self._call is None:
            raise ValueError("ModelOp.build(framework) must run before forward; the Network does this for you.")
        training = self.trainable and state["mode"] == "train"
        if self.gradients:  # the usual case: no context to enter (entering a no-op one costs 0.3 us a step)
            final, *layer_outputs = self._call(data, training)
        else:
            with self._backend.no_grad():
                final, *layer_outputs = self._call(data, training)
        result = self._arrange(final, layer_outputs)
        if not self.gradients:
            result = self._backend.stop_gradient(result)
        return result

    def _arrange(self, final: Any, layer_outputs: list[Any]) -> Any:
        """The op's result: the model's output as is, or (with intermediate layers) its outputs, then the layers'."""
        if not self.intermediate_layers:
            return final
        finals = list(final) if isinstance(final, (list, tuple)) else [final]
        if len(finals) + len(layer_outputs) != len(self.outputs):
            raise ValueError(f"ModelOp outputs {self.outputs} do not fit: the model returned {len(finals)} output(s) "
                             f"and there are {len(layer_outputs)} intermediate layer(s) {self.intermediate_layers}, "
                             f"which need {len(finals) + len(layer_outputs)} output keys.")
        return finals + layer_outputs

    def __getstate__(self) -> dict[str, Any]:
        # The step function holds the hooks / wrapped layers of this process's model; a copy is built afresh.
        return {**self.__dict__, "_call": None}


def _check_layer_entry(entry: Any) -> str | int:
    """An ``intermediate_layers`` entry as a str (name) or int (index); bools are not indexes."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, numbers.Integral) and not isinstance(entry, bool):
        return int(entry)
    raise TypeError(f"intermediate_layers entries must be layer names (str) or indexes (int), got {entry!r} "
                    f"({type(entry).__name__}).")
