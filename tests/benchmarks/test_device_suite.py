"""The device suite's own logic, on the CPU with stand-in parts: selection, budget, timeouts, results on disk."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

from benchmarks import device_suite
from benchmarks.device_suite import Outcome, Part
from tests.helpers.processes import pid_alive


def _part(name: str, code: str, planned_s: float = 5.0) -> Part:
    return Part(name, ("-c", code), planned_s, False, f"stand-in {name}")


def test_plan_lists_every_part_once_with_its_json_output() -> None:
    parts = device_suite.plan("cuda")
    names = [part.name for part in parts]
    assert names == ["cuda_tests", "throughput_lenet", "step_gap", "example", "profile_replica", "profile_step",
                     "overhead", "cpu_spare_cores", "cpu_probe", "throughput_resnet", "checkpoint", "stream_rtt",
                     "idle_gap"]
    for part in parts:
        command = part.command("python", Path("/out/x.json"))
        if part.name.startswith("profile_"):  # console output only (the log), on the GPU
            assert command[command.index("--device") + 1] == "cuda" and "/out/x.json" not in command
        elif part.name == "stream_rtt":  # two processes on the machine's CPUs: no device to choose
            assert "/out/x.json" in command and "--device" not in command
        elif part.name not in ("cuda_tests", "example"):
            assert "/out/x.json" in command, part.name
            assert command[command.index("--device") + 1] == ("cpu" if part.name in ("cpu_spare_cores", "cpu_probe")
                                                                  else "cuda")
    benchmarks = [part for part in device_suite.plan("cuda", quick=True) if "--json-out" in part.args]
    assert len(benchmarks) == 9 and all("--quick" in part.args for part in benchmarks)


def test_every_gpu_throughput_part_holds_at_most_one_gpu_of_actors() -> None:
    # The second H200 run lost its LeNet part to this: the variants' actors asked for more than the one GPU, and the
    # last one waited unplaced until the suite stopped the part.
    from benchmarks import plain_variants, variants

    checked = 0
    for part in device_suite.plan("cuda"):
        args = list(part.args)
        if "benchmarks.throughput" not in args or args[args.index("--device") + 1] != "cuda":
            continue
        keys = set(args[args.index("--variants") + 1].split(","))
        built, skipped = variants.build_variants({"device": "cuda", "threads": 16, "replicas": 2}, "torch", keys)
        assert set(built) == keys and not skipped, part.name
        plain_variants.check_gpu_shares(list(built.values()), "cuda")
        checked += 1
    assert checked == 2  # LeNet and ResNet-8


def test_select_keeps_plan_order_and_names_valid_parts_on_error() -> None:
    parts = device_suite.plan()
    assert [p.name for p in device_suite.select(parts, "checkpoint, cuda_tests")] == ["cuda_tests", "checkpoint"]
    assert device_suite.select(parts, "") == parts
    with pytest.raises(ValueError, match=r"unknown part\(s\) \['gpu'\].*cuda_tests"):
        device_suite.select(parts, "cuda_tests,gpu")


def test_timeout_for_caps_at_the_overrun_and_at_what_is_left() -> None:
    part = _part("p", "pass", planned_s=100)
    assert device_suite.timeout_for(part, 1000) == device_suite.OVERRUN * 100
    left = device_suite.RESERVE_S + 70
    assert device_suite.timeout_for(part, left) == pytest.approx(70)
    assert device_suite.timeout_for(part, device_suite.RESERVE_S + 49) is None  # under half the planned time


def test_run_part_records_exit_code_and_the_json_the_part_wrote(tmp_path: Path) -> None:
    code = "import json, sys; json.dump({'ratio': 0.97}, open(sys.argv[1], 'w')); print('hello'); sys.exit(3)"
    part = Part("p", ("-c", code, "{json}"), 5, False, "")
    with open(tmp_path / "log", "a") as log:
        outcome = device_suite.run_part(part, tmp_path / "p.json", 30, log)
    assert (outcome.returncode, outcome.timed_out, outcome.result) == (3, False, {"ratio": 0.97})
    assert not outcome.ok()
    text = (tmp_path / "log").read_text()
    assert "hello" in text and "===== p: exit 3" in text


def test_a_timed_out_part_is_stopped_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The part starts a child (as a part's Ray starts its own processes) and both would sleep for a minute.
    code = ("import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'import time; "
            f"time.sleep(60)']); open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)")
    start = time.monotonic()
    with open(tmp_path / "log", "a") as log:
        outcome = device_suite.run_part(_part("slow", code), tmp_path / "slow.json", 2, log)
    assert outcome.timed_out and outcome.returncode is None
    assert time.monotonic() - start < 20
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(child), "the part's child outlived the timeout"


def test_main_runs_in_order_writes_after_each_part_and_skips_what_the_budget_cannot_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    code = "import json, sys; json.dump({'n': 1}, open(sys.argv[1], 'w'))"
    parts = [Part("first", ("-c", code, "{json}"), 1, False, ""),
             _part("second", "import sys; sys.exit(1)", planned_s=1),
             _part("too_long", "pass", planned_s=1000)]
    monkeypatch.setattr(device_suite, "plan", lambda device="cuda", quick=False: parts)
    monkeypatch.setattr(device_suite, "install_wheels", lambda wheel_dir: "stand-in: no wheels needed")
    original = device_suite.write_results

    def spy(out: Path, info: dict, outcomes: list[Outcome]) -> None:
        original(out, info, outcomes)
        seen.append([part["name"] for part in json.loads((out / "suite.json").read_text())["parts"]])

    monkeypatch.setattr(device_suite, "write_results", spy)
    rc = device_suite.main(["--out", str(tmp_path), "--budget-s", "120"])
    assert rc == 1  # "second" failed
    assert seen == [["first"], ["first", "second"], ["first", "second", "too_long"]]
    results = json.loads((tmp_path / "suite.json").read_text())
    first, second, too_long = results["parts"]
    assert first["result"] == {"n": 1} and first["returncode"] == 0
    assert second["returncode"] == 1
    assert too_long["returncode"] is None and "--parts too_long" in too_long["skipped"]
    assert results["machine"]["python"]
    assert sorted(os.listdir(tmp_path)) == ["suite.json", "suite.log"]  # within the device tool's file limits


def test_main_refuses_a_budget_smaller_than_its_reserve(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        device_suite.main(["--plan", "--budget-s", "5"])
    assert "--budget-s must exceed" in capsys.readouterr().err


def test_install_wheels_explains_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_suite, "_missing", lambda pythonpath: {"mlxtend": "ModuleNotFoundError"})
    with pytest.raises(RuntimeError, match=r"\['mlxtend'\] not installed .*benchmarks.gpu_wheels"):
        device_suite.install_wheels(tmp_path)
    monkeypatch.setattr(device_suite, "_missing", lambda pythonpath: {})
    assert "no wheels installed" in device_suite.install_wheels(tmp_path)


@pytest.mark.skipif(any(importlib.util.find_spec(name) is None for name in device_suite.CARRIED),
                    reason="needs Ray and mlxtend installed")  # find_spec: importing them here would leak into
def test_missing_reads_the_given_path(tmp_path: Path) -> None:  # later tests (mlxtend must stay unimported)
    assert device_suite._missing(str(tmp_path)) == {}  # nothing on the path shadows what is installed
    (tmp_path / "ray.py").write_text("raise ImportError('stand-in that fails')\n")
    assert device_suite._missing(str(tmp_path)) == {"ray": "ImportError: stand-in that fails"}
