"""``fe.backend.pow``: FastEstimator's element-wise power, whose exponent may also be a tensor.

A number as the exponent forwards to :func:`fe_ray.backend.tensor_math.tensor_pow`; a tensor exponent (one per
element, or anything that broadcasts) is raised in the framework both tensors share.
"""

from __future__ import annotations

from typing import Any

from fe_ray.backend.tensor_math import tensor_pow
from fe_ray.backend.tensor_ops import Tensor, _same_ops


def pow(tensor: Tensor, power: int | float | Tensor) -> Tensor:  # noqa: A001 - FastEstimator's public name
    """Return ``tensor`` raised to ``power`` element-wise: ``[-2, 7, -19]`` to the power 2 gives ``[4, 49, 361]``.

    FastEstimator's ``pow`` takes torch tensors and numpy arrays; fe_ray also takes TF tensors. With a number as
    ``power`` it is :func:`~fe_ray.backend.tensor_math.tensor_pow`. With a tensor as ``power`` (of the same
    framework as ``tensor``, broadcasting against it) torch and numpy promote dtypes as they always do; TF, which
    does not promote, computes in ``tensor``'s dtype when it is floating, else in ``power``'s when that is floating,
    else in ``tensor``'s integer dtype.

    Args:
        tensor: A torch / TF tensor or numpy array.
        power: The exponent: a number, or a tensor of ``tensor``'s framework.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type, or ``power`` is neither a number nor a tensor of
            ``tensor``'s framework.
    """
    if isinstance(power, (int, float)) and not isinstance(power, bool):
        return tensor_pow(tensor, power)
    from fe_ray.backend import get_framework

    _same_ops(tensor, power, "pow", ("tensor", "power"))
    framework = get_framework(tensor)
    if framework == "tf":
        return _tf_pow(tensor, power)
    if framework == "torch":
        import torch

        return torch.pow(tensor, power)
    import numpy as np

    return np.power(tensor, power)


def _tf_pow(tensor: Any, power: Any) -> Any:
    import tensorflow as tf

    tensor, power = tf.convert_to_tensor(tensor), tf.convert_to_tensor(power)
    if tensor.dtype != power.dtype:
        if tensor.dtype.is_floating:
            power = tf.cast(power, tensor.dtype)
        elif power.dtype.is_floating:
            tensor = tf.cast(tensor, power.dtype)
        else:
            power = tf.cast(power, tensor.dtype)
    return tf.pow(tensor, power)
