"""GradientOp: gradients of one or more tensors w.r.t. tensors of the step or a model's trainable weights."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import cast, get_backend, get_framework
from fe_ray.op.tensorop.tensorop import TensorOp
from fe_ray.util import to_list


class GradientRecordingOp(TensorOp):
    """Base of the TensorOps that need the step's gradient recording: :class:`GradientOp`, :class:`Watch` and
    :class:`FGSM`.

    Answering :meth:`fe_retain_graph` with a bool (not None) makes the Network record gradients (torch autograd, the
    TF GradientTape in ``state['tape']``) in every mode the op runs in, and lets it tell each such op whether a later
    one still needs torch's autograd graph (``self.retain_graph``).
    """

    retain_graph: bool = True
    _backend: Any = None

    def build(self, framework: str, device: Any = None) -> None:
        self._backend = get_backend(framework)

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        if retain is not None:
            self.retain_graph = retain
        return self.retain_graph

    def gradient(self, final: Any, source: Any, state: dict[str, Any], retain: bool | None = None,
                 keep_none: bool = False) -> Any:
        """The gradient of ``final`` w.r.t. ``source`` (a tensor or a list of them) in the running step.

        Args:
            final: The tensor to differentiate.
            source: What to differentiate it with respect to.
            state: The step state (its 'tape' records TF steps).
            retain: Keep torch's graph for later gradients; the Network's decision (``self.retain_graph``) if None.
            keep_none: Return None, not zeros, for a source ``final`` does not depend on (or that was not recorded).
        """
        backend = self._backend if self._backend is not None else get_backend(final)
        return backend.get_gradient(final, source, tape=state.get("tape"),
                                    retain_graph=self.retain_graph if retain is None else retain, keep_none=keep_none)


class ReducedGradients(list):
    """Gradients w.r.t. a model's weights that a :class:`GradientOp` already averaged over the replicas.

    An UpdateOp given this very list does not all-reduce it again; any other list (an op that clipped or scaled
    these gradients makes a new one) is reduced as usual, which leaves gradients equal on every replica as they are.
    """


class GradientOp(GradientRecordingOp):
    """Write the gradients of ``finals`` w.r.t. ``inputs`` (pairwise), or w.r.t. ``model``'s trainable weights.

    Gradients of a tensor of the batch (``inputs``) need it recorded: in torch it must require grad (put a
    :class:`Watch` on an input key before the ops that use it), in TF the step's GradientTape must watch it (Watch
    again; weights and model outputs are recorded anyway). The Network records gradients in every mode in which a
    GradientOp runs, so it also works in "eval" (e.g. saliency or adversarial examples).

    On replicas, gradients w.r.t. a model's weights are the whole batch's, as one process computes them: each replica
    differentiates its slice and the op averages the results over the replicas, weighted by slice size (the
    network's ``grad_reducer``, as UpdateOp does; finals are taken to be means over the samples, as losses are). So
    ops that change them non-linearly before an ``UpdateOp(gradients=...)`` (clipping) act as in one process.
    Gradients w.r.t. tensors of the batch are each sample's and stay with the replica's slice; for a scalar final
    (a mean over the replica's slice) they are scaled by the replica's share of the batch, so each sample's gradient
    is that of the whole batch's mean, as in one process.

    Args:
        finals: Key(s) of the tensors to differentiate (scalars, e.g. losses; a non-scalar tensor is summed first,
            as both frameworks do).
        outputs: One key per final: its gradient (same shape as the input), or with ``model`` the list of
            gradients, one per trainable weight (in ``trainable_variables`` / ``parameters()`` order).
        inputs: Key(s) of the tensors to differentiate w.r.t., one per final. Exclusive with ``model``.
        model: The model whose trainable weights to differentiate w.r.t. Exclusive with ``inputs``.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If both or neither of ``inputs`` and ``model`` are given, or the key counts do not match.
        TypeError: If ``model`` is neither a torch nor a Keras model.
    """

    def __init__(self, finals: str | Iterable[str], outputs: str | Iterable[str],
                 inputs: None | str | Iterable[str] = None, model: Any = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        final_keys, output_keys, input_keys = to_list(finals), to_list(outputs), to_list(inputs)
        if (model is None) == (not input_keys):
            raise ValueError("GradientOp needs exactly one of inputs= (keys of tensors) or model= (differentiate "
                             f"w.r.t. its weights); got inputs={inputs!r} and model={type(model).__name__}.")
        if model is not None and get_framework(model) not in ("torch", "tf"):
            raise TypeError(f"GradientOp model must be a torch nn.Module or a Keras model, got "
                            f"{type(model).__name__}.")
        if len(output_keys) != len(final_keys) or (input_keys and len(input_keys) != len(final_keys)):
            raise ValueError(f"GradientOp needs one output key (and, without model, one input key) per final key: "
                             f"got finals={final_keys}, outputs={output_keys}, inputs={input_keys}.")
        super().__init__(inputs=input_keys + final_keys, outputs=output_keys, mode=mode, ds_id=ds_id)
        self.in_list = self.out_list = True
        self.model = model
        self.num_finals = len(final_keys)

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        finals = data[-self.num_finals:]
        if self.model is not None:
            backend = self._backend if self._backend is not None else get_backend(finals[0])
            sources = [list(backend.trainable_variables(self.model))] * len(finals)
        else:
            sources = data[:-self.num_finals]
        # On replicas, gradients w.r.t. the weights are averaged over them, and those w.r.t. the batch's tensors are
        # scaled to the whole batch's mean (see the class docstring).
        reducer = state.get("grad_reducer") if self.model is not None else None
        share = None if self.model is not None else getattr(state.get("grad_reducer"), "loss_share", None)
        results = []
        for idx, (final, source) in enumerate(zip(finals, sources)):
            # Only the last gradient may free torch's graph, and only when no later op needs it (the Network decides
            # retain_graph from the ops after this one).
            retain = self.retain_graph or idx < len(finals) - 1
            gradients = self.gradient(final, source, state, retain=retain)
            if reducer is not None:
                gradients = ReducedGradients(reducer(self.model, gradients))
            elif share is not None and len(final.shape) == 0:
                # A scalar final is a mean over the replica's slice: its sample's share of the whole batch's mean is
                # this replica's share of the batch (a final of per-sample values is summed, the same anywhere).
                gradients = gradients * cast(share(), gradients)
            results.append(gradients)
        return results
