"""Learning-rate schedules for ``LRScheduler(model, lr_fn=...)``: functions of the step or epoch."""

from __future__ import annotations

import math
import numbers


def cosine_decay(time: int, cycle_length: float, init_lr: float, min_lr: float = 1e-6, start: float = 1,
                 cycle_multiplier: int = 1, warmup: bool = False) -> float:
    """Half-cosine decay from ``init_lr`` to ``min_lr`` over each cycle, restarting at ``init_lr`` (SGDR).

    Use it as ``LRScheduler(model, lr_fn=lambda step: cosine_decay(step, cycle_length=3750, init_lr=1e-3))``
    (or with ``epoch``), as in FastEstimator.

    Args:
        time: The current step or epoch, counted from 1.
        cycle_length: Steps (or epochs) of the first cycle (a positive number; a float works, as in FastEstimator).
        init_lr: The learning rate at the start of every cycle.
        min_lr: The learning rate the end of every cycle approaches.
        start: The step (or epoch) at which the first cycle begins (0 or more); before it the rate is ``init_lr``.
        cycle_multiplier: Each cycle is this many times longer than the one before (1: all equally long).
        warmup: Before ``start``, rise linearly from 0 to ``init_lr`` instead of holding ``init_lr``.

    Returns:
        The learning rate at ``time``.

    Raises:
        ValueError: If ``cycle_length`` is not a positive number, ``start`` is negative or not a number, or
            ``cycle_multiplier`` is below 1.
    """
    if not isinstance(cycle_length, numbers.Real) or isinstance(cycle_length, bool) or not cycle_length > 0:
        raise ValueError(f"cosine_decay cycle_length must be a positive number of steps or epochs, got "
                         f"{cycle_length!r}.")
    if not isinstance(start, numbers.Real) or isinstance(start, bool) or start < 0:
        raise ValueError(f"cosine_decay start must be a step or epoch of 0 or more, got {start!r}.")
    if not cycle_multiplier >= 1:
        raise ValueError(f"cosine_decay cycle_multiplier must be at least 1 (1 keeps every cycle equally long), got "
                         f"{cycle_multiplier!r}.")
    if time < start:
        return init_lr * time / start if warmup else init_lr  # (start > time >= 0 here: no division by 0)
    position = time - start + 1  # 1 on the first step (or epoch) of the first cycle
    length, before, cycle = cycle_length, 0, 0
    while position > before + length:  # walk to the cycle holding this position (few cycles in any real run)
        before += length
        length *= cycle_multiplier
        cycle += 1
    if cycle_multiplier > 1:
        # The cycle's start and length in FastEstimator's closed forms, so the rates match it to the last bit (the
        # walk above finds the cycle exactly, where a logarithm could round to the neighbouring one).
        before = cycle_length * (cycle_multiplier**cycle - 1) / (cycle_multiplier - 1)
        length = cycle_length * cycle_multiplier**cycle
    progress = (position - before) / length  # in (0, 1]: 1 at the last step of the cycle
    # FastEstimator's order of operations: the same floats, bit for bit.
    return (init_lr - min_lr) / 2 * math.cos(progress * math.pi) + (init_lr + min_lr) / 2


__all__ = ["ARC", "cosine_decay"]

# FastEstimator defines ARC in ``lr_schedule``; fe_ray keeps it in ``arc.py``: importable from here too.
from fe_ray.schedule.arc import ARC  # noqa: E402
