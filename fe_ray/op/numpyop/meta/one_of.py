"""OneOf: run one NumpyOp, chosen at random per sample (uniformly, or with given probabilities), out of several."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fe_ray.op.meta_common import load_wrapped_state, wrapped_state
from fe_ray.op.numpyop.meta.meta import check_wrapped, set_rua_levels
from fe_ray.op.numpyop.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import get_rng


def check_probs(probs: Sequence[float] | None, count: int, op: str) -> list[float] | None:
    """``probs`` as a list of floats after FastEstimator's checks, or None for equal probabilities.

    As in FastEstimator, None or an empty sequence means every op is equally likely.

    Raises:
        ValueError: If ``probs`` does not give one number per op, holds a negative or non-finite number, or does not
            sum to 1 (within 1e-8, FastEstimator's tolerance).
    """
    if probs is None or (isinstance(probs, Sequence) and not isinstance(probs, str) and len(probs) == 0):
        return None
    if isinstance(probs, str) or not isinstance(probs, Sequence):
        raise ValueError(f"{op} probs must be a list of {count} probabilities (one per op) or None, got {probs!r}.")
    if len(probs) != count:
        raise ValueError(f"{op} probs must give one probability per op: {count} ops but {len(probs)} probabilities "
                         f"{list(probs)!r}.")
    values = []
    for prob in probs:
        if isinstance(prob, bool) or not isinstance(prob, (int, float, np.integer, np.floating)) or not math.isfinite(
                float(prob)) or prob < 0:
            raise ValueError(f"{op} probs must be non-negative numbers, got {list(probs)!r}.")
        values.append(float(prob))
    if abs(sum(values) - 1) >= 1e-8:
        raise ValueError(f"{op} probs must sum to 1, but {values!r} sums to {sum(values)!r}; normalise them "
                         "(divide each by their sum).")
    return values


def choice_boundaries(probs: Sequence[float]) -> np.ndarray:
    """The ``len(probs) - 1`` cumulative boundaries that map a uniform draw ``u`` in [0, 1) to the op index
    ``sum(u >= boundaries)``.

    Boundaries past the last op with a non-zero probability are infinite, so rounding in the cumulative sums can
    never pick a trailing op of probability 0.
    """
    boundaries = np.cumsum(np.asarray(probs, dtype=np.float64))[:-1]
    last = max(index for index, prob in enumerate(probs) if prob > 0)
    boundaries[last:] = np.inf
    return boundaries


class OneOf(NumpyOp):
    """Run one of ``numpy_ops``, each with the same probability or with the probabilities ``probs``.

    All ops must read and write the same keys (in the same single/list form) and share ``mode`` and ``ds_id``,
    which become this op's.

    Random: in a Pipeline the choice comes from the sample's generator, and a random chosen op continues drawing
    from the same generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`). As
    a Network pop one choice is made for the whole batch, as in FastEstimator.

    With ``probs`` the choice takes one uniform draw ``u`` of the generator and picks the op whose interval of the
    cumulative probabilities holds ``u`` (so an op of probability 0 is never run); without, one integer draw.

    Args:
        *numpy_ops: The ops to choose from.
        probs: The probability of each op (one per op, non-negative, summing to 1), keyword only; None (or empty)
            for equal probabilities.

    Raises:
        TypeError: If an entry is not a NumpyOp, or is a Delete.
        ValueError: If no op is given, the ops differ in inputs, outputs, mode or ds_id, or ``probs`` has the wrong
            length, a negative entry, or does not sum to 1.
    """

    is_random = True
    # Class defaults: subclasses that set up the ops themselves (RUA's OneOfMultiVar) choose uniformly.
    probs: list[float] | None = None
    _boundaries: np.ndarray | None = None

    def __init__(self, *numpy_ops: NumpyOp, probs: Sequence[float] | None = None) -> None:
        if not numpy_ops:
            raise ValueError("OneOf needs at least one NumpyOp to choose from, got none.")
        ops = [check_wrapped(op, "OneOf") for op in numpy_ops]
        first = ops[0]
        for op in ops[1:]:
            for attr in ("inputs", "outputs", "in_list", "out_list", "mode", "ds_id"):
                if getattr(op, attr) != getattr(first, attr):
                    raise ValueError(f"All ops of a OneOf must share their {attr}: {type(first).__name__} has "
                                     f"{getattr(first, attr)!r} but {type(op).__name__} has {getattr(op, attr)!r}; "
                                     "give them the same keys, mode and ds_id.")
        super().__init__(inputs=list(first.inputs), outputs=list(first.outputs))
        self.in_list, self.out_list = first.in_list, first.out_list
        self.mode, self.ds_id = first.mode, first.ds_id
        self.ops = ops
        self.probs = check_probs(probs, len(ops), "OneOf")
        self._boundaries = None if self.probs is None else choice_boundaries(self.probs)

    def _choose(self, state: dict[str, Any]) -> NumpyOp:
        rng = get_rng(state)
        if self._boundaries is None:
            return self.ops[int(rng.integers(len(self.ops)))]
        return self.ops[int(np.sum(rng.random() >= self._boundaries))]

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return self._choose(state).forward(data, state)

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return self._choose(state).forward_batch(data, state)

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Pass RUA's strength on to every op it chooses from (so ``OneOf`` can be one of RUA's choices).

        Raises:
            TypeError: If one of the ops has no ``set_rua_level`` method.
        """
        set_rua_levels(self.ops, magnitude_coef, "OneOf")

    def state_dict(self) -> dict[str, Any]:
        return wrapped_state(self.ops)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_wrapped_state(self.ops, state, "OneOf")
