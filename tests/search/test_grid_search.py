"""GridSearch: tries every combination once, in product order, finds the best, and rejects bad configurations."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.search import GridSearch, Search


def _peak(search_idx: int, a: int, b: float) -> dict[str, float]:
    # Maximum at a=2, b=0.5; the second field prefers the opposite corner.
    return {"score": -(a - 2) ** 2 - (b - 0.5) ** 2, "cost": a + b}


def test_search_is_reachable_as_fe_search() -> None:
    assert fe.search.GridSearch is GridSearch and issubclass(fe.search.GoldenSection, Search)


def test_grid_search_evaluates_every_combination_in_product_order_and_finds_the_max() -> None:
    seen: list[tuple[int, int, float]] = []

    def eval_fn(search_idx: int, a: int, b: float) -> dict[str, float]:
        seen.append((search_idx, a, b))
        return _peak(search_idx, a, b)

    search = GridSearch(eval_fn, params={"a": [1, 2, 3], "b": [0.0, 0.5, 1.0]}, best_mode="max",
                        optimize_field="score")
    search.fit()
    assert seen == [(i + 1, a, b) for i, (a, b) in enumerate((a, b) for a in (1, 2, 3) for b in (0.0, 0.5, 1.0))]
    best = search.get_best_results()
    assert best == {"param": {"a": 2, "b": 0.5, "search_idx": 5}, "result": {"score": 0.0, "cost": 2.5}}
    # Other fields and directions on request, without re-running anything.
    assert search.get_best_results(best_mode="min", optimize_field="cost")["param"] == {"a": 1, "b": 0.0,
                                                                                         "search_idx": 1}
    assert len(seen) == 9


def test_plain_values_are_wrapped_and_summary_is_a_copy() -> None:
    search = GridSearch(lambda search_idx, x: x * 10, params={"x": np.array([1, 2])})
    search.fit()
    summary = search.get_search_summary()
    assert summary == [{"param": {"x": 1, "search_idx": 1}, "result": {"value": 10}},
                       {"param": {"x": 2, "search_idx": 2}, "result": {"value": 20}}]
    summary[0]["result"]["value"] = -1
    assert search.get_search_summary()[0]["result"]["value"] == 10
    # No best_mode on the search: the caller must say which direction is better.
    with pytest.raises(ValueError, match="best_mode='max' or 'min'"):
        search.get_best_results()
    assert search.get_best_results(best_mode="min")["param"]["x"] == 1


def test_repeated_options_are_evaluated_once_and_fit_without_save_dir_starts_over() -> None:
    calls: list[Any] = []

    def eval_fn(search_idx: int, x: list[int]) -> float:
        calls.append(x)
        return float(sum(x))

    search = GridSearch(eval_fn, params={"x": [[1, 2], (1, 2), [3]]}, best_mode="max")
    search.fit()
    assert calls == [[1, 2], [3]]  # (1, 2) equals [1, 2] once saved as JSON, so it is a cache hit
    assert [entry["param"]["search_idx"] for entry in search.get_search_summary()] == [1, 2]
    search.fit()
    assert len(calls) == 4 and search.search_idx == 2


def test_model_names_restart_for_each_evaluation() -> None:
    build = sys.modules["fe_ray.build"]  # the module (fe_ray.build the attribute is the build function)
    counts: list[int] = []
    saved, build._build_count = build._build_count, 5
    try:
        GridSearch(lambda search_idx, x: counts.append(build._build_count) or 0, params={"x": [1, 2]}).fit()
    finally:
        build._build_count = saved
    assert counts == [0, 0]


def test_any_iterable_of_options_is_searched_in_its_order(capsys: pytest.CaptureFixture) -> None:
    # FastEstimator hands the option collections to itertools.product, so sets, ranges, generators and numpy arrays
    # work there; they are read once, into lists, so a second fit() searches them again.
    search = GridSearch(lambda search_idx, a, b, c: {"v": a * b + c},
                        params={"a": {2}, "b": (n for n in (1, 3)), "c": np.array([10, 20])}, best_mode="max")
    search.fit()
    search.fit()
    capsys.readouterr()
    assert [entry["param"] for entry in search.get_search_summary()] == [
        {"a": 2, "b": 1, "c": 10, "search_idx": 1}, {"a": 2, "b": 1, "c": 20, "search_idx": 2},
        {"a": 2, "b": 3, "c": 10, "search_idx": 3}, {"a": 2, "b": 3, "c": 20, "search_idx": 4}]
    assert type(search.get_best_results()["param"]["c"]) is int  # numpy values become Python ones
    with pytest.raises(TypeError, match="wrap a single value in a list"):
        GridSearch(lambda search_idx, a: a, params={"a": np.array(3)})


@pytest.mark.parametrize("params, error, match", [
    ({}, ValueError, "params is empty"),
    ([1, 2], TypeError, "must be a dict"),
    ({"a": []}, ValueError, r"params\['a'\] has no options"),
    ({"a": "abc"}, TypeError, "wrap a single value in a list"),
    ({"a": 3}, TypeError, "wrap a single value in a list"),
    ({"a": [1], "c": [2]}, ValueError, r"\['c'\] are not arguments of eval_fn"),
    ({"b": [1]}, ValueError, r"requires argument\(s\) \['a'\]"),
    ({"a": [1], "search_idx": [1]}, ValueError, "must not contain 'search_idx'"),
])
def test_bad_params_name_the_problem(params: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        GridSearch(lambda search_idx, a, b=0: a, params=params)


def test_bad_eval_fn_or_best_mode_or_name() -> None:
    with pytest.raises(TypeError, match="must take a 'search_idx' argument"):
        GridSearch(lambda a: a, params={"a": [1]})
    with pytest.raises(TypeError, match="eval_fn must be a function"):
        GridSearch(3, params={"a": [1]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="best_mode must be 'max' or 'min'.*'best'"):
        GridSearch(lambda search_idx, a: a, params={"a": [1]}, best_mode="best")
    with pytest.raises(ValueError, match="not usable as a file name"):
        GridSearch(lambda search_idx, a: a, params={"a": [1]}, name="a/b")
    # **kwargs accepts any parameter and search_idx.
    search = GridSearch(lambda **kwargs: kwargs["search_idx"] * kwargs["a"], params={"a": [2, 3]}, best_mode="max")
    search.fit()
    assert search.get_best_results()["result"] == {"value": 6}


def test_best_results_errors() -> None:
    search = GridSearch(lambda search_idx, a: {"x": a, "y": -a}, params={"a": [1, 2]}, best_mode="max")
    with pytest.raises(RuntimeError, match="no results yet"):
        search.get_best_results()
    search.fit()
    with pytest.raises(ValueError, match="ambiguous; pass optimize_field"):
        search.get_best_results()
    with pytest.raises(ValueError, match="'z' is missing"):
        search.get_best_results(optimize_field="z")
    assert search.get_best_results(optimize_field="y")["param"]["a"] == 1


def test_array_results_are_stored_as_lists_and_the_search_saves_and_resumes(tmp_path) -> None:
    """FastEstimator turns numpy results into lists (nested dicts too): the summary saves as JSON and resumes."""
    calls: list[int] = []

    def score(search_idx: int, a: int) -> dict[str, Any]:
        calls.append(a)
        return {"acc": np.float32(a), "cm": np.eye(2) * a, "nested": {"v": np.array([a, a])}}

    search = GridSearch(score, {"a": [1, 2]}, best_mode="max", optimize_field="acc")
    search.fit(str(tmp_path))
    best = search.get_best_results()
    assert best["result"] == {"acc": 2.0, "cm": [[2.0, 0.0], [0.0, 2.0]], "nested": {"v": [2, 2]}}
    again = GridSearch(score, {"a": [1, 2]}, best_mode="max", optimize_field="acc")
    again.fit(str(tmp_path))
    assert calls == [1, 2] and again.get_search_summary() == search.get_search_summary()
