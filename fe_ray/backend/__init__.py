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

from fe_ray.backend.losses import dice_score, focal_loss, hinge, huber, l1_loss, l2_regularization, smooth_l1_loss
from fe_ray.backend.tensor_image import random_mix_patch, resize_3d
from fe_ray.backend.tensor_info import check_nan, convert_tensor_precision, get_image_dims, get_shape, to_shape, to_type
from fe_ray.backend.tensor_layout import flip, gather, gather_from_batch, roll, transpose
from fe_ray.backend.tensor_math import (
    iwd,
    lambertw,
    percentile,
    reduce_std,
    sign,
    tensor_normalize,
    tensor_pow,
    tensor_sqrt,
    zscore,
)
from fe_ray.backend.tensor_ops import (
    abs,
    argmax,
    cast,
    clip_by_value,
    exp,
    expand_dims,
    matmul,
    maximum,
    ones_like,
    permute,
    reduce_max,
    reduce_min,
    reduce_sum,
    reshape,
    squeeze,
    tensor_round,
    where,
    zeros_like,
)
from fe_ray.backend.tensor_power import pow
from fe_ray.backend.tensor_random import random_normal_like, random_uniform_like
from fe_ray.backend.tensor_watch import watch

#: ``resize_3d`` under the name of its FastEstimator module (``fastestimator/backend/_resize3d.py``).
resize3d = resize_3d
#: ``tensor_normalize`` under FastEstimator 1.7's public name ``fe.backend.normalize`` (both names work).
normalize = tensor_normalize

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


def is_model(obj: Any) -> bool:
    """True if ``obj`` is a torch or Keras model (a tensor, layer or optimizer is not), without importing either
    framework."""
    if getattr(obj, "fe_compiled", False):
        return True
    for cls in type(obj).__mro__:
        qualname = f"{cls.__module__}.{cls.__name__}"
        if qualname in ("torch.nn.modules.module.Module", "keras.src.models.model.Model",
                        "keras.src.models.functional.Functional"):
            return True
    return False


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


def to_tensor(data: Any, target_type: str, shared_memory: bool = False) -> Any:
    """Convert (nested) arrays/tensors to ``target_type`` ('torch', 'tf' or 'np').

    Args:
        data: An array / tensor, or dicts, lists and tuples of them.
        target_type: The framework to convert to.
        shared_memory: torch only: move the resulting tensors into shared memory (for handing them to other
            processes); ignored for the other frameworks, as in FastEstimator.

    Plain Python numbers become 0-d tensors (arrays for 'np') as in FastEstimator; strings and other objects pass
    through unchanged.
    """
    from fe_ray.util import map_nested

    # The backends leave Python numbers alone (a batch may carry them as per-batch constants); the public helper
    # converts them, as FastEstimator's does.
    data = map_nested(_number_to_array, data)
    converted = get_backend(target_type).to_tensor(data)
    if shared_memory and target_type == "torch":
        converted = map_nested(lambda leaf: leaf.share_memory_() if get_framework(leaf) == "torch" else leaf,
                               converted)
    return converted


def _number_to_array(leaf: Any) -> Any:
    if isinstance(leaf, (bool, int, float, complex)):
        import numpy as np

        return np.asarray(leaf)
    return leaf


def to_number(data: Any) -> Any:
    """Convert a tensor (or nested container of tensors) to numpy on the CPU."""
    return get_backend(data).to_numpy(data)


def reduce_mean(tensor: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """Mean over ``axis`` (all elements when None, none for an empty list), in the tensor's own framework;
    ``keepdims`` keeps the reduced axes with size 1. Axes may be numpy integers."""
    from fe_ray.backend.tensor_ops import _axes

    axis = _axes(axis)
    backend = get_backend(tensor)
    if axis is None and not keepdims:
        return backend.reduce_mean(tensor)
    return backend.reduce_mean(tensor, axis=axis, keepdims=keepdims)


def concat(tensors: Sequence[Any], axis: int = 0) -> Any:
    """Concatenate tensors of one framework along ``axis``; None for an empty list (as FastEstimator)."""
    if not tensors:
        return None
    return get_backend(tensors[0]).concat(list(tensors), axis)


def stack(tensors: Sequence[Any], axis: int = 0) -> Any:
    """Stack tensors of one framework along a new ``axis``; None for an empty list (as :func:`concat`)."""
    if not tensors:
        return None
    return get_backend(tensors[0]).stack(list(tensors), axis)


def get_gradient(target: Any, sources: Any, higher_order: bool = False, tape: Any = None,
                 retain_graph: bool = True) -> Any:
    """Gradients of ``target`` w.r.t. ``sources``, in FastEstimator's argument order.

    As in FastEstimator, a source ``target`` does not depend on gets None (fe_ray's ops use the backends'
    ``get_gradient``, which fills in zeros where they need a full list).

    Args:
        target: The tensor to differentiate (a scalar loss).
        sources: A list or tuple of weights / tensors (the gradients come back in a list, or in a tuple for a
            tuple, as FastEstimator's), or a single one (its gradient is returned).
        higher_order: Keep the gradient computation differentiable, to take gradients of the gradients (e.g. a
            gradient penalty).
        tape: TF only: the GradientTape that recorded ``target``.
        retain_graph: torch only: keep the autograd graph for further gradients of ``target``.
    """
    gradients = get_backend(target).get_gradient(target, sources, tape=tape, retain_graph=retain_graph,
                                                 higher_order=higher_order, keep_none=True)
    return tuple(gradients) if isinstance(sources, tuple) else gradients


def _loss_backend(y_pred: Any, name: str) -> ModuleType:
    """The backend of ``y_pred`` for a loss function; losses run on torch or TF tensors only."""
    framework = get_framework(y_pred)
    if framework not in ("torch", "tf"):
        raise TypeError(f"{name} needs y_pred as a torch or TensorFlow tensor, got {type(y_pred).__name__}; convert it "
                        f"first, e.g. fe_ray.backend.to_tensor(y_pred, 'torch').")
    return get_backend(framework)


def binary_crossentropy(y_pred: Any, y_true: Any, from_logits: bool = False, average_loss: bool = True,
                        class_weights: dict[int, float] | None = None) -> Any:
    """Binary cross entropy of 0/1 labels and probabilities (or logits, with ``from_logits``).

    Returns:
        The mean loss, or with ``average_loss=False`` one loss per sample (the mean over its elements).
    """
    backend = _loss_backend(y_pred, "binary_crossentropy")
    return backend.cross_entropy(y_pred, y_true, form="binary", from_logits=from_logits, class_weights=class_weights,
                                 average=average_loss)


def categorical_crossentropy(y_pred: Any, y_true: Any, from_logits: bool = False, average_loss: bool = True,
                             class_weights: dict[int, float] | None = None) -> Any:
    """Cross entropy of one-hot (or soft) targets shaped like the predictions (class axis 1 for torch, last for TF).

    Returns:
        The mean loss, or with ``average_loss=False`` one loss per sample (and per position for dense outputs).
    """
    backend = _loss_backend(y_pred, "categorical_crossentropy")
    return backend.cross_entropy(y_pred, y_true, form="categorical", from_logits=from_logits,
                                 class_weights=class_weights, average=average_loss)


def sparse_categorical_crossentropy(y_pred: Any, y_true: Any, from_logits: bool = False, average_loss: bool = True,
                                    class_weights: dict[int, float] | None = None) -> Any:
    """Cross entropy of class-index labels (class axis 1 of the predictions for torch, last for TF).

    Returns:
        The mean loss, or with ``average_loss=False`` one loss per sample (and per position for dense outputs).
    """
    backend = _loss_backend(y_pred, "sparse_categorical_crossentropy")
    return backend.cross_entropy(y_pred, y_true, form="sparse", from_logits=from_logits, class_weights=class_weights,
                                 average=average_loss)


def mean_squared_error(y_true: Any, y_pred: Any) -> Any:
    """Squared error averaged over the last axis: one value per sample, as FastEstimator's (``y_true`` first)."""
    return _loss_backend(y_pred, "mean_squared_error").mean_squared_error(y_pred, y_true, average=False)


def update_model(model: Any, gradients: list[Any], defer: bool = False,
                 deferred: dict[str, list[Any]] | None = None) -> None:
    """Apply ``gradients`` with the model's current optimizer, now or at the end of the step (``defer``)."""
    get_backend(model).update_model(model, gradients, defer=defer, deferred=deferred)


def feed_forward(model: Any, *x: Any, training: bool = True) -> Any:
    """Run ``model`` on its input(s) ``x`` (converted to the model's framework), as FastEstimator's does.

    Args:
        model: The model.
        *x: One or more inputs. Several are passed as the model's positional arguments (torch; Keras: when its
            ``call`` takes several, else as one list, as a functional model takes them); a single list or tuple is
            passed as one argument.
        training: Run in training mode (dropout, batch-norm updates).

    Raises:
        TypeError: If no input is given.
    """
    if not x:
        raise TypeError("feed_forward needs at least one input after the model: feed_forward(model, x) or "
                        "feed_forward(model, x1, x2, training=False).")
    backend = get_backend(model)
    if len(x) == 1:
        return backend.feed_forward(model, x[0], training=training, spread=False)
    framework = get_framework(model)
    if framework == "torch":
        spread = True
    else:
        from fe_ray.backend.layer_capture import takes_several_inputs  # small module: no framework import

        spread = takes_several_inputs(model.call, ignore=("training", "mask"))
    return backend.feed_forward(model, list(x), training=training, spread=spread)


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


def set_lr(model: Any, lr: float, weight_decay: float | None = None) -> None:
    """Set the learning rate of the model's current optimizer (and its weight decay, as FastEstimator does).

    TF: an optimizer with decoupled weight decay (Keras ``AdamW``, or any with ``weight_decay`` set) gets
    ``weight_decay``, or, when None, its current weight decay scaled by ``lr / old lr`` so that decay follows the
    rate, as FastEstimator 1.7 does. Keras reads ``weight_decay`` when it traces a training step, so a change
    reaches a step traced before it only once the step is traced again. torch: ``weight_decay``, when given, is set
    on every parameter group that has one (FastEstimator 1.7 ignores it for torch); None leaves it (torch's
    decoupled decay already scales with the rate).

    Args:
        model: A model built with ``fe_ray.build`` (with an optimizer).
        lr: The new learning rate.
        weight_decay: The new weight decay, or None for the rule above.
    """
    get_backend(model).set_lr(model, lr, weight_decay)


def get_lr(model: Any) -> Any:
    """Return the learning rate of the model's current optimizer: a float for torch, a numpy scalar of the rate
    variable's dtype (float32 as a rule) for TF, as FastEstimator returns them."""
    return get_backend(model).get_lr(model)


__all__ = ["BACKEND_CACHE_KEY", "FRAMEWORKS", "abs", "argmax", "binary_crossentropy", "cast",
           "categorical_crossentropy", "check_nan", "clip_by_value", "concat", "convert_tensor_precision", "dice_score",
           "exp", "expand_dims", "feed_forward", "flip", "focal_loss", "gather", "gather_from_batch", "get_backend",
           "get_framework", "get_gradient", "get_image_dims", "get_lr", "get_shape", "hinge", "huber", "iwd", "l1_loss",
           "l2_regularization", "lambertw", "load_model", "matmul", "maximum", "mean_squared_error", "normalize",
           "ones_like", "percentile", "permute", "pow", "random_mix_patch", "random_normal_like", "random_uniform_like",
           "reduce_max", "reduce_mean", "reduce_min", "reduce_std", "reduce_sum", "reshape", "resize3d", "resize_3d",
           "roll", "save_model", "set_lr", "sign", "smooth_l1_loss", "sparse_categorical_crossentropy", "squeeze",
           "stack", "tensor_normalize", "tensor_pow", "tensor_round", "tensor_sqrt", "to_number", "to_shape",
           "to_tensor", "to_type", "transpose", "update_model", "watch", "where", "zeros_like", "zscore"]
