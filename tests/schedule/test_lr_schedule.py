"""cosine_decay: FastEstimator's SGDR schedule, checked against its closed form."""

from __future__ import annotations

import math

import pytest

from fe_ray.schedule import cosine_decay


def closed_form(time: int, length: int, init_lr: float, min_lr: float, start: int = 1, mult: int = 1) -> float:
    """The cycle found from the geometric series of cycle lengths (logarithm), not by walking the cycles."""
    t = time - start + 1
    if mult == 1:
        cycle = math.ceil(t / length) - 1
        before = cycle * length
    else:
        cycle = math.ceil(math.log(t * (mult - 1) / length + 1, mult) - 1e-12) - 1
        before = length * (mult ** cycle - 1) / (mult - 1)
    progress = (t - before) / (length * mult ** cycle)
    return (init_lr - min_lr) / 2 * math.cos(progress * math.pi) + (init_lr + min_lr) / 2


@pytest.mark.parametrize("length, start, mult", [(4, 1, 1), (5, 3, 1), (2, 1, 2), (3, 2, 3)])
def test_cosine_decay_follows_the_closed_form(length: int, start: int, mult: int) -> None:
    for time in range(start, start + 60):
        assert cosine_decay(time, length, 1e-3, 1e-5, start=start, cycle_multiplier=mult) == pytest.approx(
            closed_form(time, length, 1e-3, 1e-5, start, mult), rel=1e-12)


def test_cosine_decay_cycles_restart_and_warm_up() -> None:
    values = [cosine_decay(t, cycle_length=4, init_lr=1.0, min_lr=0.0) for t in range(1, 10)]
    assert values[3] == pytest.approx(0.0, abs=1e-12) and values[4] == values[0]  # the end of a cycle, a restart
    assert values[1] == pytest.approx(0.5)
    assert cosine_decay(2, 10, 0.1, start=5) == 0.1  # before start: held at init_lr
    assert cosine_decay(2, 10, 0.1, start=5, warmup=True) == pytest.approx(0.1 * 2 / 5)  # or a linear warm-up


@pytest.mark.parametrize("kwargs, match", [({"cycle_length": 0}, "cycle_length must be a positive number"),
                                           ({"cycle_length": "4"}, "cycle_length must be a positive number"),
                                           ({"start": -1}, "start must be a step or epoch of 0 or more"),
                                           ({"cycle_multiplier": 0.5}, "cycle_multiplier must be at least 1")])
def test_cosine_decay_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cosine_decay(1, **{"cycle_length": 4, "init_lr": 0.1, **kwargs})


def test_cosine_decay_takes_a_float_cycle_and_start_0_as_fastestimator() -> None:
    assert cosine_decay(5, cycle_length=10.0, init_lr=1.0) == pytest.approx(cosine_decay(5, 10, 1.0))
    # start=0: the first cycle's position is time + 1 (FastEstimator's formula)
    assert cosine_decay(5, 10, 1.0, start=0) == pytest.approx(cosine_decay(6, 10, 1.0))



@pytest.mark.parametrize("kwargs, expected", [
    # FastEstimator 1.7's values, bit for bit (printed by its cosine_decay).
    ({"time": 2, "cycle_length": 4, "init_lr": 1e-3}, 0.0005005),
    ({"time": 4, "cycle_length": 4, "init_lr": 1e-3}, 9.999999999999159e-07),
    ({"time": 3, "cycle_length": 4, "init_lr": 1e-3}, 0.00014730016279731946),
    ({"time": 3, "cycle_length": 4, "init_lr": 0.1, "min_lr": 0.01, "start": 2}, 0.055),
    ({"time": 5, "cycle_length": 4, "init_lr": 1e-3, "min_lr": 1e-4, "start": 3, "cycle_multiplier": 2},
     0.0002318019484660537),
    ({"time": 13, "cycle_length": 4, "init_lr": 1e-3, "min_lr": 1e-4, "start": 3, "cycle_multiplier": 2},
     0.00013425421036992102),
])
def test_cosine_decay_matches_fastestimator_bit_for_bit(kwargs: dict, expected: float) -> None:
    assert cosine_decay(**kwargs) == expected
