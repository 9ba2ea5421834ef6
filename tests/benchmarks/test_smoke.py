"""Smoke test of the benchmark suite: the harness helpers and a seconds-long plain-variant throughput run."""

from __future__ import annotations

import json

import pytest

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


def test_paired_ratio_is_the_median_of_per_repeat_ratios() -> None:
    plain, fe = harness.Series("a", "samples/s"), harness.Series("c", "samples/s")
    plain.values = [100.0, 50.0, 80.0]  # repeat 2: the whole machine was slow for both variants
    fe.values = [90.0, 45.0, 40.0]  # repeat 3: only this variant was disturbed
    series = {"a": plain, "c": fe}
    assert harness.ratio(series, "c", "a") == pytest.approx(45.0 / 80.0)  # medians from different repeats
    assert harness.ratio(series, "c", "a", paired=True) == pytest.approx(0.9)
    assert harness.ratio(series, "c", "a", best=True) == pytest.approx(0.9)


def test_throughput_quick_plain_variant(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert throughput.main(["--quick", "--model", "lenet", "--variants", "a", "--device", "cpu",
                            "--threads", "1"]) == 0
    payload = json.loads((tmp_path / "throughput_quick.json").read_text())
    series = payload["results"]["lenet"]["series"]["a"]
    assert series["repeats"] == 2 and series["median"] > 0


def test_mlp_probe_reports_microseconds_per_step(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The overhead probe model runs through the plain loop and fe_ray's in-process Network; the JSON carries
    each variant's time per step, consistent with its samples/s."""
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert throughput.main(["--quick", "--model", "mlp", "--variants", "a,b0", "--device", "cpu",
                            "--threads", "1"]) == 0
    result = json.loads((tmp_path / "throughput_quick.json").read_text())["results"]["mlp"]
    assert set(result["us_per_step"]) == {"a", "b0"}
    for key, us in result["us_per_step"].items():
        assert us == pytest.approx(1e6 * 32 / result["series"][key]["median"])


def test_tf_data_parallel_rank_trains_like_the_plain_tf_loop() -> None:
    """One rank of the hand-written TF baseline (e_tf), alone in its gloo group, must do exactly the plain TF
    loop's work: its flat-bucket split/apply may not reorder or drop gradients."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    import numpy as np

    from benchmarks.baselines import PlainTFTrainer, TFDPWorker, batches_of
    from benchmarks.models import synthetic_data

    batches = batches_of(synthetic_data("lenet", 3 * 8, channels_last=True), 8)
    plain = PlainTFTrainer("lenet")
    plain.run(batches)
    rank = TFDPWorker(0, 1, harness.free_port(), "lenet", threads=1)
    rank.setup()
    try:
        losses = [rank.step(b["x"], b["y"]) for b in batches]
    finally:
        rank.shutdown()
    assert all(np.isfinite(losses))
    for ours, ref in zip(rank.model.trainable_variables, plain.model.trainable_variables, strict=True):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-4, atol=1e-6)


def test_paired_stall_is_the_extra_time_of_the_window_with_the_save(tmp_path) -> None:
    import time
    from types import SimpleNamespace

    from benchmarks.checkpoint import Bench

    started = []

    def start_save(kind: str):  # noqa: ANN202 - blocks 50 ms, then the "write" is done at once
        started.append(kind)
        time.sleep(0.05)
        return lambda: True

    fake = SimpleNamespace(start_save=start_save, fe_root=tmp_path)
    result = Bench.paired_stall(fake, "fe_thread", lambda: time.sleep(0.001), window_steps=40, save_first=True)
    assert started == ["fe_thread"]  # one save, in the window that has it
    assert 0.04 <= result["stall_s"] <= 0.2 and result["write_inside_window"] == 1.0
    assert result["window_s"] >= 0.04
