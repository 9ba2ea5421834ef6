"""Search state: save/load as FastEstimator-compatible JSON, and resuming an interrupted fit(save_dir)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fe_ray.search import GoldenSection, GridSearch


class _Interrupt(Exception):
    pass


def test_interrupted_grid_search_resumes_without_repeating_evaluations(tmp_path: Path) -> None:
    params = {"a": [1, 2, 3], "b": [10, 20]}
    first: list[tuple[int, int]] = []

    def crashing(search_idx: int, a: int, b: int) -> dict[str, float]:
        if len(first) == 4:
            raise _Interrupt
        first.append((a, b))
        return {"score": np.float32(a * b)}  # numpy results are saved as plain numbers

    with pytest.raises(_Interrupt):
        GridSearch(crashing, params, best_mode="max", name="grid").fit(save_dir=str(tmp_path))
    saved = json.loads((tmp_path / "grid.json").read_text())
    assert saved["name"] == "grid" and saved["best_mode"] == "max"
    assert [entry["param"] for entry in saved["search_summary"]] == [
        {"a": 1, "b": 10, "search_idx": 1}, {"a": 1, "b": 20, "search_idx": 2}, {"a": 2, "b": 10, "search_idx": 3},
        {"a": 2, "b": 20, "search_idx": 4}]
    assert not [p for p in tmp_path.iterdir() if p.name != "grid.json"]  # no temporary files left behind

    second: list[tuple[int, int, int]] = []

    def resumed_fn(search_idx: int, a: int, b: int) -> dict[str, float]:
        second.append((search_idx, a, b))
        return {"score": a * b}

    resumed = GridSearch(resumed_fn, params, best_mode="max", name="grid")
    resumed.fit(save_dir=str(tmp_path))
    assert second == [(5, 3, 10), (6, 3, 20)]
    assert resumed.get_best_results() == {"param": {"a": 3, "b": 20, "search_idx": 6}, "result": {"score": 60}}
    assert len(json.loads((tmp_path / "grid.json").read_text())["search_summary"]) == 6


def test_golden_section_resumes_on_the_same_path(tmp_path: Path) -> None:
    def objective(search_idx: int, x: float) -> float:
        return (x - 1.5) ** 2

    full = GoldenSection(objective, 0, 4, max_iter=8, best_mode="min", integer=False, name="gs")
    full.fit(save_dir=str(tmp_path / "full"))
    short = GoldenSection(objective, 0, 4, max_iter=3, best_mode="min", integer=False, name="gs")
    short.fit(save_dir=str(tmp_path / "resume"))
    calls: list[int] = []
    longer = GoldenSection(lambda search_idx, x: calls.append(search_idx) or objective(search_idx, x), 0, 4,
                           max_iter=8, best_mode="min", integer=False, name="gs")
    longer.fit(save_dir=str(tmp_path / "resume"))
    assert calls == [6, 7, 8, 9, 10]  # the first 5 points came from the file
    assert longer.get_search_summary() == full.get_search_summary()


def test_save_and_load_round_trip_and_fastestimator_files(tmp_path: Path) -> None:
    search = GridSearch(lambda search_idx, a: a, {"a": [1, 2]}, name="s")
    search.fit()
    search.save(str(tmp_path))
    loaded = GridSearch(lambda search_idx, a: 1 / 0, {"a": [1, 2, 3]}, name="s")
    loaded.load(str(tmp_path))
    assert loaded.get_search_summary() == search.get_search_summary() and loaded.search_idx == 2
    assert loaded.evaluate(a=2) == {"value": 2}  # from the cache: eval_fn would divide by zero
    # A file in FastEstimator's layout (list parameter, saved best_mode) loads; the caller's best_mode wins.
    (tmp_path / "fe.json").write_text(json.dumps({"search_summary": [
        {"param": {"k": [3, 3], "search_idx": 7}, "result": {"acc": 0.5}}], "best_mode": "min",
        "optimize_field": "acc"}))
    other = GridSearch(lambda search_idx, k: 1 / 0, {"k": [(3, 3)]}, best_mode="max", name="fe")
    other.load(str(tmp_path))
    assert other.search_idx == 7 and other.best_mode == "max" and other.optimize_field == "acc"
    other.fit(save_dir=str(tmp_path))  # (3, 3) is cached as [3, 3]: nothing runs
    assert other.get_best_results()["result"] == {"acc": 0.5}


def test_load_errors(tmp_path: Path) -> None:
    search = GridSearch(lambda search_idx, a: a, {"a": [1]}, name="missing")
    with pytest.raises(ValueError, match="No saved search 'missing'.*not_exist_ok=True"):
        search.load(str(tmp_path))
    search.fit()
    search.load(str(tmp_path), not_exist_ok=True)
    assert search.get_search_summary() == [] and search.search_idx == 0
    (tmp_path / "missing.json").write_text('{"search_summary": [{"param": {"a": 1}, "result": 1}]}')
    with pytest.raises(ValueError, match="entry 0"):
        search.load(str(tmp_path))
    (tmp_path / "missing.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        search.load(str(tmp_path))


def test_unsaveable_parameters_fail_with_a_fix(tmp_path: Path) -> None:
    search = GridSearch(lambda search_idx, f: 0, {"f": [object()]}, name="objects")
    search.fit()  # without save_dir any parameter works
    with pytest.raises(TypeError, match="Cannot save search 'objects' as JSON.*without save_dir"):
        search.fit(save_dir=str(tmp_path))


def test_process_results_is_the_hook_evaluate_records_through(capsys: pytest.CaptureFixture) -> None:
    # FastEstimator's public Search.process_results: non-dicts are wrapped as {"value": v}, arrays become lists.
    search = GridSearch(lambda search_idx, a: a, {"a": [1]}, best_mode="max")
    raw = {"acc": np.array([0.5, 0.25]), "inner": {"n": np.int64(3)}}
    assert search.process_results(raw) == {"acc": [0.5, 0.25], "inner": {"n": 3}}
    assert isinstance(raw["acc"], np.ndarray)  # the caller's dict is left as it was
    assert search.process_results(np.float32(0.5)) == {"value": 0.5}

    class Scaled(GridSearch):
        def process_results(self, result: object) -> dict[str, object]:
            return {"score": 10 * super().process_results(result)["value"]}

    scaled = Scaled(lambda search_idx, a: a, {"a": [1, 2]}, best_mode="max")
    scaled.fit()
    capsys.readouterr()
    assert scaled.get_best_results() == {"param": {"a": 2, "search_idx": 2}, "result": {"score": 20}}
