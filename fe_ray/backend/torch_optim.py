"""The torch backend's optimizers: building them from FastEstimator's names or a ``fn(params)``, learning-rate access,
and the (per-step, not global) mixed-precision policy. Imported by :mod:`fe_ray.backend.torch`, which re-exports it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from fe_ray.backend.optimizers import optimizer_by_name
from fe_ray.util import accepts_positional

#: Optimizer names accepted by :func:`make_optimizer`, with the constructor used for each: torch's defaults except
#: SGD's rate of 0.01, as FastEstimator builds them, so a ported program trains at the same rates.
_OPTIMIZERS: dict[str, Callable[[Iterator[torch.nn.Parameter]], torch.optim.Optimizer]] = {
    "adadelta": lambda params: torch.optim.Adadelta(params),
    "adagrad": lambda params: torch.optim.Adagrad(params),
    "adam": lambda params: torch.optim.Adam(params),
    "adamax": lambda params: torch.optim.Adamax(params),
    "rmsprop": lambda params: torch.optim.RMSprop(params),
    "sgd": lambda params: torch.optim.SGD(params, lr=0.01),
}


def make_optimizer(model: torch.nn.Module, optimizer_def: Any, mixed_precision: bool = False) -> Any:
    """Create the optimizer for ``model`` from a name, a ``fn(params)`` callable, or None.

    Every optimizer gets a ``scaler`` attribute: a CUDA GradScaler in mixed precision when CUDA exists, else None.

    Raises:
        ValueError: For an unknown optimizer name (listing the valid names).
        TypeError: If the definition is of another type or the callable does not return a torch Optimizer.
    """
    if optimizer_def is None:
        return None
    if isinstance(optimizer_def, str):
        optimizer = optimizer_by_name(optimizer_def, _OPTIMIZERS,
                                      "a callable such as `lambda params: torch.optim.SGD(params, lr=0.1)`")(
            model.parameters())
    elif callable(optimizer_def):
        if accepts_positional(optimizer_def, 1) is False:
            name = getattr(optimizer_def, "__name__", optimizer_def)
            raise TypeError("A torch optimizer_fn is called with the model's parameters (`lambda params: "
                            f"torch.optim.SGD(params, lr=0.1)`), but {name!r} takes no such argument, like a TF one "
                            "(`lambda: ...`): make sure the model and optimizer_fn use the same framework.")
        optimizer = optimizer_def(model.parameters())
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("A torch optimizer_fn must be `lambda params: torch.optim.X(params, ...)` returning a "
                            f"torch.optim.Optimizer, but it returned {type(optimizer).__name__}.")
    else:
        raise TypeError(f"optimizer_fn must be a name, a callable or None, got {type(optimizer_def).__name__}.")
    use_scaler = mixed_precision and torch.cuda.is_available()
    optimizer.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
    return optimizer


def set_mixed_precision_policy(enabled: bool) -> None:
    """No-op: torch mixed precision is per step (``torch.autocast`` in :func:`run_step`), not a global policy."""


def mixed_precision_policy(enabled: bool) -> AbstractContextManager[None]:
    """No policy to set (see :func:`set_mixed_precision_policy`): an empty context."""
    return nullcontext()


def set_lr(model: torch.nn.Module, lr: float, weight_decay: float | None = None) -> None:
    """Set the learning rate of every parameter group of ``model.current_optimizer``, and ``weight_decay`` (when
    given) of every group that has one."""
    for group in _current_optimizer(model).param_groups:
        group["lr"] = lr
        if weight_decay is not None and "weight_decay" in group:
            group["weight_decay"] = weight_decay


def known_lr(model: torch.nn.Module) -> float:
    """The current learning rate: reading it is free in torch, so this is :func:`get_lr`."""
    return get_lr(model)


def get_lr(model: torch.nn.Module) -> float:
    """The learning rate of the first parameter group of ``model.current_optimizer``."""
    return float(_current_optimizer(model).param_groups[0]["lr"])


def _current_optimizer(model: Any) -> Any:
    optimizer = getattr(model, "current_optimizer", None)
    if optimizer is None:
        raise ValueError(f"Model {getattr(model, 'model_name', type(model).__name__)!r} has no optimizer; build it "
                         "with an optimizer_fn to change or read its learning rate.")
    return optimizer
