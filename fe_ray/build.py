"""``fe_ray.build``: create models, attach optimizers, names and fe_ray's bookkeeping attributes."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np

from fe_ray.backend import get_backend, get_framework, is_model
from fe_ray.schedule import EpochScheduler, RepeatScheduler, Scheduler
from fe_ray.util import to_list

_name_lock = threading.Lock()
_build_count = 0


@contextmanager
def _keras_dtype_policy(keras: Any, mixed_precision: bool) -> Iterator[None]:
    """Keras' global dtype policy set by the flag for the layers created inside, then put back.

    Keras alone, not fe_ray's TF backend: Keras may be imported in a torch program (another library, Keras 3 on
    the torch backend), where TensorFlow may be missing or slow to import.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16" if mixed_precision else "float32")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _generate_names(count: int) -> list[str]:
    """Auto names "model", "model1", "model2", ... unique within this process (FastEstimator's scheme)."""
    global _build_count
    with _name_lock:
        names = ["model" if _build_count + i == 0 else f"model{_build_count + i}" for i in range(count)]
        _build_count += count
    return names


def build(model_fn: Callable[[], Any], optimizer_fn: Any, weights_path: str | Sequence[str | None] | None = None,
          model_name: str | Sequence[str] | None = None, mixed_precision: bool = False) -> Any:
    """Build model(s) with ``model_fn`` and attach optimizers, names and fe_ray attributes.

    Args:
        model_fn: Zero-argument function returning a torch ``nn.Module`` / Keras ``Model``, or a list of them.
        optimizer_fn: Per model: an optimizer name ("adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax"), a
            callable (torch: ``lambda params: torch.optim.SGD(params, lr=0.1)``; TF: ``lambda:
            tf.optimizers.SGD(0.1)``), None, or an EpochScheduler/RepeatScheduler of those.
        weights_path: Per model, a weights file to load (torch ``.pt`` state dict, TF ``.weights.h5``, or the
            legacy ``.h5`` FastEstimator 1.7 wrote), or None.
        model_name: Per model, a name (unique case-insensitively); auto-generated when omitted.
        mixed_precision: Run the models in mixed precision (float16 compute, loss scaling).

    Returns:
        The model, or a list of models when ``model_fn`` returns several. Each has ``model_name``,
        ``optimizer``, ``current_optimizer``, ``mixed_precision`` and ``fe_compiled`` set. Keras models also
        have ``input_spec = None``, as in FastEstimator, so they take inputs of other sizes than declared.

    Raises:
        TypeError: If ``model_fn`` is not callable, is a model instance rather than a function creating one, or
            returns something that is not a model.
        ValueError: If the numbers of models, optimizers, names and weights disagree, or names repeat.
    """
    if get_framework(model_fn) in ("torch", "tf"):
        # A model instance is callable too, but calling it runs its forward pass without inputs, which fails with a
        # message about missing arguments that does not point at the real mistake.
        raise TypeError(f"model_fn must be a function that creates the model(s), got a {type(model_fn).__name__} "
                        "instance. Pass the class or a factory, e.g. model_fn=LeNet or model_fn=lambda: my_model.")
    if not callable(model_fn):
        raise TypeError(f"model_fn must be a zero-argument callable returning model(s), got {type(model_fn).__name__}.")
    # Keras reads its dtype policy when layers are created, so it is set (by the flag, either way) while model_fn
    # runs and put back afterwards: a later build, or the user's own Keras code, must not inherit it. A Keras
    # model_fn implies keras is already imported; torch users never pay for importing TensorFlow here.
    keras = sys.modules.get("keras")
    keras_loaded = keras is not None
    policy: AbstractContextManager[Any] = _keras_dtype_policy(keras, mixed_precision) if keras_loaded \
        else nullcontext()
    # Keras draws its initializers' seeds from Python's generator: a second run of model_fn (below) starts where the
    # first one started, so a seeded build gets the same weights whether or not model_fn imports Keras itself.
    random_states = (random.getstate(), np.random.get_state()) if mixed_precision and not keras_loaded else None
    with policy:
        models = to_list(model_fn())
    if random_states is not None and any(get_framework(model) == "tf" for model in models):
        # model_fn imported Keras itself, too late for the policy: its layers compute in float32. Build again
        # under the policy (model_fn runs twice only in this case).
        random.setstate(random_states[0])
        np.random.set_state(random_states[1])
        with get_backend("tf").mixed_precision_policy(True):
            models = to_list(model_fn())
    for model in models:
        # Not get_framework: it also names tensors, optimizers and containers of models by their framework.
        if not is_model(model):
            raise TypeError(f"model_fn must return torch nn.Module or Keras Model objects, got {type(model).__name__}.")
    optimizers = to_list(optimizer_fn) if isinstance(optimizer_fn, (list, tuple)) else [optimizer_fn]
    if optimizer_fn is None or not optimizers:  # None or an empty list: no optimizers, as in FastEstimator
        optimizers = [None] * len(models)
    names = to_list(model_name) if model_name else _generate_names(len(models))
    weights = to_list(weights_path) if weights_path else [None] * len(models)
    counts = {"models": len(models), "optimizers": len(optimizers), "model names": len(names),
              "weights paths": len(weights)}
    if len(set(counts.values())) != 1:
        raise ValueError(f"build() got inconsistent counts {counts}; give one optimizer, name and weights path per "
                         "model returned by model_fn.")
    lowered = [str(n).lower() for n in names]
    if len(set(lowered)) != len(lowered):
        raise ValueError(f"Model names must be unique case-insensitively, got {names}.")
    for model, opt_def, weight, name in zip(models, optimizers, weights, names):
        _compile(model, opt_def, weight, str(name), mixed_precision)
    return models[0] if len(models) == 1 else models


def _compile(model: Any, optimizer_def: Any, weights_path: str | None, name: str, mixed_precision: bool) -> None:
    backend = get_backend(model)
    if get_framework(model) == "tf":
        # FastEstimator's build lets TF models take inputs of other sizes than they were declared for.
        backend.relax_input_spec(model)
    if weights_path:
        backend.load_weights(model, weights_path)
    if isinstance(optimizer_def, Scheduler):
        optimizer = _build_scheduled(backend, model, optimizer_def, mixed_precision)
        current = optimizer.get_current_value(1)
    else:
        optimizer = backend.make_optimizer(model, optimizer_def, mixed_precision)
        current = optimizer
    model.model_name = name
    model.optimizer = optimizer
    model.current_optimizer = current
    model.mixed_precision = mixed_precision
    model.fe_compiled = True


def _build_scheduled(backend: Any, model: Any, scheduler: Scheduler, mixed_precision: bool) -> Scheduler:
    """Turn a Scheduler of optimizer definitions into a Scheduler of optimizers (one instance per definition)."""
    if isinstance(scheduler, EpochScheduler):
        return EpochScheduler({epoch: backend.make_optimizer(model, opt, mixed_precision)
                               for epoch, opt in scheduler.epoch_dict.items()})
    if isinstance(scheduler, RepeatScheduler):
        return RepeatScheduler([backend.make_optimizer(model, opt, mixed_precision) for opt in scheduler.repeat_list])
    raise TypeError(f"Unsupported optimizer scheduler {type(scheduler).__name__}; use EpochScheduler or "
                    "RepeatScheduler.")
