"""The stream round-trip benchmark: every case answers through a real second process, and the split adds up."""

from __future__ import annotations

import json

import pytest

from benchmarks import harness, stream_rtt


def test_quick_run_times_every_case_and_splits_the_round_trip(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    assert stream_rtt.main(["--quick", "--model", "mlp", "--gap-us", "50", "--round-trips", "20"]) == 0
    result = json.loads((tmp_path / "stream_rtt_quick.json").read_text())
    medians = result["median_round_trip_us"]
    assert set(medians) == set(stream_rtt.CASES)
    assert all(value > 0 for value in medians.values())
    split = result["split_us"]
    assert split["framing_us"] == pytest.approx(medians["frame_small"] - medians["raw_blocking"])
    assert split["payload_us"] == pytest.approx(medians["frame_batch"] - medians["frame_small"])
    assert result["series"]["frame_batch"]["repeats"] == 2


def test_the_batch_case_sends_the_models_batch_as_a_replicas_step_message() -> None:
    messages = stream_rtt.messages("lenet", 32)
    batch, n_local, n_total, rates = messages["frame_batch"]
    assert batch["x"].shape == (32, 1, 28, 28) and batch["y"].shape == (32,)
    assert (n_local, n_total, rates) == (32, 32, None)
    assert len(messages["raw_batch"]) == batch["x"].nbytes + batch["y"].nbytes  # the same bytes, unframed
