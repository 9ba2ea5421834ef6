"""benchmarks/across_processes.py: ratios judged across fresh processes (the runs themselves are faked here)."""

from __future__ import annotations

import json

import pytest

from benchmarks import across_processes


def _run(a: list[float], b: list[float]) -> dict:
    """One throughput.py result for one model, as its JSON holds it (only what the combination reads)."""
    return {"ratios": {"b/a": {"value": None, "target": 0.97}, "c/a": {"value": None, "target": 0.93}},
            "series": {"a": {"values": a}, "b": {"values": b}}}


def test_processes_that_disagree_widen_the_interval_beyond_the_pooled_repeats() -> None:
    # Five processes, each with three tight pairs around its own level: 0.93, 0.96, 0.99, 1.00, 1.02.
    levels = [0.93, 0.96, 0.99, 1.00, 1.02]
    payloads = [{"results": {"lenet": _run([100.0, 100.0, 100.0], [100 * (lv - 0.002), 100 * lv, 100 * (lv + 0.002)])}}
                for lv in levels]
    rows = across_processes.combine(payloads)["lenet"]
    assert set(rows) == {"b/a"}  # c/a did not run (no series c): left out, not reported as a value
    row = rows["b/a"]
    assert row["per_process"] == pytest.approx(levels)
    assert row["median"] == pytest.approx(0.99)
    assert row["interval_90"] == pytest.approx([0.93, 1.02])  # 5 values: min..max covers the median at 94%
    assert row["verdict"] == "within noise"
    # The 15 pooled repeats alone would claim far more certainty than the processes allow.
    low, high = row["pooled_interval_90"]
    assert 0.95 < low and high < 1.01
    assert high - low < 0.5 * (1.02 - 0.93)


def test_agreeing_processes_give_a_verdict() -> None:
    payloads = [{"results": {"lenet": _run([100.0] * 3, [v, v + 1, v - 1])}} for v in (99.0, 100.0, 101.0, 98.0, 102.0)]
    row = across_processes.combine(payloads)["lenet"]["b/a"]
    assert row["verdict"] == "met beyond noise"
    too_few = across_processes.combine(payloads[:4])["lenet"]["b/a"]
    assert too_few["interval_90"] is None and too_few["verdict"] == "too few repeats"


def test_arguments_split_at_the_double_dash() -> None:
    args, rest = across_processes.parse(["--processes", "3", "--", "--model", "lenet", "--repeats", "7"])
    assert args.processes == 3 and rest == ["--model", "lenet", "--repeats", "7"]
    with pytest.raises(SystemExit):
        across_processes.parse(["--processes", "0"])
    with pytest.raises(SystemExit):
        across_processes.parse(["--", "--json-out", "x.json"])  # set per process by the script itself


def test_one_real_process_end_to_end(tmp_path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "across.json"
    assert across_processes.main(["--processes", "1", "--json-out", str(out), "--", "--quick", "--model", "lenet",
                                  "--variants", "a,a_twin", "--device", "cpu", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "a_twin/a" in printed and "process 1/1" in printed
    payload = json.loads(out.read_text())
    row = payload["ratios"]["lenet"]["a_twin/a"]
    assert len(row["per_process"]) == 1 and row["per_process"][0] > 0
