"""GoldenSection: converges on the optimum of a unimodal function, reuses cached points, validates its arguments."""

from __future__ import annotations

import math

import pytest

from fe_ray.search import GoldenSection


def test_float_search_finds_the_argmax_within_the_final_bracket() -> None:
    calls: list[float] = []

    def eval_fn(search_idx: int, x: float) -> dict[str, float]:
        calls.append(x)
        return {"acc": 1.0 - (x - 2.7) ** 2, "loss": (x - 2.7) ** 2}

    search = GoldenSection(eval_fn, x_min=0.0, x_max=10.0, max_iter=25, best_mode="max", optimize_field="acc",
                           integer=False)
    search.fit()
    best = search.get_best_results()
    assert abs(best["param"]["x"] - 2.7) < 10 * 0.618 ** 25
    assert len(calls) == 27  # two initial points + one per iteration: floats never repeat
    # Minimizing another field of the same results finds the same point.
    assert search.get_best_results(best_mode="min", optimize_field="loss") == best


def test_min_mode_and_integer_mode_use_the_cache_for_repeated_points() -> None:
    calls: list[int] = []

    def eval_fn(search_idx: int, n: int) -> float:
        calls.append(n)
        return abs(n - 37)

    search = GoldenSection(eval_fn, x_min=0, x_max=100, max_iter=20, best_mode="min")
    search.fit()
    # Truncating interior points to ints (FastEstimator's points) can leave the optimum one step off.
    assert abs(search.get_best_results()["param"]["n"] - 37) <= 1
    assert all(isinstance(n, int) for n in calls)
    assert len(calls) == len(set(calls)) < 22  # narrow brackets revisit points; none was evaluated twice
    assert [entry["param"]["search_idx"] for entry in search.get_search_summary()] == list(range(1, len(calls) + 1))


def test_default_best_mode_is_max() -> None:
    search = GoldenSection(lambda search_idx, n: -((n - 3) ** 2), x_min=0, x_max=6, max_iter=10)
    search.fit()
    assert search.get_best_results() == {"param": {"n": 3, "search_idx": 2}, "result": {"value": 0}}


def test_multi_key_result_without_optimize_field_is_an_error() -> None:
    search = GoldenSection(lambda search_idx, n: {"a": n, "b": -n}, x_min=0, x_max=6, max_iter=2)
    with pytest.raises(ValueError, match="ambiguous; pass optimize_field"):
        search.fit()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"x_min": 5, "x_max": 5}, ValueError, "x_min < x_max.*x_min=5, x_max=5"),
    ({"x_min": 6, "x_max": 1}, ValueError, "x_min < x_max"),
    ({"x_min": 0.5, "x_max": 3}, TypeError, "pass integer=False"),
    ({"x_min": "0", "x_max": 3, "integer": False}, TypeError, "x_min must be a number"),
    ({"max_iter": 0}, ValueError, "max_iter must be >= 1"),
    ({"max_iter": 2.0}, TypeError, "max_iter must be an int"),
    ({"best_mode": "maximum"}, ValueError, "best_mode must be 'max' or 'min'.*'maximum'"),
    ({"best_mode": None}, ValueError, "best_mode must be 'max' or 'min'"),
])
def test_invalid_arguments_name_the_value(kwargs: dict, error: type[Exception], match: str) -> None:
    arguments = {"x_min": 0, "x_max": 10, "max_iter": 5, **kwargs}
    with pytest.raises(error, match=match):
        GoldenSection(lambda search_idx, n: n, **arguments)


def test_eval_fn_must_take_exactly_one_searched_argument() -> None:
    with pytest.raises(ValueError, match=r"exactly one besides search_idx; it takes \['a', 'b'\]"):
        GoldenSection(lambda search_idx, a, b: a, x_min=0, x_max=1, max_iter=1)
    with pytest.raises(TypeError, match="'search_idx'"):
        GoldenSection(lambda n: n, x_min=0, x_max=1, max_iter=1)
    assert math.isclose(GoldenSection(lambda search_idx, lr: lr, 0, 1, 1, integer=False).x_max, 1.0)
