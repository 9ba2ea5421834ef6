"""Smoke test of the benchmark suite: the harness helpers and a seconds-long plain-variant throughput run."""

from __future__ import annotations

import json

from benchmarks import harness, throughput


def test_alternate_rotates_order_and_takes_medians() -> None:
    calls: list[str] = []

    def make(name: str, value: float):  # noqa: ANN202
        def run() -> float:
            calls.append(name)
            return value
        return run

    series = harness.alternate({"x": make("x", 1.0), "y": make("y", 3.0)}, repeats=3, unit="s", log=None)
    assert calls == ["x", "y", "y", "x", "x", "y"]
    assert series["x"].median == 1.0 and series["y"].median == 3.0
    assert harness.ratio(series, "y", "x") == 3.0
    table = harness.ratio_table([("y/x", 3.0, 2.0, ">="), ("x/y", None, 1.0, ">=")])
    assert "MET" in table and "not run" in table


def test_throughput_quick_plain_variant(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert throughput.main(["--quick", "--model", "lenet", "--variants", "a", "--device", "cpu",
                            "--threads", "1"]) == 0
    payload = json.loads((tmp_path / "throughput_quick.json").read_text())
    series = payload["results"]["lenet"]["series"]["a"]
    assert series["repeats"] == 2 and series["median"] > 0
