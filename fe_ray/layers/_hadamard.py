"""Framework-free set-up shared by the PyTorch and TensorFlow ``HadamardCode`` layers: argument checks, the
codebook, the distance floor and how the code is split between input heads."""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from fe_ray.backend.hadamard_code import hadamard_code_length, hadamard_codes

#: FastEstimator's shortest default code for the layer (the Hadamard / UnHadamard ops have no such floor).
MIN_DEFAULT_CODE_LENGTH = 16


def layer_code_length(n_classes: int, code_length: int | None) -> int:
    """Check ``n_classes`` / ``code_length`` and return the code length the layer uses.

    Args:
        n_classes: How many classes there are; an int >= 2.
        code_length: A power of 2 >= ``n_classes``; None for the smallest such power, but at least 16 (FastEstimator's
            layer default).

    Raises:
        ValueError: If ``n_classes`` is not an int >= 2, or ``code_length`` is not a power of 2 >= ``n_classes``.
    """
    length = hadamard_code_length(n_classes, code_length, "HadamardCode")
    return max(MIN_DEFAULT_CODE_LENGTH, length) if code_length is None else length


def check_max_prob_power(max_prob: float, power: float) -> tuple[float, float]:
    """Check ``max_prob`` (in (0, 1)) and ``power`` (> 0); return them as floats.

    Raises:
        ValueError: If either is not a real number in its range.
    """
    if isinstance(max_prob, bool) or not isinstance(max_prob, Real) or not 0.0 < max_prob < 1.0:
        raise ValueError(f"HadamardCode max_prob must be a number strictly between 0 and 1 (e.g. 0.95), got "
                         f"{max_prob!r}.")
    if isinstance(power, bool) or not isinstance(power, Real) or not 0.0 < power < math.inf:
        raise ValueError(f"HadamardCode power must be a positive number (e.g. 1.0 or 0.25), got {power!r}.")
    return float(max_prob), float(power)


def distance_floor(n_classes: int, code_length: int, max_prob: float, power: float) -> float:
    """The smallest L1 distance the layer lets a prediction have to a code.

    Chosen so that a prediction on a class's code, lying ``code_length`` away from every other code (as the +1 / -1
    codes do), gets probability ``max_prob`` under inverse distance weighting with ``power``.
    """
    return code_length * math.pow((1.0 - max_prob) / (max_prob * (n_classes - 1)), 1.0 / power)


def layer_codes(n_classes: int, code_length: int) -> np.ndarray:
    """The float32 codebook ``(n_classes, code_length - 1)``: rows of the Hadamard matrix without its first column.

    That column is +1 in every row of the Sylvester matrix, so it tells no class apart; the shared codebook flips its
    sign on even rows for the label ops, and the layer drops it altogether (as FastEstimator's layer does).
    """
    return np.ascontiguousarray(hadamard_codes(n_classes, code_length)[:, 1:])


def head_sizes(n_heads: int, code_length: int) -> list[int]:
    """How many code entries each input head produces: an equal share, the first head taking the remainder and
    giving up the dropped first column.

    Raises:
        ValueError: If there are no heads, or more than ``code_length - 1`` (some head would produce nothing).
    """
    if n_heads < 1:
        raise ValueError("HadamardCode needs at least one input head, got none.")
    if n_heads > code_length - 1:
        raise ValueError(f"HadamardCode got {n_heads} input heads, too many for code_length {code_length}: use at "
                         f"most {code_length - 1} heads or a longer code.")
    sizes = [code_length // n_heads] * n_heads
    sizes[0] += code_length - sum(sizes) - 1
    return sizes
