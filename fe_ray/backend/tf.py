"""The TensorFlow/Keras backend: tensors, gradients, optimizers and the per-step executor for TF Networks.

Imported lazily by :func:`fe_ray.backend.get_backend`. Implements the interface documented by
:class:`fe_ray.backend.base.Backend`; persistence lives in :mod:`fe_ray.backend.tf_io`, loss math in
:mod:`fe_ray.backend.tf_losses`, optimizers, learning rates and the mixed-precision policy in
:mod:`fe_ray.backend.tf_optim`, and the graph executor (:func:`run_step`) in :mod:`fe_ray.backend.tf_step`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from fe_ray.backend.layer_capture import OutputRecorder, pick, run_recording, takes_several_inputs
from fe_ray.backend.tf_io import (
    build_optimizer,
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
from fe_ray.backend.tf_losses import cross_entropy, mean_squared_error
from fe_ray.backend.tf_optim import (
    float_weight_decay,
    get_lr,
    known_lr,
    live_weight_decay,
    make_optimizer,
    mixed_precision_policy,
    set_lr,
    set_mixed_precision_policy,
)
from fe_ray.backend.tf_step import new_step_fn, run_step
from fe_ray.util import NonContext, map_nested


# ---------------------------------------------------------------------------------------------------- tensors
def to_tensor(data: Any) -> Any:
    """Convert numpy arrays / torch tensors (nested in dicts, lists, tuples) to TF tensors.

    Object arrays and plain Python objects are passed through unchanged.
    """
    return map_nested(_to_tensor_leaf, data)


def _to_tensor_leaf(data: Any) -> Any:
    if isinstance(data, (tf.Tensor, tf.Variable)):
        return data
    if hasattr(data, "detach"):  # a torch tensor: go through numpy without importing torch here
        data = data.detach().cpu().numpy()
    if isinstance(data, (np.ndarray, np.generic)):
        return data if data.dtype.kind == "O" else tf.convert_to_tensor(data)
    return data


def to_numpy(data: Any) -> Any:
    """Convert TF tensors / Keras variables (nested in dicts, lists, tuples) to numpy arrays."""
    return map_nested(_to_numpy_leaf, data)


def _to_numpy_leaf(data: Any) -> Any:
    if isinstance(data, (tf.Tensor, tf.Variable, keras.Variable)):
        try:
            return np.asarray(keras.ops.convert_to_numpy(data))
        except ValueError:
            # A 0-d bfloat16 tensor: its __array__ "does not produce an array" for numpy 2, its .numpy() does.
            return np.array(data.numpy())
    return data


def reduce_mean(x: tf.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> tf.Tensor:
    """Mean over ``axis`` (all elements when None), keeping the reduced axes as size 1 when ``keepdims``."""
    return tf.reduce_mean(x, axis=axis if axis is None or isinstance(axis, int) else list(axis), keepdims=keepdims)


def concat(xs: Sequence[tf.Tensor], axis: int = 0) -> tf.Tensor:
    """Concatenate along an existing axis."""
    return tf.concat(list(xs), axis=axis)


def stack(xs: Sequence[tf.Tensor], axis: int = 0) -> tf.Tensor:
    """Stack along a new axis."""
    return tf.stack(list(xs), axis=axis)


def stop_gradient(data: Any) -> Any:
    """Block gradients through (nested) tensors."""
    return map_nested(_stop_gradient_leaf, data)


def _stop_gradient_leaf(data: Any) -> Any:
    return tf.stop_gradient(data) if isinstance(data, tf.Tensor) else data


def no_grad() -> AbstractContextManager[Any]:
    """TF records gradients only on explicit tapes; :func:`stop_gradient` does the blocking instead."""
    return NonContext()


# ---------------------------------------------------------------------------------------------------- devices
def get_device() -> None:
    """TF places tensors itself; there is no explicit device."""
    return None


def move_model(model: keras.Model, device: Any) -> None:
    """No-op: TF places variables itself."""


# ---------------------------------------------------------------------------------------------------- models
def trainable_variables(model: keras.Model) -> list[Any]:
    """Variables the optimizer updates, in the order gradients are exchanged."""
    return list(model.trainable_variables)


def feed_forward(model: keras.Model, x: Any, training: bool = True, spread: bool = False) -> Any:
    """Run ``model`` on ``x``; a one-element list is unwrapped, a longer list is the model's multiple inputs (one
    argument), or its positional arguments when ``spread`` (a subclassed model whose ``call`` takes several)."""
    if isinstance(x, (list, tuple)) and len(x) == 1:
        x = x[0]
    x = to_tensor(x)
    return model(*x, training=training) if spread and isinstance(x, list) else model(x, training=training)


def build_model_fn(model: keras.Model, layers: Sequence[str | int]) -> Callable[[Any, bool], list[Any]]:
    """Return ``fn(x, training) -> [model output, *outputs of the chosen layers]`` (FastEstimator's rules).

    Args:
        model: The model: Sequential, functional or subclassed.
        layers: Layers whose outputs are also returned: names or indexes into the model's recursive layer list
            (:func:`nested_layers`: each layer followed by the layers nested in it), so layers inside nested models
            count.
            Each chosen layer's ``call`` is wrapped (once, however often this runs) to record its output during the
            model's ordinary forward pass, eager or traced, with gradients flowing as usual.

    Returns:
        The step function. Several inputs (``x`` a list) are spread into positional arguments when the model's
        ``call`` takes several inputs (a subclassed model); functional and Sequential models take them as one list.

    Raises:
        ValueError: If an entry names no layer, names several, or its index is out of range, listing the choices.
    """
    relax_input_spec(model)  # again here: a model rebuilt from Keras' saving format (a Ray replica) lost it
    flat = [(layer.name, layer) for layer in nested_layers(model)]
    owner = getattr(model, "model_name", model.name)
    recorders = [_call_wrapper(pick(flat, entry, owner, "that (recursive) list")[1]) for entry in layers]
    spread = takes_several_inputs(model.call, ignore=("training", "mask"))

    def run(x: Any, training: bool) -> list[Any]:
        return run_recording(recorders, layers, lambda: feed_forward(model, x, training, spread))

    return run


def nested_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """Every layer of ``model``, each followed by the layers nested in it, in each model's own order, as
    FastEstimator's (tf.keras 2) recursive list numbers them: a nested Sequential's input layer comes before its
    first layer. Keras 3's own recursive walk lists a nested model's layers last-first, so indexes would pick other
    layers. A layer shared by several models counts once, where it first appears."""
    found: list[keras.layers.Layer] = []
    seen: set[int] = set()

    def walk(layer: keras.layers.Layer) -> None:
        for child in layer._flatten_layers(include_self=False, recursive=False):
            if id(child) not in seen:
                seen.add(id(child))
                found.append(child)
                walk(child)

    walk(model)
    return found


def relax_input_spec(model: keras.Model) -> None:
    """Drop the model's input-shape check, as FastEstimator 1.7's ``build`` does (``model.input_spec = None``).

    A functional model declared for one input size then runs on others wherever its layers allow (a fully
    convolutional network trained on crops and run on whole images), as FastEstimator users rely on; Keras 3
    would raise instead. The layers inside keep their own checks (channels, rank). Keras' saving format (how
    models are pickled) does not keep this, so every process that builds a ModelOp applies it again.
    """
    model.input_spec = None


class _CallWrapper(OutputRecorder):
    """The Keras half of :class:`~fe_ray.backend.layer_capture.OutputRecorder`: it replaces a layer's ``call`` (an
    instance attribute) and records what the original returns.

    Keras invokes ``layer.call`` from ``Layer.__call__`` whichever model runs the layer (a functional graph,
    Sequential, a subclassed ``call``, a nested model), so this sees every real call; inside a tf.function the
    recorded tensor belongs to the graph being traced, and the ModelOp collects it in the same trace. Keras pickles
    models through its saving format, which ignores instance attributes: a model rebuilt on a Ray replica has plain
    layers, which the ModelOp wraps again when the replica builds it.
    """

    def __init__(self, layer: keras.layers.Layer) -> None:
        super().__init__(layer.name)
        self.inner = layer.call  # the class's call, or a wrapper someone else already put on the instance
        functools.update_wrapper(self, self.inner)  # Keras inspects call's signature (training / mask)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        output = self.inner(*args, **kwargs)
        self.record(output)
        return output


def _call_wrapper(layer: keras.layers.Layer) -> OutputRecorder:
    """The layer's recorder: the wrapper an earlier build (or another ModelOp) installed, else a new one."""
    current = layer.__dict__.get("call")
    if isinstance(current, _CallWrapper):
        return current
    wrapper = _CallWrapper(layer)
    # Past Keras' / TF's attribute tracking: the wrapper is neither state to track nor something to save.
    object.__setattr__(layer, "call", wrapper)
    return wrapper


def add_model_losses(model: keras.Model, loss: tf.Tensor) -> tf.Tensor:
    """Add the model's registered losses (weight regularizers, ``add_loss``) to ``loss``."""
    extra = model.losses
    if not extra:
        return loss
    return loss + tf.cast(tf.add_n([tf.reduce_sum(x) for x in extra]), loss.dtype)


# ---------------------------------------------------------------------------------------------------- gradients
def get_gradient(target: tf.Tensor, sources: Any, tape: Any = None, retain_graph: bool = True,
                 higher_order: bool = False, keep_none: bool = False) -> Any:
    """Gradients of ``target`` w.r.t. ``sources`` from the recording ``tape``, densified, zeros where unused.

    Args:
        target: The tensor to differentiate.
        sources: A list of variables / watched tensors, or a single one (then a single gradient is returned, as
            FastEstimator's ``get_gradient`` does).
        tape: The GradientTape that recorded ``target``.
        retain_graph: Unused (a persistent tape keeps its graph); accepted for the torch backend's signature.
        higher_order: Record the gradient computation on ``tape`` as well, so the gradients can be differentiated
            again (e.g. a WGAN-GP gradient penalty). Without it the recording is paused meanwhile.
        keep_none: Return None (instead of zeros) for sources that ``target`` does not depend on; UpdateOp uses it
            to leave such weights alone, as Keras optimizers do.

    Raises:
        ValueError: If no GradientTape is given (TF cannot differentiate after the fact).
    """
    if tape is None or not hasattr(tape, "gradient"):
        raise ValueError("TF gradients need the GradientTape that recorded the forward pass (state['tape']); run the "
                         "ops through a Network or fe_ray.backend.tf.run_step with state['req_grad'] = True.")
    # A single variable or tensor must not be iterated: list() would split it into its rows, none of which the tape
    # recorded, and every gradient would silently be zero.
    single = isinstance(sources, (tf.Tensor, tf.Variable, keras.Variable))
    source_list = [sources] if single else list(sources)
    # Ops run inside the tape's context; pausing the recording keeps the gradient computation itself off the tape,
    # unless the caller wants to differentiate the gradients again.
    recording = getattr(tape, "_recording", False)  # stop_recording() refuses a tape whose context has exited
    with tape.stop_recording() if recording and not higher_order else NonContext():
        grads = tape.gradient(target, source_list)
    # Zeros are filled in here rather than by TF (UnconnectedGradients.ZERO), which fails on Keras 3 variables.
    # Dense tensors (not IndexedSlices) so reducers and accumulators can treat every gradient alike.
    # zeros_like, not zeros(shape): a traced source's shape may be partly unknown (a smaller last batch).
    grads = [None if g is None and keep_none else tf.zeros_like(s) if g is None
             else tf.convert_to_tensor(g) for g, s in zip(grads, source_list)]
    return grads[0] if single else grads


def fill_unconnected(gradients: Sequence[Any], variables: Sequence[Any]) -> list[tf.Tensor]:
    """``gradients`` with zeros in place of None (for reducers and accumulators, which need every entry)."""
    return [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]


def scale_loss(model: keras.Model, loss: tf.Tensor) -> tf.Tensor:
    """Multiply the loss by the LossScaleOptimizer's dynamic scale (mixed precision); identity otherwise."""
    optimizer = model.current_optimizer
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        # A float16 loss times the scale (2**15 at first) overflows; Keras' own trainer also scales float32 losses.
        return optimizer.scale_loss(tf.cast(loss, tf.float32))
    return loss


def uses_loss_scaling(model: keras.Model) -> bool:
    """Whether :func:`scale_loss` scales this model's loss (its optimizer is a LossScaleOptimizer)."""
    return isinstance(model.current_optimizer, keras.optimizers.LossScaleOptimizer)


def unscale_gradients(model: keras.Model, gradients: list[tf.Tensor]) -> list[tf.Tensor]:
    """Identity: Keras 3's LossScaleOptimizer divides by the scale (and skips non-finite steps) when applying.

    Gradients therefore stay scaled through the reducer and merge_grad accumulation, exactly like the torch
    GradScaler path; both are linear, so the applied update is unchanged.
    """
    return gradients


def update_model(model: keras.Model, gradients: Sequence[tf.Tensor], defer: bool = False,
                 deferred: dict[str, list[Callable[[], None]]] | None = None,
                 variables: Sequence[tf.Variable] | None = None) -> None:
    """Apply ``gradients`` with ``model.current_optimizer`` now, or at the end of the step when ``defer``
    (``variables``: the model's :func:`trainable_variables` if the caller has them)."""
    variables = trainable_variables(model) if variables is None else list(variables)
    gradients = list(gradients)

    def apply() -> None:
        model.current_optimizer.apply_gradients(zip(gradients, variables))

    if defer:
        if deferred is None:
            raise ValueError("update_model(defer=True) needs the step's `deferred` dict to store the update in.")
        deferred.setdefault(model.model_name, []).append(apply)
    else:
        apply()


# ---------------------------------------------------------------------------------------------------- accumulation
def init_accumulator(model: keras.Model, device: Any = None) -> tuple[tf.Variable, list[tf.Variable]]:
    """Create a (step counter, gradient sums) pair of variables for merge_grad accumulation.

    Variables (not Python numbers) because the counter must advance inside a traced graph. The optimizer is built
    now, since an update applied inside ``tf.cond`` must not create variables.
    """
    if not model.weights:
        # The sums are made now, one per weight: an unbuilt model would get none, and every update would be dropped.
        raise ValueError(f"UpdateOp(merge_grad>1) needs model {getattr(model, 'model_name', model.name)!r} built "
                         "before the Network is made: its weights do not exist yet. Give it a keras.Input (or an "
                         "input_shape), or call it once on a sample batch inside model_fn.")
    build_optimizer(model)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    sums = [tf.Variable(tf.zeros(v.shape, dtype=v.dtype), trainable=False) for v in trainable_variables(model)]
    return step, sums


def merge_grad_update(model: keras.Model, step: tf.Variable, grad_sum: list[tf.Variable],
                      gradients: Sequence[tf.Tensor], merge_grad: int, defer: bool = False,
                      deferred: dict[str, list[Callable[[], None]]] | None = None,
                      variables: Sequence[tf.Variable] | None = None) -> None:
    """Add ``gradients`` to the sums; on every ``merge_grad``-th call apply their mean and zero the sums.

    ``variables``: as in :func:`update_model`. The decision is a ``tf.cond`` on the step variable, so one traced
    graph serves every step.
    """
    for total, grad in zip(grad_sum, gradients):
        total.assign_add(tf.cast(grad, total.dtype))
    step.assign_add(1)
    variables = trainable_variables(model) if variables is None else list(variables)

    def apply_mean() -> tf.Tensor:
        model.current_optimizer.apply_gradients(zip([total / merge_grad for total in grad_sum], variables))
        for total in grad_sum:
            total.assign(tf.zeros_like(total))
        return tf.constant(True)

    def maybe_apply() -> None:
        tf.cond(tf.equal(step % merge_grad, 0), apply_mean, lambda: tf.constant(False))

    if defer:
        if deferred is None:
            raise ValueError("merge_grad_update(defer=True) needs the step's `deferred` dict.")
        deferred.setdefault(model.model_name, []).append(maybe_apply)
    else:
        maybe_apply()


def accumulator_to_numpy(step: tf.Variable, grad_sum: Sequence[tf.Variable]) -> dict[str, Any]:
    """A picklable snapshot of an accumulator."""
    return {"step": int(step.numpy()), "grad_sum": [np.array(g.numpy()) for g in grad_sum]}


def accumulator_from_numpy(step: tf.Variable, grad_sum: Sequence[tf.Variable], state: dict[str, Any]) -> None:
    """Restore an accumulator in place from :func:`accumulator_to_numpy`'s snapshot."""
    step.assign(int(state["step"]))
    for total, saved in zip(grad_sum, state["grad_sum"]):
        total.assign(saved)


__all__ = ["accumulator_from_numpy", "accumulator_to_numpy", "add_model_losses", "build_model_fn", "build_optimizer",
           "concat", "cross_entropy", "feed_forward", "fill_unconnected", "float_weight_decay", "get_buffers",
           "get_device", "get_gradient", "get_lr", "get_state", "init_accumulator", "known_lr", "live_weight_decay",
           "load_model", "load_weights", "make_optimizer", "mean_squared_error", "merge_grad_update",
           "mixed_precision_policy", "move_model", "new_step_fn", "no_grad", "reduce_mean", "relax_input_spec",
           "run_step", "save_model", "scale_loss", "set_buffers", "set_lr", "set_mixed_precision_policy", "set_state",
           "stack", "state_is_view", "stop_gradient", "to_numpy", "to_tensor", "trainable_variables",
           "unscale_gradients", "update_model", "weight_layout",
           "weights_fingerprint"]
