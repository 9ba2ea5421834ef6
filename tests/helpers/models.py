"""Tiny hand-built models for backend and op tests.

They set exactly the attributes :func:`fe_ray.build` sets, so backend and op tests do not depend on build().
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

WEIGHTS = (1.0, 2.0, 3.0)


def _attach(model: Any, framework: str, optimizer_def: Any, name: str, mixed_precision: bool) -> Any:
    from fe_ray.backend import get_backend

    optimizer = get_backend(framework).make_optimizer(model, optimizer_def, mixed_precision)
    model.model_name = name
    model.optimizer = optimizer
    model.current_optimizer = optimizer
    model.mixed_precision = mixed_precision
    model.fe_compiled = True
    return model


def torch_linear(optimizer_def: Any = "sgd", name: str = "linear", weights: tuple[float, ...] = WEIGHTS,
                 mixed_precision: bool = False, in_features: int = 3, out_features: int = 1) -> Any:
    """A bias-free ``Linear(in, out)``; with the defaults its weight is ``[[1, 2, 3]]``."""
    import torch

    model = torch.nn.Linear(in_features, out_features, bias=False)
    if in_features == len(weights) and out_features == 1:
        with torch.no_grad():
            model.weight.copy_(torch.tensor([weights]))
    return _attach(model, "torch", optimizer_def, name, mixed_precision)


def tf_dense(optimizer_def: Any = "sgd", name: str = "dense", weights: tuple[float, ...] = WEIGHTS,
             mixed_precision: bool = False) -> Any:
    """A Keras ``Sequential([Input(3), Dense(1, use_bias=False)])`` with kernel ``[1, 2, 3]``."""
    import keras

    model = keras.Sequential([keras.Input((len(weights),)), keras.layers.Dense(1, use_bias=False, name="dense")])
    model.set_weights([np.array(weights, dtype=np.float32).reshape(-1, 1)])
    return _attach(model, "tf", optimizer_def, name, mixed_precision)


def torch_sgd(lr: float) -> Any:
    import torch

    return lambda params: torch.optim.SGD(params, lr=lr)


def tf_sgd(lr: float) -> Any:
    import keras

    return lambda: keras.optimizers.SGD(learning_rate=lr)


def linear(framework: str, lr: float = 0.1, name: str = "linear", **kwargs: Any) -> Any:
    """The bias-free [1, 2, 3] linear model of ``framework`` with plain SGD(lr)."""
    if framework == "torch":
        return torch_linear(torch_sgd(lr), name=name, **kwargs)
    return tf_dense(tf_sgd(lr), name=name, **kwargs)


def weights(model: Any) -> np.ndarray:
    """The flattened first weight tensor of either kind of model."""
    if hasattr(model, "get_weights"):
        return np.asarray(model.get_weights()[0]).reshape(-1).copy()
    return next(iter(model.parameters())).detach().cpu().numpy().reshape(-1).copy()
