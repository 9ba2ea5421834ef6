"""Element-wise math, statistics and normalisation helpers under FastEstimator's names, arguments and defaults.

Like :mod:`fe_ray.backend.tensor_ops`, each helper looks at its tensor argument and forwards to the ops module of
that tensor's framework (torch, TF or numpy), so neither torch nor TensorFlow is imported unless its tensors are
used. Unsupported tensor types raise TypeError; invalid arguments raise ValueError naming the valid choices.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from fe_ray.backend.tensor_ops import Axis, Tensor, _axes, _ops, _shape


def sign(tensor: Tensor) -> Tensor:
    """Return -1, 0 or 1 for each element, by its sign, in the input dtype: ``[-2, 7, 0]`` gives ``[-1, 1, 0]``.

    Args:
        tensor: A torch / TF tensor or numpy array.
    """
    return _ops(tensor, "sign").sign(tensor)


def tensor_pow(tensor: Tensor, power: int | float | Tensor) -> Tensor:
    """Return each element raised to ``power``: ``[1., 4., 0.5]`` to the power 2 gives ``[1., 16., 0.25]``.

    Integer input with a fractional power becomes floating point (float32 for torch and TF, float64 for numpy);
    with an integer power it stays integer.

    Args:
        tensor: A torch / TF tensor or numpy array.
        power: The exponent: one number for every element (numpy scalars too), or a tensor of ``tensor``'s
            framework or a numpy array of exponents broadcasting against it, as FastEstimator hands it to
            ``torch.pow`` / ``tf.pow`` / ``np.power``.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type, or ``power`` is neither a number nor such a tensor.
    """
    import numpy as np

    from fe_ray.backend.tensor_ops import _module

    ops = _ops(tensor, "tensor_pow")
    number = isinstance(power, numbers.Real) and not isinstance(power, bool)
    if not (number or isinstance(power, np.ndarray) or (ops is not _module("np") and ops.is_tensor(power))):
        raise TypeError(f"tensor_pow: power must be an int or float, got {type(power).__name__} {power!r}; pass "
                        f"a plain number such as 2 or 0.5, a numpy array, or a tensor of the same framework as "
                        f"tensor.")
    return ops.tensor_pow(tensor, power)


def tensor_sqrt(tensor: Tensor) -> Tensor:
    """Return the square root of each element; integer input gives float32 (torch, TF) or float64 (numpy).

    Args:
        tensor: A torch / TF tensor or numpy array. Negative elements give NaN.
    """
    return _ops(tensor, "tensor_sqrt").tensor_sqrt(tensor)


def reduce_std(tensor: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Return the population standard deviation (divisor n, as ``np.std``) along one axis, several, or all:
    ``[[[1., 2.], [3., 4.]], [[5., 6.], [7., 8.]]]`` gives ``2.2913`` (``[[2., 2.], [2., 2.]]`` for ``axis=0``).

    Args:
        tensor: A torch / TF tensor or numpy array (integers give float32 for torch and TF, float64 for numpy).
        axis: The axis or axes to reduce; None reduces them all.
        keepdims: Keep each reduced axis with length 1.
    """
    return _ops(tensor, "reduce_std").reduce_std(tensor, _axes(axis), keepdims)


def percentile(tensor: Tensor, percentiles: int | float | Sequence[int | float], axis: Axis = None,
               keepdims: bool = True) -> Tensor:
    """Return the given percentiles of ``tensor``, taking the lower of two neighbours when one falls between
    elements (``np.percentile(..., method="lower")``): the element at sorted position ``floor(q / 100 * (n - 1))``.

    ``[[1, 2, 3], [4, 5, 6], [7, 8, 9]]`` gives ``[[6]]`` for ``percentiles=66``, ``[[4, 5, 6]]`` with ``axis=0``
    and ``[[[6]]]`` for ``percentiles=[66]`` (a list adds a leading axis, one entry per percentile).

    Args:
        tensor: A torch / TF tensor or numpy array.
        percentiles: One percentile in [0, 100], or a list of them.
        axis: The axis or axes to take the percentiles over; None takes them over all elements.
        keepdims: Keep each reduced axis with length 1.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If a percentile is outside [0, 100] or an axis does not exist.
    """
    ops, shape = _ops(tensor, "percentile"), _shape(tensor)
    single = isinstance(percentiles, numbers.Real)  # numpy scalars too
    values = [float(percentiles)] if single else [float(q) for q in percentiles]
    if not values or any(not 0 <= q <= 100 for q in values):
        raise ValueError(f"percentile: percentiles must lie in [0, 100], got {percentiles!r}; e.g. 50 for the median.")
    if shape is None:
        raise ValueError("percentile: the tensor's rank is unknown (a traced TF tensor); give it a static rank with "
                         "tf.ensure_shape first.")
    rank = len(shape)
    axes = _axes(axis)
    requested = tuple(range(rank)) if axes is None else (axes,) if isinstance(axes, int) else axes
    if any(not -rank <= a < rank for a in requested):
        raise ValueError(f"percentile: axis {axis!r} does not exist in a tensor of shape {list(shape)}; valid choices "
                         f"are {list(range(-rank, rank))} or None.")
    result = ops.percentile(tensor, values, tuple(sorted({a % rank for a in requested})), keepdims)
    return ops.squeeze(result, 0) if single else result


def zscore(data: Tensor, epsilon: float = 1e-7) -> Tensor:
    """Return ``(data - mean) / max(std, epsilon)`` over all elements: ``[[0, 1], [2, 3]]`` gives
    ``[[-1.342, -0.447], [0.447, 1.342]]``.

    torch and TF compute in float32 (as FastEstimator); numpy keeps numpy's promotion (float64 for integers).

    Args:
        data: A torch / TF tensor or numpy array.
        epsilon: The smallest standard deviation to divide by, so constant data gives zeros, not NaN.
    """
    from fe_ray.backend.tensor_ops import _module, cast, maximum

    ops = _ops(data, "zscore")
    if ops is not _module("np"):
        data = cast(data, "float32")
    std = ops.reduce_std(data, None, False)
    return (data - ops.reduce_mean(data, None, False)) / maximum(std, ops.cast_like(epsilon, std))


def tensor_normalize(tensor: Tensor, mean: float | Sequence[float] = (0.485, 0.456, 0.406),
                     std: float | Sequence[float] = (0.229, 0.224, 0.225), max_pixel_value: float = 255.0,
                     epsilon: float = 1e-7) -> Tensor:
    """Return ``(tensor - mean * max_pixel_value) / (std * max_pixel_value + epsilon)`` in the working precision:
    float32, or float16 inside a mixed-precision run (see :func:`~fe_ray.backend.tensor_info.convert_tensor_precision`).

    The defaults are ImageNet's channel statistics for pixels in ``[0, 255]``. Per-channel ``mean`` / ``std``
    apply along the channel axis: axis -3 for torch (channels first, as ``torchvision``'s ``Normalize``), the
    last axis for TF and numpy (channels last).

    Args:
        tensor: An image or batch of images: a torch / TF tensor or numpy array.
        mean: One mean, or one per channel, on the 0..1 scale.
        std: One standard deviation, or one per channel, on the 0..1 scale.
        max_pixel_value: What the 0..1 scale maps to in ``tensor`` (1.0 when ``mean`` / ``std`` are already
            on the data's scale).
        epsilon: Added to the standard deviation, so that a zero never divides.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``mean`` / ``std`` hold several values that do not fit the tensor's channel axis.
    """
    import numpy as np

    from fe_ray.backend import get_framework
    from fe_ray.backend.tensor_info import convert_tensor_precision

    ops, shape = _ops(tensor, "tensor_normalize"), _shape(tensor)
    channels_first = get_framework(tensor) == "torch"
    stats = []
    for name, value in (("mean", mean), ("std", std)):
        scaled = np.asarray(value, dtype=np.float32) * np.float32(max_pixel_value)
        if scaled.ndim > 1:
            raise ValueError(f"tensor_normalize: {name} must be a number or a flat list of per-channel values, "
                             f"got shape {list(scaled.shape)}.")
        if scaled.size > 1 and shape is not None:
            axis = -3 if channels_first else -1
            if len(shape) < -axis or shape[axis] not in (scaled.size, None):
                place = "axis -3 (channels first) for torch" if channels_first else "the last axis for TF / numpy"
                raise ValueError(f"tensor_normalize: {scaled.size} {name} values do not fit a tensor of shape "
                                 f"{list(shape)}; per-channel values go along {place}, or give one number.")
            if channels_first:
                scaled = scaled.reshape(-1, 1, 1)
        stats.append(scaled)
    data = convert_tensor_precision(tensor)
    return (data - ops.cast_like(stats[0], data)) / ops.cast_like(stats[1] + np.float32(epsilon), data)


def iwd(tensor: Tensor, power: float = 1.0, max_prob: float = 0.95, pairwise_distance: float = 1.0,
        eps: Tensor | float | None = None) -> Tensor:
    """Turn distances into probabilities by inverse weighted distance: closer classes get more probability.

    Each row of ``tensor`` holds one non-negative distance per class; the result is ``(1 / max(d, eps)) ** power``
    normalised to sum to 1 along the last axis. ``[[0.5] * 5, [0, 1, 1, 1, 1]]`` gives
    ``[[0.2] * 5, [0.95, 0.0125, 0.0125, 0.0125, 0.0125]]``. It can replace a softmax as a final activation.

    Args:
        tensor: Distances shaped ``(batch, classes)``: a floating-point torch / TF tensor or numpy array.
        power: The exponent of the inverse distances; larger values widen the regions of certainty.
        max_prob: The probability a class gets when its distance is 0 (every other class being
            ``pairwise_distance`` away); in ``(0, 1)``.
        pairwise_distance: The distance to the other classes when one class is matched exactly.
        eps: The smallest distance used (the division's guard). None derives it from ``max_prob`` and
            ``pairwise_distance``; otherwise those two are ignored.

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
        ValueError: If ``max_prob`` is not in (0, 1), ``power`` is not positive, or there are fewer than 2
            classes (without an explicit ``eps``).
    """
    from fe_ray.backend.tensor_ops import maximum

    ops, shape = _ops(tensor, "iwd"), _shape(tensor)
    if not power > 0:
        raise ValueError(f"iwd: power must be positive, got {power!r}; 1.0 gives intuitive probabilities.")
    if eps is None:
        if not 0 < max_prob < 1:
            raise ValueError(f"iwd: max_prob must lie strictly between 0 and 1, got {max_prob!r}; e.g. 0.95.")
        classes = shape[-1] if shape else None
        if classes is None or classes < 2:
            raise ValueError(f"iwd: needs at least 2 classes along the last axis to derive eps, got shape "
                             f"{None if shape is None else list(shape)}; pass eps explicitly otherwise.")
        eps = pairwise_distance * ((1.0 - max_prob) / (max_prob * (classes - 1))) ** (1.0 / power)
    weights = ops.tensor_pow(1.0 / maximum(tensor, ops.cast_like(eps, tensor)), power)
    return weights / ops.reduce_sum(weights, -1, True)


#: Halley steps of :func:`lambertw`: from its starting guesses the error shrinks cubically, so a fixed count
#: (rather than a data-dependent stop, which a traced TF graph cannot make) reaches float64 precision.
LAMBERTW_STEPS = 6


def lambertw(tensor: Tensor) -> Tensor:
    """Return the principal branch ``W(z)`` of the Lambert W function: the ``w >= -1`` with ``w * exp(w) == z``.

    ``[-1 / e, 0, e, 5]`` gives ``[-1, 0, 1, 1.3267]``. Defined for ``z >= -1/e`` (about -0.3679); smaller inputs
    are not checked (for speed, as in FastEstimator) and give NaN.

    Args:
        tensor: A torch / TF tensor or numpy array. Integer input becomes float32 (torch, TF) or float64 (numpy).

    Raises:
        TypeError: If ``tensor`` is of an unsupported type.
    """
    from fe_ray.backend.tensor_ops import _module, cast, where

    ops = _ops(tensor, "lambertw")
    z = tensor if ops.is_floating(tensor) else cast(tensor, "float64" if ops is _module("np") else "float32")
    # Starting guesses: a series around the branch point z = -1/e below -0.25, Winitzki's formula elsewhere.
    root = ops.tensor_sqrt(ops.clip_by_value(2.0 * (math.e * z + 1.0), 0.0, None))
    near_branch = -1.0 + root - root * root / 3.0 + (11.0 / 72.0) * root * root * root
    log_z = ops.log1p(ops.clip_by_value(z, -0.25, None))  # clipped: only used where z >= -0.25
    general = log_z * (1.0 - ops.log1p(log_z) / (2.0 + log_z))
    w = where(z < -0.25, near_branch, general)
    for _ in range(LAMBERTW_STEPS):
        exp_w = ops.exp(w)
        error = w * exp_w - z
        # The 1e-7 keeps the step finite where w reaches exactly -1 (the branch point, where error is 0 too).
        w_plus_1 = w + 1.0 + 1e-7
        w = w - error / (exp_w * w_plus_1 - (w + 2.0) * error / (2.0 * w_plus_1))
    return where(z < -1.0 / math.e, math.nan, w)
