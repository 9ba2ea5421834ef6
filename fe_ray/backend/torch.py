"""The PyTorch backend: tensors, gradients, optimizers and the per-step executor for torch Networks.

Imported lazily by :func:`fe_ray.backend.get_backend`, so importing torch at module level is fine here. The
function set is the one documented by :class:`fe_ray.backend.base.Backend`; persistence helpers live in
:mod:`fe_ray.backend.torch_io`, loss math in :mod:`fe_ray.backend.torch_losses`, the tensor conversions in
:mod:`fe_ray.backend.torch_tensors` and the step executor in :mod:`fe_ray.backend.torch_step`, re-exported below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch

from fe_ray.backend.layer_capture import OutputRecorder, pick, run_recording, takes_several_inputs
from fe_ray.backend.torch_io import (
    get_buffers,
    get_state,
    load_model,
    load_weights,
    save_model,
    set_buffers,
    set_state,
    state_is_view,
    weight_layout,
    weights_fingerprint,
)
from fe_ray.backend.torch_losses import cross_entropy, mean_squared_error
from fe_ray.backend.torch_modules import forget_models, index_models, set_training, trainable_variables
from fe_ray.backend.torch_optim import (
    get_lr,
    known_lr,
    make_optimizer,
    mixed_precision_policy,
    set_lr,
    set_mixed_precision_policy,
)
from fe_ray.backend.torch_step import run_step, start_step
from fe_ray.backend.torch_tensors import to_numpy, to_tensor
from fe_ray.util import map_nested


# ---------------------------------------------------------------------------------------------------- tensors
def reduce_mean(x: torch.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> torch.Tensor:
    """Mean over ``axis`` (all elements when None, none when empty), keeping the reduced axes as size 1 when
    ``keepdims``.

    A floating-point scalar, the usual loss, is returned as it is.
    """
    if axis is None:
        if x.ndim == 0 and x.is_floating_point():
            return x
        return torch.mean(x, dim=tuple(range(x.ndim)), keepdim=True) if keepdims else torch.mean(x)
    dims = axis if isinstance(axis, int) else tuple(axis)
    if dims == ():  # no axis to reduce: each element is its own mean (torch's dim=() would reduce them all)
        return x.clone()
    return torch.mean(x, dim=dims, keepdim=keepdims)


def concat(xs: Sequence[torch.Tensor], axis: int = 0) -> torch.Tensor:
    """Concatenate along an existing axis."""
    return torch.cat(list(xs), dim=axis)


def stack(xs: Sequence[torch.Tensor], axis: int = 0) -> torch.Tensor:
    """Stack along a new axis."""
    return torch.stack(list(xs), dim=axis)


def stop_gradient(data: Any) -> Any:
    """Detach (nested) tensors from the autograd graph."""
    return map_nested(_stop_gradient_leaf, data)


def _stop_gradient_leaf(data: Any) -> Any:
    return data.detach() if isinstance(data, torch.Tensor) else data


def no_grad() -> AbstractContextManager[Any]:
    """A context in which no autograd graph is recorded."""
    return torch.no_grad()


# ---------------------------------------------------------------------------------------------------- devices
def get_device() -> torch.device:
    """The device models run on: the first CUDA device if there is one, else the CPU."""
    return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def move_model(model: torch.nn.Module, device: Any) -> None:
    """Move a model and the state of its current optimizer to ``device``."""
    if device is None:
        return
    model.to(device)
    optimizer = getattr(model, "current_optimizer", None)
    if optimizer is not None:
        _move_nested(optimizer.state, device)


def _move_nested(data: Any, device: Any) -> None:
    for key, value in data.items():
        if isinstance(value, dict):
            _move_nested(value, device)
        elif isinstance(value, torch.Tensor):
            if key == "step" and value.dim() == 0:
                # Non-capturable optimizers (Adam & co.) keep their step counters on the CPU and read them with
                # .item(): on an accelerator every read would be a device sync, several per step.
                continue
            data[key] = value.to(device)


def enter_context(models: Sequence[torch.nn.Module], mode: str, device: Any) -> None:
    """Network hook at the start of a context: index the models' module trees for the steps (see
    :mod:`fe_ray.backend.torch_modules`) and put models (and, in training, optimizer state) on the device."""
    index_models(models)
    if device is None or torch.device(device).type == "cpu":
        return
    for model in models:
        model.to(device)
        if mode == "train" and getattr(model, "current_optimizer", None) is not None:
            _move_nested(model.current_optimizer.state, device)


def exit_context(models: Sequence[torch.nn.Module], mode: str, device: Any) -> None:
    """Network hook at the end of a context: drop the models' indexes and bring models back to the CPU to free
    accelerator memory."""
    forget_models(models)
    if device is None or torch.device(device).type == "cpu":
        return
    for model in models:
        move_model(model, "cpu")


# ---------------------------------------------------------------------------------------------------- models
def feed_forward(model: torch.nn.Module, x: Any, training: bool = True, spread: bool = True) -> Any:
    """Run ``model`` on ``x`` in train or eval mode; a list is unpacked into positional arguments when ``spread``
    (or when it holds one element), else passed as the model's one argument."""
    set_training(model, training)
    if not isinstance(x, torch.Tensor):  # the usual input is already a tensor: skip the nested walk
        x = to_tensor(x)
    return model(*x) if isinstance(x, list) and (spread or len(x) == 1) else model(x)


def build_model_fn(model: torch.nn.Module, layers: Sequence[str | int]) -> Callable[[Any, bool], list[Any]]:
    """Return ``fn(x, training) -> [model output, *outputs of the chosen submodules]`` (FastEstimator's rules).

    Args:
        model: The model.
        layers: Submodules whose outputs are also returned: names (keys of ``dict(model.named_modules())``) or
            indexes into ``list(model.named_modules())``, where 0 is the model itself. Forward hooks record their
            outputs, one per submodule however often this runs.

    Returns:
        The step function. Several inputs (``x`` a list) are spread into positional arguments only when
        ``model.forward`` takes several; otherwise the model receives the list as its one argument.

    Raises:
        ValueError: If an entry names no submodule or its index is out of range, listing the valid choices.
    """
    named = list(model.named_modules())
    owner = getattr(model, "model_name", type(model).__name__)
    recorders = []
    for entry in layers:
        name, module = pick(named, entry, owner, "named_modules() (0 is the model itself)")
        recorders.append(_forward_hook(module, name or owner))
    spread = takes_several_inputs(model.forward, unknown=True)

    def run(x: Any, training: bool) -> list[Any]:
        if not recorders:  # the usual ModelOp: no hooks to arm, no closure to make every step
            return [feed_forward(model, x, training, spread)]
        return run_recording(recorders, layers, lambda: feed_forward(model, x, training, spread))

    return run


class _ForwardHook(OutputRecorder):
    """The torch half of :class:`~fe_ray.backend.layer_capture.OutputRecorder`: a forward hook, importable so
    that models pickle with it."""

    def __call__(self, _module: torch.nn.Module, _inputs: Any, output: Any) -> None:
        self.record(output)


def _forward_hook(module: torch.nn.Module, name: str) -> OutputRecorder:
    """The submodule's recorder: the one registered by an earlier build (or another ModelOp), else a new one."""
    for hook in module._forward_hooks.values():
        if isinstance(hook, _ForwardHook):
            return hook
    hook = _ForwardHook(name)
    module.register_forward_hook(hook)
    return hook


def add_model_losses(model: torch.nn.Module, loss: torch.Tensor) -> torch.Tensor:
    """Torch models have no separately registered losses (unlike Keras ``model.losses``)."""
    return loss


# ---------------------------------------------------------------------------------------------------- gradients
def get_gradient(target: torch.Tensor, sources: Any, tape: Any = None, retain_graph: bool = True,
                 higher_order: bool = False, keep_none: bool = False) -> Any:
    """Gradients of ``target`` w.r.t. ``sources``; unused sources get zeros so every replica sends full lists.

    A non-scalar target gives the gradients of the sum of its entries, as in TF.

    A target with no autograd history (e.g. computed from a ``gradients=False`` ModelOp) yields all zeros, as TF
    does for unconnected sources.

    Args:
        target: The tensor to differentiate.
        sources: A list of tensors, or a single tensor (then its gradient alone is returned).
        tape: Unused (TF's recording tape); accepted so both backends take the same call.
        retain_graph: Keep the graph for further gradients of ``target``.
        higher_order: Build the gradients' own graph (``create_graph``), so they can be differentiated again.
        keep_none: Return None (instead of zeros) for sources that ``target`` does not depend on; UpdateOp uses it
            to leave such weights alone, as torch's optimizers skip a parameter without a gradient.
    """
    single = isinstance(sources, torch.Tensor)
    source_list = [sources] if single else list(sources)
    if not target.requires_grad:
        found: Sequence[torch.Tensor | None] = [None] * len(source_list)
    else:
        # A non-scalar target is differentiated as the sum of its entries (each sample's score at once), as TF's
        # tape and FastEstimator's torch backend do; torch itself refuses a non-scalar target without grad_outputs.
        found = torch.autograd.grad(target, source_list, grad_outputs=None if target.dim() == 0 else
                                    torch.ones_like(target), retain_graph=retain_graph or higher_order,
                                    create_graph=higher_order, allow_unused=True)
    grads = list(found) if keep_none else [torch.zeros_like(s) if g is None else g for g, s in zip(found, source_list)]
    return grads[0] if single else grads


def fill_unconnected(gradients: Sequence[torch.Tensor | None],
                     variables: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``gradients`` with zeros in place of None (for accumulators, which need every entry)."""
    return [torch.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]


def scale_loss(model: torch.nn.Module, loss: torch.Tensor) -> torch.Tensor:
    """Scale the loss with the optimizer's GradScaler (mixed precision on CUDA); identity otherwise."""
    scaler = getattr(model.current_optimizer, "scaler", None)
    return scaler.scale(loss) if scaler is not None else loss


def uses_loss_scaling(model: torch.nn.Module) -> bool:
    """Whether :func:`scale_loss` scales this model's loss (a GradScaler: mixed precision on CUDA)."""
    return getattr(model.current_optimizer, "scaler", None) is not None


def unscale_gradients(model: torch.nn.Module, gradients: list[torch.Tensor]) -> list[torch.Tensor]:
    """Identity: GradScaler.step() unscales at apply time, so gradients stay scaled until then."""
    return gradients


def update_model(model: torch.nn.Module, gradients: Sequence[torch.Tensor], defer: bool = False,
                 deferred: dict[str, list[Callable[[], None]]] | None = None,
                 variables: Sequence[torch.nn.Parameter] | None = None) -> None:
    """Apply ``gradients`` with ``model.current_optimizer`` now, or at the end of the step when ``defer``.

    Gradients are added into ``p.grad`` immediately, so several deferred updates of one model in a step sum their
    gradients and share a single optimizer step. ``variables``: the model's :func:`trainable_variables` when the
    caller already listed them (walking the module tree again costs several microseconds per step). A None gradient
    (a weight the loss does not reach, e.g. from ``torch.autograd.grad(..., allow_unused=True)``) leaves its weight
    alone, as FastEstimator does: torch's optimizers skip parameters without a gradient.

    Raises:
        ValueError: If the model has no current optimizer (it was built with ``optimizer_fn=None``, or not built).
    """
    if getattr(model, "current_optimizer", None) is None:
        raise ValueError(f"update_model cannot update model {getattr(model, 'model_name', type(model).__name__)!r}: it "
                         "has no optimizer. Build it with fe_ray.build and an optimizer_fn (e.g. 'adam').")
    for param, grad in zip(trainable_variables(model) if variables is None else variables, gradients):
        if grad is None:
            continue
        if grad.requires_grad:
            # Only gradients that carry a graph (higher-order ones) need detaching: detaching the usual ones would
            # make an alias of the same memory, 0.4 us a weight and step.
            grad = grad.detach()
        # No clone: autograd hands us fresh tensors. Accumulation is out of place, so a gradient tensor that is
        # also referenced elsewhere (a `gradients` key, a merge_grad average) is never modified.
        param.grad = grad if param.grad is None else param.grad + grad
    if defer:
        if deferred is None:
            raise ValueError("update_model(defer=True) needs the step's `deferred` dict to store the update in.")
        deferred[model.model_name] = [lambda: _optimizer_step(model)]
        return
    _optimizer_step(model)
    if deferred:
        deferred.pop(model.model_name, None)  # the step above consumed any gradients a deferred step would apply


def _optimizer_step(model: torch.nn.Module) -> None:
    optimizer = model.current_optimizer
    scaler = getattr(optimizer, "scaler", None)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


# ---------------------------------------------------------------------------------------------------- accumulation
def init_accumulator(model: torch.nn.Module, device: Any = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Create a (step counter, gradient sums) pair for merge_grad accumulation."""
    step = torch.tensor(0, dtype=torch.int64, device=device)
    sums = [torch.zeros_like(p, device=device) for p in trainable_variables(model)]
    return step, sums


def merge_grad_update(model: torch.nn.Module, step: torch.Tensor, grad_sum: list[torch.Tensor],
                      gradients: Sequence[torch.Tensor], merge_grad: int, defer: bool = False,
                      deferred: dict[str, list[Callable[[], None]]] | None = None,
                      variables: Sequence[torch.nn.Parameter] | None = None) -> None:
    """Add ``gradients`` to the sums; on every ``merge_grad``-th call apply their mean and zero the sums.

    ``variables``: as in :func:`update_model`.
    """
    with torch.no_grad():
        for total, grad in zip(grad_sum, gradients):
            total += grad.to(total.device)
        step += 1
    if int(step) % merge_grad == 0:
        average = [total / merge_grad for total in grad_sum]  # new tensors: safe to zero the sums in place below
        update_model(model, average, defer=defer, deferred=deferred, variables=variables)
        for total in grad_sum:
            total.zero_()


def accumulator_to_numpy(step: torch.Tensor, grad_sum: Sequence[torch.Tensor]) -> dict[str, Any]:
    """A picklable snapshot of an accumulator."""
    return {"step": int(step), "grad_sum": [to_numpy(g).copy() for g in grad_sum]}


def accumulator_from_numpy(step: torch.Tensor, grad_sum: Sequence[torch.Tensor], state: dict[str, Any]) -> None:
    """Restore an accumulator in place from :func:`accumulator_to_numpy`'s snapshot."""
    with torch.no_grad():
        step.fill_(int(state["step"]))
        for total, saved in zip(grad_sum, state["grad_sum"]):
            total.copy_(torch.as_tensor(saved))


__all__ = ["accumulator_from_numpy", "accumulator_to_numpy", "add_model_losses", "build_model_fn", "concat",
           "cross_entropy", "enter_context", "exit_context", "feed_forward", "fill_unconnected", "get_buffers",
           "get_device", "get_gradient", "get_lr", "get_state", "init_accumulator", "known_lr", "load_model",
           "load_weights", "make_optimizer", "mean_squared_error", "merge_grad_update", "mixed_precision_policy",
           "move_model", "no_grad", "reduce_mean", "run_step", "save_model", "scale_loss", "set_buffers", "set_lr",
           "set_mixed_precision_policy", "set_state", "stack", "start_step", "state_is_view", "stop_gradient",
           "to_numpy", "to_tensor", "trainable_variables", "unscale_gradients", "update_model", "weight_layout",
           "weights_fingerprint"]
