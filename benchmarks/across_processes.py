"""Run one throughput comparison in several fresh processes and judge its ratios across them.

Inside one process the paired ratios of two variants can sit tightly around a value that the next process does not
repeat: on the 2-core VM, torch LeNet b/a read 0.930 with all six pairs in [0.906, 0.956] in one process and 0.998
with all six in [0.989, 1.015] in the next, with nothing changed. Something fixed for a process's lifetime (not
identified; where its arrays and weights land in memory is one candidate) moves the ratio more than the repeats
inside it vary, so the paired interval of a single run (throughput.py's verdict) is narrower than the real uncertainty.

This script runs ``benchmarks.throughput`` ``--processes`` times, each in a new Python process (one after another,
never two at once), and reports for every ratio: each process's paired ratio, their median, and a distribution-free
90% interval of that median from the processes alone (5 processes at least), with the verdict it allows. The pooled
interval (all processes' per-repeat ratios as if from one run) is printed next to it; where it is much narrower, the
processes disagree more than one run's repeats suggest. Add ``a_twin`` (TF: the same) to the variants to see the
same for two identical plain loops (an A/A ratio).

Run: ``python -m benchmarks.across_processes --processes 5 -- --framework torch --model lenet --variants a,b,a_twin
--repeats 7 --steps 300`` (everything after ``--`` goes to throughput.py; ``--json-out`` is set per process).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import harness

#: Lines of a process's output echoed live (progress); the rest goes to its log file only.
PROGRESS_PREFIXES = ("  repeat ", "  prepared ", "  SKIP ", "== ", "  waiting ")


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """This script's own arguments (before ``--``) and throughput.py's (after it)."""
    own, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5,
                        help="fresh processes to run the comparison in (5 at least for a 90%% interval)")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/<name>.json")
    parser.add_argument("--json-out", default="", metavar="PATH", help="write the JSON here instead")
    args = parser.parse_args(own)
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, got {args.processes}")
    for flag in ("--json-out", "--no-save"):
        if flag in rest:
            parser.error(f"{flag} after '--' is set by this script per process; give it before '--' instead")
    return args, rest


def run_process(index: int, count: int, throughput_args: list[str], workdir: Path) -> dict[str, Any]:
    """Run throughput.py once in a new interpreter; return its JSON payload (its full output is in a log file)."""
    out = workdir / f"process_{index}.json"
    log = workdir / f"process_{index}.log"
    command = [sys.executable, "-m", "benchmarks.throughput", *throughput_args, "--json-out", str(out)]
    print(f"-- process {index + 1}/{count}: {' '.join(command[1:])}", flush=True)
    root = Path(__file__).resolve().parent.parent
    with open(log, "w") as sink:
        # Unbuffered, so that its progress lines arrive as they are printed, not when a pipe buffer fills.
        child = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert child.stdout is not None
        for line in child.stdout:
            sink.write(line)
            if line.startswith(PROGRESS_PREFIXES):
                print("   " + line.rstrip(), flush=True)
        code = child.wait()
    if code != 0 or not out.exists():
        tail = "".join(log.read_text().splitlines(keepends=True)[-20:])
        raise RuntimeError(f"process {index + 1} (throughput.py) exited with {code}; the end of its log {log}:\n{tail}")
    return json.loads(out.read_text())


def combine(payloads: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per model and ratio: each process's paired ratio, their median and interval, the pooled per-repeat ratios'
    interval, the target and the verdict the processes allow."""
    combined: dict[str, dict[str, dict[str, Any]]] = {}
    for model in payloads[0]["results"]:
        runs = [p["results"][model] for p in payloads if model in p["results"]]
        series = [_series(r) for r in runs]
        rows: dict[str, dict[str, Any]] = {}
        for label, info in runs[0]["ratios"].items():
            num, den = label.split("/")
            per_process = [harness.ratio(s, num, den, paired=True) for s in series]
            if any(value is None for value in per_process):
                continue  # a variant that did not run (or not in every process)
            pooled = [ratio for s in series for ratio in harness.per_repeat_ratios(s, num, den)]
            interval = harness.median_interval(per_process)
            pooled_interval = harness.median_interval(pooled)
            target = info.get("target")
            rows[label] = {
                "per_process": per_process, "median": statistics.median(per_process),
                "interval_90": list(interval) if interval else None,
                "pooled_median": statistics.median(pooled),
                "pooled_interval_90": list(pooled_interval) if pooled_interval else None,
                "target": target,
                "verdict": harness.interval_verdict(interval, target) if target is not None else None,
            }
        combined[model] = rows
    return combined


def _series(result: dict[str, Any]) -> dict[str, harness.Series]:
    """One model's series of one process, back from their JSON form."""
    return {key: harness.Series(key, data.get("unit", ""), list(data["values"]))
            for key, data in result["series"].items()}


def print_table(combined: dict[str, dict[str, dict[str, Any]]], processes: int) -> None:
    def span(pair: list[float] | None) -> str:
        return f"[{pair[0]:.3f}, {pair[1]:.3f}]" if pair else "n/a"

    for model, rows in combined.items():
        print(f"\n== {model}: paired ratios over {processes} processes (90% intervals of the median)")
        table = [[label, " ".join(f"{v:.3f}" for v in row["per_process"]), f"{row['median']:.3f}",
                  span(row["interval_90"]), span(row["pooled_interval_90"]),
                  f">= {row['target']}" if row["target"] is not None else "-", row["verdict"] or "-"]
                 for label, row in rows.items()]
        print(harness.format_table(table, ["ratio", "per process", "median", "interval (processes)",
                                           "interval (pooled repeats)", "target", "verdict (processes)"]))


def main(argv: list[str] | None = None) -> int:
    args, throughput_args = parse(sys.argv[1:] if argv is None else argv)
    # Kept when a process fails, so that its log can be read.
    workdir = Path(tempfile.mkdtemp(prefix="fe_ray_across_"))
    payloads = [run_process(i, args.processes, throughput_args, workdir) for i in range(args.processes)]
    shutil.rmtree(workdir, ignore_errors=True)
    combined = combine(payloads)
    print_table(combined, args.processes)
    if args.processes < 5:
        print(f"\n{args.processes} processes give no 90% interval (5 at least): the verdicts read 'too few repeats'.")
    name = "across_processes_" + payloads[0]["benchmark"]
    payload = {"benchmark": name, "processes": args.processes, "throughput_args": throughput_args,
               "environment": payloads[0]["environment"], "ratios": combined,
               "runs": [p["results"] for p in payloads]}
    harness.save_results(name, payload, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
