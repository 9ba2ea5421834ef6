"""The TF step executor: runs a Network's ops once, as a traced ``tf.function`` or eagerly.

Graph lifetime: :func:`run_step` keeps its ``tf.function`` objects (from :func:`new_step_fn`) in the cache the
Network hands every context's state under :data:`CACHE_KEY`, keyed by what they were traced for (ops, output keys,
mode, warm-up, optimizers, trainable layers, ...), so a context like an earlier one (the next epoch's training, the
next evaluation) reuses its graph instead of tracing it again: a trace cost 0.24-0.6 s per context for LeNet, paid
twice per epoch. At most :data:`MAX_STEP_FNS` are kept, the least recently used dropped first, so a schedule that
keeps changing the ops cannot accumulate graphs (the leak FastEstimator avoids with ``clear_session``). A state
without the cache (direct calls) keeps the functions in the state itself, i.e. for as long as that dict lives.

Call cost: a ``tf.function`` computes the trace type of every argument on every call. Handing it the ops, the
output keys and the whole state dict cost ~0.3 ms per step on a 2-core CPU (0.50 ms against 0.21 ms for a trivial
graph), 6% of a LeNet step. The step function therefore closes over everything that is fixed for the context and
takes only the batch tensors and the epoch; a change of one of the fixed values (an optimizer switch, frozen
layers, another reducer) selects or builds another function instead of retracing one.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from fe_ray.backend import BACKEND_CACHE_KEY
from fe_ray.backend.tf_io import build_optimizer
from fe_ray.util import NonContext

#: State key of the Network's cache that outlives its contexts (BaseNetwork puts it into every context's state).
CACHE_KEY = BACKEND_CACHE_KEY
#: Cache key holding the step functions: {key of the fixed inputs: tf.function}, least recently used first.
STEP_FN_KEY = "_tf_step_fns"
#: Step functions kept per Network.
MAX_STEP_FNS = 16
#: State key caching (reducer, graph-safe wrapper) so the wrapper object, part of the step function's key,
#: stays stable.
REDUCER_KEY = "_tf_grad_reducer"
_PRIVATE_KEYS = (CACHE_KEY, STEP_FN_KEY, REDUCER_KEY, "tape")
_LOGGER = logging.getLogger(__name__)


def _forward_step(batch: dict[str, Any], state: dict[str, Any], ops: list[Any],
                  output_keys: list[str]) -> dict[str, Any]:
    """Run ``ops`` under a persistent GradientTape (when gradients are needed); return the outputs."""
    from fe_ray.op.tensorop.tensorop import run_ops  # deferred: the op package imports the backend dispatcher

    # tf.function forbids mutating its Python arguments, and ops write into both dicts: work on copies.
    batch = dict(batch)
    state = dict(state)
    state["deferred"] = {}
    with tf.GradientTape(persistent=True) if state["req_grad"] else NonContext() as tape:
        state["tape"] = tape
        run_ops(ops, batch, state)
    del state["tape"]
    return {key: batch[key] for key in output_keys if key in batch}


def new_step_fn(ops: Sequence[Any], output_keys: Sequence[str],
                fixed_state: dict[str, Any]) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """A fresh graph-mode step function ``fn(batch, epoch) -> outputs`` running ``ops`` with ``fixed_state``.

    Only the batch and the epoch are arguments (see the module docstring); ``reduce_retracing`` lets batches of
    different sizes share a trace with a relaxed shape.
    """
    ops, output_keys, fixed_state = list(ops), list(output_keys), dict(fixed_state)

    def step(batch: dict[str, Any], epoch: Any) -> dict[str, Any]:
        state = dict(fixed_state)
        if epoch is not None:
            state["epoch"] = epoch
        return _forward_step(batch, state, ops, output_keys)

    return tf.function(step, reduce_retracing=True)


def run_step(ops: Sequence[Any], batch: dict[str, Any], state: dict[str, Any], gpu_input_keys: set[str],
             output_keys: set[str], device: Any = None, mixed_precision: bool = False) -> dict[str, Any]:
    """Run one forward (and, in training, backward) pass of ``ops``; return the outputs as eager tensors.

    Args:
        ops: The TensorOps of the current context.
        batch: The (mini)batch; only ``gpu_input_keys`` are converted to tensors and passed in.
        state: The context state; ``state["eager"]`` runs eagerly, ``state["req_grad"]`` records a tape.
        gpu_input_keys: Keys the ops read from the batch.
        output_keys: Keys to return.
        device: Unused (TF places tensors itself).
        mixed_precision: Unused (TF mixed precision is the global Keras dtype policy set at build time).
    """
    from fe_ray.backend.tf import to_tensor

    batch_in = {key: to_tensor(batch[key]) for key in gpu_input_keys if key in batch}
    models = _models_of(ops)
    for model in models:
        # Create optimizer variables eagerly: a traced update must not create variables (and under tf.cond it can't).
        build_optimizer(model)
    outputs = sorted(output_keys)
    cache = state.get(CACHE_KEY)
    if cache is None:
        cache = state
    if state.get("eager"):
        return _forward_step(batch_in, _call_state(state, models, graph=False, cache=cache), list(ops), outputs)
    call_state = _call_state(state, models, graph=True, cache=cache)
    epoch = call_state.pop("epoch", None)
    call_state.pop("deferred", None)  # each step starts a fresh one (_forward_step)
    key = (tuple(id(op) for op in ops), tuple(outputs), _fixed_key(call_state))
    step_fns: OrderedDict[Any, Any] = cache.setdefault(STEP_FN_KEY, OrderedDict())
    step_fn = step_fns.get(key)
    if step_fn is None:
        step_fn = step_fns[key] = new_step_fn(ops, outputs, call_state)
        if len(step_fns) > MAX_STEP_FNS:
            step_fns.popitem(last=False)
            _LOGGER.warning("More than %d distinct TF step functions were traced for one Network; the least recently "
                            "used is dropped. If this repeats, a value in the step state changes between steps "
                            "(state keys %s).", MAX_STEP_FNS, sorted(call_state))
    else:
        step_fns.move_to_end(key)
    return step_fn(batch_in, epoch)


def _fixed_key(value: Any) -> Any:
    """A hashable key that changes when ``value`` does: plain values by value, containers by their items, any
    other object by identity (the step function holds a reference, so an identity cannot be reused meanwhile)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return ("dict", tuple((k, _fixed_key(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_fixed_key(v) for v in value))
    return ("id", id(value))


def _call_state(state: dict[str, Any], models: list[Any], graph: bool, cache: dict[str, Any]) -> dict[str, Any]:
    """The state handed to the ops: private keys removed; in graph mode made trace-friendly."""
    call_state = {key: value for key, value in state.items() if key not in _PRIVATE_KEYS}
    call_state.setdefault("req_grad", False)
    if not graph:
        return call_state
    # Python values select the step function (run_step's key) while tensors only contribute their dtype/shape: pass
    # the epoch as a tensor so a new epoch does not retrace. Conversely the graph bakes in the optimizer objects and
    # the trainable-variable lists, so put them into the state: switching optimizers (schedulers) or freezing layers
    # changes the key and forces the retrace that is needed. The optimizers themselves (not their ids) go in, so a
    # cached function keeps them alive and a new optimizer can never reuse a cached one's identity.
    if "epoch" in call_state:
        # int32, the dtype FastEstimator's tf.convert_to_tensor(epoch) gives: ops written for it combine the epoch
        # with int32 tensors, which TF refuses to mix with int64.
        call_state["epoch"] = tf.convert_to_tensor(call_state["epoch"], dtype=tf.int32)
    trainable = "".join(str(layer.trainable) for model in models for layer in _layers(model))
    optimizers = tuple(getattr(model, "current_optimizer", None) for model in models)
    call_state["_force_tf_retrace"] = (trainable, optimizers)
    reducer = call_state.get("grad_reducer")
    if reducer is not None:
        cached = cache.get(REDUCER_KEY)
        if cached is None or cached[0] is not reducer:
            cached = cache[REDUCER_KEY] = (reducer, graph_safe_reducer(reducer))
        call_state["grad_reducer"] = cached[1]
    return call_state


def _layers(model: Any) -> list[Any]:
    """The model and every layer inside it, nested models' layers too: freezing any of them changes the step."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is not None:
        return list(flatten(include_self=True, recursive=True))
    return [model, *getattr(model, "layers", [])]


def _models_of(ops: Sequence[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for op in ops:
        for model in op.get_fe_models():
            seen.setdefault(id(model), model)
    return list(seen.values())


def graph_safe_reducer(reducer: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """Wrap a gradient reducer so it also works inside a traced graph.

    Inside ``tf.function`` gradients are symbolic, but a reducer that talks to other processes needs values. The
    wrapper runs the reducer through ``tf.numpy_function``, i.e. eagerly on each step's concrete gradients (given
    to it as eager TF tensors, as in eager mode), and feeds its results back into the graph.

    A reducer with a ``reduce_numpy(*arrays) -> list[np.ndarray]`` method (fe_ray's all-reduce has one, and
    ``sum_numpy`` for ``prescaled=True``) is handed the gradients as the numpy arrays ``tf.numpy_function`` gives
    it, and its arrays go straight back: no eager tensor round trip per gradient (each conversion is an op
    dispatch; for LeNet's 10 gradients the reduction took 1.3-2.0 ms per step with the round trips on 2 CPU cores,
    0.5 ms with the direct call). A reducer's ``loss_share()`` becomes a graph op too, so every step reads its
    current value rather than the one seen when the graph was traced.
    """
    reduce_numpy = getattr(reducer, "reduce_numpy", None)
    sum_numpy = getattr(reducer, "sum_numpy", None)

    def reduce(model: Any, gradients: list[Any], prescaled: bool = False) -> list[Any]:
        # Only a reducer that offers loss_share() is ever called with prescaled=True (UpdateOp checks): a user's
        # two-argument reducer keeps working.
        extra = {"prescaled": True} if prescaled else {}
        if tf.executing_eagerly():
            return list(reducer(model, list(gradients), **extra))
        dtypes = [g.dtype for g in gradients]
        direct = sum_numpy if prescaled else reduce_numpy
        if direct is not None:
            reduced = tf.numpy_function(direct, list(gradients), Tout=dtypes, stateful=True,
                                        name="fe_ray_grad_reduce")
        else:

            def run_eagerly(*values: np.ndarray) -> list[np.ndarray]:
                reduced = reducer(model, [tf.convert_to_tensor(v) for v in values], **extra)
                return [np.asarray(keras.ops.convert_to_numpy(r), dtype=d.as_numpy_dtype)
                        for r, d in zip(reduced, dtypes)]

            reduced = tf.numpy_function(run_eagerly, list(gradients), Tout=dtypes, stateful=True)
        return [tf.ensure_shape(r, g.shape) for r, g in zip(reduced, gradients)]

    loss_share = getattr(reducer, "loss_share", None)
    if loss_share is not None:

        def share() -> Any:
            if tf.executing_eagerly():
                return loss_share()
            value = tf.numpy_function(lambda: np.float32(loss_share()), [], Tout=tf.float32, stateful=True,
                                      name="fe_ray_loss_share")
            return tf.ensure_shape(value, [])

        reduce.loss_share = share  # type: ignore[attr-defined]
    return reduce
