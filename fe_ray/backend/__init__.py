"""Framework-neutral tensor and model helpers.

Each public function looks at its argument (a tensor, a model, or an explicit ``target_type``) and forwards to
one implementation module: :mod:`fe_ray.backend.torch`, :mod:`fe_ray.backend.tf` or :mod:`fe_ray.backend.numpy`.
Those modules all implement the same functions (the interface documented in :mod:`fe_ray.backend.base`), and
torch / TensorFlow are imported only inside their own module, only when first needed, so either framework is
optional.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

FRAMEWORKS = ("torch", "tf", "np")
#: Context-state key of the Network's cache that outlives its contexts (what a backend may keep across them).
BACKEND_CACHE_KEY = "_backend_cache"
_MODULES = {"torch": "fe_ray.backend.torch", "tf": "fe_ray.backend.tf", "np": "fe_ray.backend.numpy"}
_LOADED: dict[str, ModuleType] = {}  # the backends imported so far, by framework name


def get_framework(obj: Any) -> str:
    """Return 'torch', 'tf' or 'np' for a tensor, model, optimizer or nested container of them.

    No framework is imported: an object can only be a torch/TF object if that framework is already loaded.
    """
    if isinstance(obj, (list, tuple)) and obj:
        return get_framework(obj[0])
    if isinstance(obj, dict) and obj:
        return get_framework(next(iter(obj.values())))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
        return "torch"
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        keras = sys.modules.get("keras")
        if isinstance(obj, (tf.Tensor, tf.Variable)) or (keras is not None and isinstance(
                obj, (keras.Model, keras.optimizers.Optimizer, keras.Variable))):
            return "tf"
    return "np"


def get_backend(framework_or_obj: Any) -> ModuleType:
    """Return the implementation module for a framework name ('torch', 'tf', 'np') or an object of it.

    Raises:
        ValueError: If a framework name is unknown.
        ImportError: If the framework is not installed, naming the pip extra that installs it.
    """
    name = framework_or_obj if isinstance(framework_or_obj, str) else get_framework(framework_or_obj)
    module = _LOADED.get(name)
    if module is not None:  # every step asks several times: skip importlib's lookup and locking
        return module
    if name not in _MODULES:
        raise ValueError(f"Unknown framework {name!r}; valid choices are {list(FRAMEWORKS)}.")
    try:
        module = _LOADED[name] = importlib.import_module(_MODULES[name])
        return module
    except ImportError as err:
        extra = {"torch": "torch", "tf": "tf"}.get(name, "")
        raise ImportError(f"fe_ray's {name} backend needs its framework: pip install 'fe_ray[{extra}]' ({err})") \
            from err


def to_tensor(data: Any, target_type: str) -> Any:
    """Convert (nested) arrays/tensors to ``target_type`` ('torch', 'tf' or 'np')."""
    return get_backend(target_type).to_tensor(data)


def to_number(data: Any) -> Any:
    """Convert a tensor (or nested container of tensors) to numpy on the CPU."""
    return get_backend(data).to_numpy(data)


def reduce_mean(tensor: Any) -> Any:
    """Mean over all elements, in the tensor's own framework."""
    return get_backend(tensor).reduce_mean(tensor)


def concat(tensors: Sequence[Any], axis: int = 0) -> Any:
    """Concatenate tensors of one framework along ``axis``."""
    return get_backend(tensors[0]).concat(list(tensors), axis)


def stack(tensors: Sequence[Any], axis: int = 0) -> Any:
    """Stack tensors of one framework along a new ``axis``."""
    return get_backend(tensors[0]).stack(list(tensors), axis)


def get_gradient(target: Any, sources: Any, higher_order: bool = False, tape: Any = None,
                 retain_graph: bool = True) -> Any:
    """Gradients of ``target`` w.r.t. ``sources``, in FastEstimator's argument order.

    Args:
        target: The tensor to differentiate (a scalar loss).
        sources: A list of weights / tensors (a list of gradients is returned, zeros for those ``target`` does not
            depend on), or a single one (its gradient is returned).
        higher_order: Keep the gradient computation differentiable, to take gradients of the gradients (e.g. a
            gradient penalty).
        tape: TF only: the GradientTape that recorded ``target``.
        retain_graph: torch only: keep the autograd graph for further gradients of ``target``.
    """
    return get_backend(target).get_gradient(target, sources, tape=tape, retain_graph=retain_graph,
                                            higher_order=higher_order)


def update_model(model: Any, gradients: list[Any], defer: bool = False,
                 deferred: dict[str, list[Any]] | None = None) -> None:
    """Apply ``gradients`` with the model's current optimizer, now or at the end of the step (``defer``)."""
    get_backend(model).update_model(model, gradients, defer=defer, deferred=deferred)


def feed_forward(model: Any, x: Any, training: bool = True) -> Any:
    """Run ``model`` on ``x`` (converted to the model's framework)."""
    return get_backend(model).feed_forward(model, x, training=training)


def save_model(model: Any, save_dir: str, model_name: str | None = None, save_optimizer: bool = False,
               save_architecture: bool = False) -> str:
    """Save weights (and optionally optimizer state) into ``save_dir``; return the weights path.

    ``save_architecture`` (TF only, as in FastEstimator) also writes the whole model as ``<name>.keras``; torch
    refuses it with a ValueError.
    """
    return get_backend(model).save_model(model, save_dir, model_name=model_name, save_optimizer=save_optimizer,
                                         save_architecture=save_architecture)


def load_model(model: Any, weights_path: str, load_optimizer: bool = False) -> None:
    """Load weights (and optionally optimizer state) saved by :func:`save_model`."""
    get_backend(model).load_model(model, weights_path, load_optimizer=load_optimizer)


def set_lr(model: Any, lr: float) -> None:
    """Set the learning rate of the model's current optimizer."""
    get_backend(model).set_lr(model, lr)


def get_lr(model: Any) -> float:
    """Return the learning rate of the model's current optimizer."""
    return get_backend(model).get_lr(model)


__all__ = ["BACKEND_CACHE_KEY", "FRAMEWORKS", "concat", "feed_forward", "get_backend", "get_framework", "get_gradient",
           "get_lr", "load_model", "reduce_mean", "save_model", "set_lr", "stack", "to_number", "to_tensor",
           "update_model"]
