"""Shared benchmark harness: thread budget, device choice, alternating repeats, medians, tables and JSON.

Every benchmark in this package measures its variants *side by side in one run*: repeat ``r`` runs every variant
once (in an order rotated each repeat so no variant always runs first or last), and only medians over the repeats
are reported. These machines are noisy; alternation spreads slow phases (another tenant, a GC, page-cache flush)
over all variants instead of penalising whichever happened to run during them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
#: This process's malloc settings, as :func:`set_process_malloc` chose them ("not set" before).
_MALLOC = "not set"
#: The longest a benchmark waits on one remote result (an actor's setup, a timed pass of many steps) before it
#: fails instead of hanging on a dead or stuck rank.
REMOTE_TIMEOUT_S = 600.0


# ---------------------------------------------------------------------------------------------------- environment
def available_cores() -> int:
    """CPU cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def cpu_busy_cores(interval: float = 1.0) -> float:
    """Cores kept busy machine-wide (all processes, this one included) over ``interval`` seconds, from /proc/stat."""
    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields[:8]), idle

    try:
        total0, idle0 = sample()
        time.sleep(interval)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return float("nan")
    busy = (total1 - total0) - (idle1 - idle0)
    return available_cores() * busy / max(total1 - total0, 1)


def wait_for_quiet(max_wait_s: float, threshold_cores: float = 0.3, log: Callable[[str], None] = print) -> float:
    """Wait (up to ``max_wait_s``) until other processes use less than ``threshold_cores``; return the last level.

    These machines are shared: a test suite running next to a benchmark changes its numbers by 2x. Alternation
    makes the *ratios* robust to slow drifts, but not to bursts, so benchmarks start in a quiet moment when they can.
    """
    deadline = time.monotonic() + max_wait_s
    busy = cpu_busy_cores()
    while busy > threshold_cores and time.monotonic() < deadline:
        log(f"  waiting for a quiet machine: {busy:.2f} cores busy")
        time.sleep(4.0)
        busy = cpu_busy_cores()
    return busy


def load_average() -> list[float]:
    """The 1/5/15-minute load averages."""
    try:
        return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return []


def set_process_malloc(glibc_defaults: bool) -> str:
    """Fix this process's malloc settings before anything is measured, and record them for :func:`environment`.

    By default this process gets the settings fe_ray gives every process that trains (:mod:`fe_ray.allocator`;
    an in-process Network applies them when its first context starts), so that the plain loops and fe_ray's
    in-process variants run with the same allocator whichever variants a run holds. ``glibc_defaults``: this
    process keeps glibc's defaults, as a hand-written script's would, and fe_ray's in-process Network leaves it so
    (:func:`fe_ray.allocator.leave_process_malloc`); fe_ray's replicas keep their settings. This was the state of
    every run before 2026-11-25 (midday).
    """
    global _MALLOC
    from fe_ray.allocator import leave_process_malloc, malloc_chosen, tune_process_malloc

    tuned = leave_process_malloc() if glibc_defaults else tune_process_malloc()  # True: the settings apply
    _MALLOC = ("fe_ray.allocator settings" if tuned else "the environment's choice" if malloc_chosen()
               else "glibc defaults")
    return _MALLOC


def set_thread_budget(threads: int) -> None:
    """Pin torch (and TensorFlow, if imported) in *this* process to ``threads`` intra-op threads.

    Deliberately does NOT export OMP_NUM_THREADS & co.: Ray gives each actor ``OMP_NUM_THREADS = its num_cpus``
    only when the variable is absent from the environment it inherits. Exporting it here would give every fe_ray
    replica the whole budget (2 replicas x 2 threads on 2 cores). :func:`init_ray` removes inherited values.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import torch

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set (interop pool started); harmless
            pass
    except ImportError:
        pass
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:  # TF runtime already initialised
            pass


def resolve_device(requested: str) -> tuple[str, str]:
    """Map ``--device`` (auto|cpu|cuda) to an available device; return (device, note).

    ``cpu`` also hides every GPU from this process and the Ray workers it starts (``CUDA_VISIBLE_DEVICES=""``,
    set before CUDA is initialised): fe_ray's in-process Network, like FastEstimator's, trains on a GPU whenever
    one is visible, so on a GPU machine the fe_ray variants would otherwise run on the GPU against plain loops on
    the CPU (the 2026-11-26 H100 run's ``cpu_spare_cores`` part, b/a 3.87).
    """
    if requested == "cpu":
        if "torch" in sys.modules and _cuda_initialised(sys.modules["torch"]):
            raise RuntimeError("--device cpu must be resolved before CUDA is initialised in this process.")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return "cpu", ""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return "cuda", ""
    if requested == "cuda":
        return "cpu", "NOTE: --device cuda requested but no CUDA device is available; falling back to cpu."
    return "cpu", ""


def _cuda_initialised(torch: Any) -> bool:
    is_initialized = getattr(getattr(torch, "cuda", None), "is_initialized", None)
    return bool(is_initialized()) if callable(is_initialized) else False


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit() -> str:
    """Short commit hash of the repository (with '+dirty' when benchmarks/ or fe_ray/ have local edits)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "fe_ray", "benchmarks"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment(threads: int, device: str) -> dict[str, Any]:
    """Machine and library facts recorded with every result."""
    info: dict[str, Any] = {
        "host": socket.gethostname(), "cpu": cpu_model(), "cores_available": available_cores(),
        "thread_budget": threads, "device": device, "python": platform.python_version(),
        "platform": platform.platform(), "git_commit": git_commit(),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average_at_end": load_average(), "driver_malloc": _MALLOC,
    }
    try:
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
        info["ram_gib"] = round(mem_kb / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    for module in ("torch", "tensorflow", "ray", "numpy"):
        if module in sys.modules:
            info[f"{module}_version"] = getattr(sys.modules[module], "__version__", "?")
    if device == "cuda":
        import torch

        info["gpu"] = torch.cuda.get_device_name(0)
    return info


# ---------------------------------------------------------------------------------------------------- arguments
def base_parser(description: str) -> argparse.ArgumentParser:
    """Arguments every benchmark accepts: --quick, --device, --threads, --repeats, --no-save."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny sizes and 2 repeats: a smoke run of seconds")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="cuda when available under auto; falls back to cpu with a note")
    parser.add_argument("--threads", type=int, default=0,
                        help="total intra-op thread budget (0 = all available cores); replicas share it")
    parser.add_argument("--repeats", type=int, default=0, help="alternating repeats (0 = script default)")
    parser.add_argument("--no-save", action="store_true",
                        help="do not write benchmarks/results/<name>.json (a --json-out PATH is still written)")
    parser.add_argument("--json-out", default="", metavar="PATH",
                        help="write the JSON to PATH instead of benchmarks/results/<name>.json")
    parser.add_argument("--glibc-defaults", action="store_true",
                        help="this process keeps glibc's malloc defaults, as a hand-written script's would "
                             "(fe_ray's replicas keep their settings); by default it gets fe_ray's training settings "
                             "(fe_ray.allocator)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                        help="first wait up to S seconds for other processes to go idle (shared machines)")
    return parser


# ---------------------------------------------------------------------------------------------------- measuring
@dataclass
class Series:
    """Repeated measurements of one variant (one value per repeat)."""

    name: str
    unit: str
    values: list[float] = field(default_factory=list)
    higher_is_better: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def spread(self) -> float:
        """(max - min) / median, the relative spread over repeats."""
        if len(self.values) < 2 or not self.median:
            return 0.0
        return (max(self.values) - min(self.values)) / abs(self.median)

    def to_json(self) -> dict[str, Any]:
        return {"unit": self.unit, "median": self.median, "values": self.values, "repeats": len(self.values),
                "min": min(self.values) if self.values else None, "max": max(self.values) if self.values else None,
                "higher_is_better": self.higher_is_better, **({"extra": self.extra} if self.extra else {})}


def alternate(variants: Mapping[str, Callable[[], float]], repeats: int, unit: str, higher_is_better: bool = True,
              log: Callable[[str], None] | None = print, quiet_wait_s: float = 0.0) -> dict[str, Series]:
    """Run each variant once per repeat, rotating the order each repeat; return the series per variant.

    Args:
        variants: name -> zero-argument callable returning one measurement (already warmed up by the caller).
        repeats: Number of rounds.
        unit: Unit of the measurements (for tables/JSON).
        higher_is_better: Whether larger measurements are better (throughput) or worse (time).
        log: Progress printer (None for silence).
        quiet_wait_s: Before each repeat, wait up to this long for other processes to go idle (0: never wait).
    """
    names = list(variants)
    series = {name: Series(name, unit, higher_is_better=higher_is_better) for name in names}
    for rep in range(repeats):
        if quiet_wait_s > 0:
            wait_for_quiet(quiet_wait_s, log=log or (lambda _msg: None))
        shift = rep % len(names)
        order = names[shift:] + names[:shift]
        for name in order:
            series[name].values.append(float(variants[name]()))
        if log is not None:
            log(f"  repeat {rep + 1}/{repeats}: " + ", ".join(f"{n}={series[n].values[-1]:.4g}" for n in names))
    return series


#: What :func:`metered` records per call, divided by the call's steps: the calling thread's wall and CPU time (us),
#: its minor page faults, and its voluntary and involuntary context switches (Linux ``RUSAGE_THREAD``).
METER_KEYS = ("wall_us", "cpu_us", "minor_faults", "voluntary_switches", "involuntary_switches")


def metered(fn: Callable[[], float], steps: int, into: list[dict[str, float]]) -> Callable[[], float]:
    """``fn`` wrapped so that each call appends, to ``into``, what the calling thread spent per step (METER_KEYS).

    On a GPU, CPU time close to the wall time says the thread worked (or spin-waited in the driver) the whole step;
    page faults and switches say where a thread that runs cold pays. Without ``RUSAGE_THREAD`` (not Linux) the
    three counts read 0: only the times are measured.
    """
    import resource

    who = getattr(resource, "RUSAGE_THREAD", None)

    def usage() -> tuple[float, ...]:
        if who is None:
            return (0.0, 0.0, 0.0)
        ru = resource.getrusage(who)
        return (ru.ru_minflt, ru.ru_nvcsw, ru.ru_nivcsw)

    def call() -> float:
        before, wall, cpu = usage(), time.perf_counter(), time.thread_time()
        value = fn()
        wall, cpu, after = time.perf_counter() - wall, time.thread_time() - cpu, usage()
        counts = [(b - a) / steps for a, b in zip(before, after)]
        into.append(dict(zip(METER_KEYS, (1e6 * wall / steps, 1e6 * cpu / steps, *counts))))
        return value

    return call


class Timer:
    """``with Timer() as t: ...`` then ``t.seconds``."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.start


def ratio(series: Mapping[str, Series], numerator: str, denominator: str, best: bool = False,
          paired: bool = False) -> float | None:
    """median(numerator) / median(denominator), or None when either is missing.

    With ``best``, the ratio of the best repeats instead (max for throughputs, min for times): on a shared
    machine, contention only ever slows a repeat down, so best-of-n is the contention-robust companion figure.
    With ``paired``, the median of the per-repeat ratios: both variants of one repeat ran within seconds of each
    other, so contention that lasts longer than that (the usual kind on a shared VM) slows both and cancels.
    """
    if numerator not in series or denominator not in series or not series[denominator].median:
        return None
    if best:
        pick = max if series[numerator].higher_is_better else min
        return pick(series[numerator].values) / pick(series[denominator].values)
    if paired:
        pairs = per_repeat_ratios(series, numerator, denominator)
        return statistics.median(pairs) if pairs else None
    return series[numerator].median / series[denominator].median


def median_interval(values: Sequence[float], confidence: float = 0.9) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of ``values``, or None when there are too few.

    The interval runs from the k-th smallest to the k-th largest value, with the largest k for which the chance
    that the true median lies outside it is at most ``1 - confidence``: each value falls below the median with
    probability 1/2, so the count below it is Binomial(n, 1/2). No shape is assumed for the noise, which on a
    shared VM is far from normal (long tails from other tenants). Five values are the fewest for 90%.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1, e.g. 0.9.")
    ordered = sorted(values)
    n = len(ordered)
    # P(median < x_(k)) = P(Binomial(n, 1/2) <= k - 1); the two tails together must stay within 1 - confidence.
    tail, k = 0.0, 0
    while k < n // 2:
        tail += math.comb(n, k) / 2**n
        if 2 * tail > 1.0 - confidence:
            break
        k += 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k]


def paired_interval(series: Mapping[str, Series], numerator: str, denominator: str,
                    confidence: float = 0.9) -> tuple[float, float] | None:
    """:func:`median_interval` of the per-repeat ratios numerator/denominator (the paired ratio's uncertainty)."""
    if numerator not in series or denominator not in series:
        return None
    return median_interval(per_repeat_ratios(series, numerator, denominator), confidence)


def per_repeat_ratios(series: Mapping[str, Series], numerator: str, denominator: str) -> list[float]:
    """numerator / denominator of each repeat (both ran within seconds of each other), skipping zero denominators."""
    return [n / d for n, d in zip(series[numerator].values, series[denominator].values) if d]


def interval_verdict(interval: tuple[float, float] | None, target: float) -> str:
    """Where a ``>=`` target lies against a confidence interval: whether the run can tell met from missed."""
    if interval is None:
        return "too few repeats"
    low, high = interval
    if low >= target:
        return "met beyond noise"
    if high < target:
        return "missed beyond noise"
    return "within noise"


# ---------------------------------------------------------------------------------------------------- reporting
def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain monospace table (also valid GitHub markdown)."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    return "\n".join([line, sep, *body])


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return "n/a" if value is None else str(value)


def series_table(series: Mapping[str, Series], labels: Mapping[str, str] | None = None) -> str:
    """Table of median/min/max/spread/repeats for a set of series."""
    rows = []
    for name, s in series.items():
        rows.append([labels.get(name, name) if labels else name, s.median, min(s.values) if s.values else None,
                     max(s.values) if s.values else None, f"{100 * s.spread():.0f}%", len(s.values), s.unit])
    return format_table(rows, ["variant", "median", "min", "max", "spread", "n", "unit"])


def ratio_table(checks: Sequence[tuple[str, float | None, float | None, str]]) -> str:
    """Rows of (label, measured ratio, target, comparison '>=' or '<=') with a met/missed verdict."""
    rows = []
    for label, value, target, op in checks:
        if value is None:
            verdict = "not run"
        elif target is None:
            verdict = "-"
        else:
            met = value >= target if op == ">=" else value <= target
            verdict = "MET" if met else "MISSED"
        rows.append([label, value, f"{op} {target}" if target is not None else "-", verdict])
    return format_table(rows, ["ratio", "measured", "target", "verdict"])


def write_json(name: str, payload: Mapping[str, Any], enabled: bool = True, path: str | Path = "") -> Path | None:
    """Write ``payload`` to ``path``, or else, when ``enabled``, to benchmarks/results/<name>.json; return the path
    written (None if none). ``enabled`` governs the default location only: a path asked for is always written.

    The file is replaced in one step (written beside it, then renamed), so a run stopped in the middle (a timeout,
    the device suite's budget) leaves the previous complete file or none, never a truncated one."""
    if not path and not enabled:
        return None
    path = Path(path) if path else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    partial.replace(path)
    return path


def save_results(name: str, payload: Mapping[str, Any], args: argparse.Namespace) -> Path | None:
    """:func:`write_json` as the common flags ask (``--no-save``, ``--json-out``), saying where it went."""
    path = write_json(name, payload, not args.no_save, args.json_out)
    if path:
        print(f"\nwrote {path}")
    return path


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (for gloo rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_cpu_s(stat_path: str | os.PathLike[str]) -> float:
    """User + system CPU seconds from a /proc stat file (a process's, or one thread's under /proc/<pid>/task)."""
    fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ended_threads_cpu_s(pid: int | str = "self") -> float:
    """CPU seconds of the threads of process ``pid`` that have ended: the process total minus the sum over its live
    threads. A difference over some work counts exactly the threads that work started and ended (e.g. one per file
    written)."""
    live = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            live += proc_cpu_s(task / "stat")
        except OSError:  # ended while we looked: its time is in the process total, as it should be
            pass
    return proc_cpu_s(f"/proc/{pid}/stat") - live


def per_op(fn: Callable[[], Any], iters: int) -> float:
    """Mean seconds of ``fn`` over ``iters`` calls."""
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def init_ray(num_cpus: int) -> Any:
    """Start (or reuse) a local Ray instance with ``num_cpus`` logical CPUs, quietly.

    Every worker runs the step probe's setup hook (:data:`benchmarks.step_probe.SETUP_HOOK`), which does nothing
    unless a worker's runtime environment asks it to record (:func:`benchmarks.step_probe.runtime_env`). Workers
    import it at start-up, before Ray adds the driver's directories to their import path, so the job's PYTHONPATH
    starts with the folder holding ``benchmarks`` (an actor's own PYTHONPATH, as fe_ray's replicas set, replaces it).
    """
    import ray

    from benchmarks.step_probe import SETUP_HOOK

    for key in _THREAD_ENV:  # let Ray set OMP_NUM_THREADS = num_cpus per actor (see set_thread_budget)
        os.environ.pop(key, None)
    if not ray.is_initialized():
        paths = [str(Path(__file__).resolve().parent.parent), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        env = {"worker_process_setup_hook": SETUP_HOOK,
               "env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in paths if p))}}
        # A Ray of the benchmark's own (address="local"): not a cluster named by RAY_ADDRESS, nor a stale one.
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR", configure_logging=True, runtime_env=env)
    return ray
