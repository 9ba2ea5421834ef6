"""The TF backend's optimizers: building them from FastEstimator's names or a zero-argument callable,
learning-rate access, and Keras' mixed-precision policy. Imported by :mod:`fe_ray.backend.tf`, which re-exports it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from fe_ray.backend.optimizers import optimizer_by_name
from fe_ray.backend.tf_io import KNOWN_LR_ATTR
from fe_ray.util import accepts_positional

#: Optimizer names accepted by :func:`make_optimizer` (Keras defaults for every hyper-parameter).
_OPTIMIZERS: dict[str, Callable[[], keras.optimizers.Optimizer]] = {
    "adadelta": keras.optimizers.Adadelta,
    "adagrad": keras.optimizers.Adagrad,
    "adam": keras.optimizers.Adam,
    "adamax": keras.optimizers.Adamax,
    "rmsprop": keras.optimizers.RMSprop,
    "sgd": keras.optimizers.SGD,
}



def make_optimizer(model: keras.Model, optimizer_def: Any, mixed_precision: bool = False) -> Any:
    """Create the optimizer for ``model`` from a name, a zero-argument callable, or None.

    In mixed precision the optimizer is wrapped in a ``keras.mixed_precision.LossScaleOptimizer``.

    Raises:
        ValueError: For an unknown optimizer name (listing the valid names).
        TypeError: If the definition is of another type or the callable does not return a Keras optimizer.
    """
    if optimizer_def is None:
        return None
    if isinstance(optimizer_def, str):
        optimizer = optimizer_by_name(optimizer_def, _OPTIMIZERS,
                                      "a zero-argument callable such as `lambda: tf.optimizers.SGD(0.1)`")()
    elif callable(optimizer_def):
        if accepts_positional(optimizer_def, 0) is False:
            name = getattr(optimizer_def, "__name__", optimizer_def)
            raise TypeError("A TF optimizer_fn is called with no arguments (`lambda: tf.optimizers.Adam(1e-3)`), but "
                            f"{name!r} needs some, like a torch one (`lambda params: ...`): make sure the model and "
                            "optimizer_fn use the same framework.")
        try:
            optimizer = optimizer_def()
        except ValueError as err:
            # FastEstimator's own docs build TF optimizers with Keras 2's `lr=` alias, which Keras 3 rejects with a
            # message that does not say what to write instead.
            if "not recognized" in str(err) and "'lr'" in str(err):
                raise ValueError("Keras 3 optimizers no longer accept `lr=`; write `learning_rate=` instead, e.g. "
                                 "`lambda: tf.optimizers.Adam(learning_rate=0.1)`.") from err
            raise
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TypeError("A TF optimizer_fn must be a zero-argument callable returning a Keras optimizer (e.g. "
                            f"`lambda: tf.optimizers.Adam(1e-3)`), but it returned {type(optimizer).__name__}.")
    else:
        raise TypeError(f"optimizer_fn must be a name, a callable or None, got {type(optimizer_def).__name__}.")
    if mixed_precision and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    live_weight_decay(optimizer)
    return optimizer


def live_weight_decay(optimizer: Any) -> None:
    """Hold ``optimizer``'s weight decay in a variable that compiled steps read when they run.

    Keras keeps an optimizer's (decoupled) weight decay as a Python float, which a ``tf.function`` step bakes in when
    it is traced: :func:`set_lr`'s decay, scaled with the rate as FastEstimator does, never reached a compiled step,
    and a resumed run, traced afresh, decayed by another value than the run it resumes. Optimizers without a weight
    decay are left alone.
    """
    inner = _inner(optimizer)
    decay = getattr(inner, "weight_decay", None)
    if decay is not None and not isinstance(decay, tf.Variable):
        inner.weight_decay = tf.Variable(float(decay), trainable=False, dtype=tf.float32, name="weight_decay")


def get_weight_decay(optimizer: Any) -> float | None:
    """The weight decay of ``optimizer`` as a float, or None for an optimizer without one (or no optimizer)."""
    decay = None if optimizer is None else getattr(_inner(optimizer), "weight_decay", None)
    return None if decay is None else float(keras.ops.convert_to_numpy(decay))


def set_weight_decay(optimizer: Any, value: float) -> None:
    """Set ``optimizer``'s weight decay (held by :func:`live_weight_decay`'s variable, or a float)."""
    inner = _inner(optimizer)
    if isinstance(inner.weight_decay, tf.Variable):
        inner.weight_decay.assign(float(value))
    else:
        inner.weight_decay = float(value)


@contextmanager
def float_weight_decay(optimizer: Any) -> Iterator[None]:
    """``optimizer``'s weight decay as a plain float inside (its Keras config must hold a number), then the variable
    again."""
    inner = _inner(optimizer)
    decay = getattr(inner, "weight_decay", None)
    if not isinstance(decay, tf.Variable):
        yield
        return
    inner.weight_decay = float(decay.numpy())
    try:
        yield
    finally:
        inner.weight_decay = decay


def _inner(optimizer: Any) -> Any:
    """The optimizer a LossScaleOptimizer wraps, else the optimizer itself."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def set_mixed_precision_policy(enabled: bool) -> None:
    """Set Keras' global dtype policy ('mixed_float16' or 'float32'); it applies to layers created afterwards."""
    keras.mixed_precision.set_global_policy("mixed_float16" if enabled else "float32")


@contextmanager
def mixed_precision_policy(enabled: bool) -> Iterator[None]:
    """Keras' global dtype policy set to 'mixed_float16' (or 'float32') for the layers created inside, then put
    back: it is process-wide, and models created later (another ``fe.build``, a user's own Keras code) must not
    inherit it. A layer keeps the policy it was created with."""
    previous = keras.mixed_precision.global_policy()
    set_mixed_precision_policy(enabled)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def set_lr(model: keras.Model, lr: float, weight_decay: float | None = None) -> None:
    """Set the learning rate of ``model.current_optimizer`` (the inner one for a LossScaleOptimizer).

    An optimizer with a weight decay gets ``weight_decay``, or (None) its weight decay scaled by ``lr / old lr``,
    as FastEstimator does for decoupled decay (AdamW, SGDW); an old rate of 0 leaves the decay unchanged.
    """
    optimizer = _current_optimizer(model)
    current_decay = get_weight_decay(optimizer)
    if current_decay is not None:
        if weight_decay is None:
            old_lr = get_lr(model)
            weight_decay = current_decay * lr / old_lr if old_lr else current_decay
        set_weight_decay(optimizer, weight_decay)
    optimizer.learning_rate = lr
    # Remember the value the variable holds (float32 as a rule), not the float64 given: a driver compares the two
    # to spot rates changed around set_lr (fe_ray.distributed.lr_mirror), and 0.1 != float32(0.1).
    dtype = getattr(optimizer.learning_rate, "dtype", "float32")
    setattr(optimizer, KNOWN_LR_ATTR, float(np.asarray(lr, dtype=getattr(dtype, "as_numpy_dtype", dtype))))


def get_lr(model: keras.Model) -> np.floating:
    """The current learning rate of ``model.current_optimizer`` (read from its variable).

    Returns:
        A numpy scalar of the variable's dtype (float32 as a rule), as FastEstimator's TF ``get_lr`` returns: the
        Finish log line and the history show ``0.0009997196`` rather than float64's ``0.0009997196029871702``.
    """
    optimizer = _current_optimizer(model)
    lr = np.asarray(keras.ops.convert_to_numpy(optimizer.learning_rate))[()]
    setattr(optimizer, KNOWN_LR_ATTR, float(lr))
    return lr


def known_lr(model: keras.Model) -> float:
    """The learning rate as last set by :func:`set_lr` or read by :func:`get_lr`, without reading the variable
    (an op; see :class:`fe_ray.distributed.lr_mirror.LrMirror` for why a distributed driver avoids one per step).
    A rate written around :func:`set_lr` (e.g. ``optimizer.learning_rate.assign``) is seen by the next
    :func:`get_lr`; restoring optimizer variables forgets the remembered value."""
    lr = getattr(_current_optimizer(model), KNOWN_LR_ATTR, None)
    return get_lr(model) if lr is None else lr


def _current_optimizer(model: Any) -> Any:
    optimizer = getattr(model, "current_optimizer", None)
    if optimizer is None:
        raise ValueError(f"Model {getattr(model, 'model_name', model.name)!r} has no optimizer; build it with an "
                         "optimizer_fn to change or read its learning rate.")
    return optimizer


__all__ = ["float_weight_decay", "get_lr", "get_weight_decay", "known_lr", "live_weight_decay", "make_optimizer",
           "mixed_precision_policy", "set_lr", "set_mixed_precision_policy", "set_weight_decay"]
