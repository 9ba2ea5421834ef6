"""Checkpoint save/restore time and training stall for a ~100M-parameter torch model + Adam state.

Side by side, alternating, in one run (seconds; lower is better):

    raw_write        dd-like: the same byte count as the torch.save file, 64 MiB chunks, then fsync (disk speed)
    torch_save       torch.save({"model": state_dict, "optimizer": state_dict}) + fsync
    fe_save          fe_ray's synchronous path, as RestoreWizard runs it: System.capture_state(copy_models=False)
                     -> CheckpointStore.save(write_checkpoint) (fsync + atomic commit included)
    memcopy          one in-memory copy of the same state (torch clone of weights + Adam moments): the least a
                     snapshot-then-write-in-background save must block training for
    fe_capture       fe_ray's copying in-memory snapshot alone (System.capture_state()): what the ``thread`` save
                     below blocks for
    raw_read         cold read of the torch.save file (page cache dropped with posix_fadvise) (disk speed)
    torch_restore    cold torch.load + model/optimizer load_state_dict
    fe_restore       cold fe_ray read_checkpoint + System.restore_state
    fe_sync          (CPU, with Ray) what a distributed fit does at every epoch end: rank 0's state pulled into the
                     driver's models (RayNetwork.sync_models_to_driver of the fe_replica path's replica, below)

Background saves, outside the alternation (they need a training loop running meanwhile): ``fe_replica`` is a
distributed run's save, ``RestoreWizard.save()`` on a one-replica RayNetwork whose replica holds the same model
and state and keeps training a LeNet (see benchmarks/replica_save.py: replica rank 0 copies its state into reused
buffers and its writer thread writes it); ``fe_thread`` is fe_ray's in-process one as RestoreWizard drives it
without Ray (BackgroundSaver: a parallel copy into snapshot buffers reused from save to save, a writer thread);
``thread`` measures the obvious in-process one (a fresh copying capture_state on the training thread, written by a
new thread). All time training steps of a small model running concurrently (in this process, or on the replica),
so contention with the writer counts as stall too. Each kind is run once before the repeats (Ray and replica
start, first touch of the buffers); that first save is reported separately.

Peak extra resident memory of each operation (sampled every 5 ms) is reported too: 100M fp32 parameters are
400 MB of weights and 800 MB of Adam moments, and every extra copy costs 1.2 GB.

Run: ``python -m benchmarks.checkpoint [--params 100e6] [--dir /path] [--quick]``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import harness

CHUNK = 64 << 20


class PeakRSS:
    """Sample this process's resident set every 5 ms; ``peak_extra`` = max RSS - RSS at start (bytes)."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def __enter__(self) -> PeakRSS:
        self.start = self.rss()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.rss())

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def peak_extra(self) -> int:
        return self.peak - self.start


def big_model_fn(params: float) -> Callable[[], Any]:
    """A stack of 10 square Linear layers with about ``params`` parameters in total."""
    width = int(round((params / 10) ** 0.5))

    def make() -> Any:
        import torch

        torch.manual_seed(0)
        return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(10)])

    return make


def populate_adam(model: Any, optimizer: Any) -> None:
    """One Adam step with small gradients so exp_avg/exp_avg_sq exist (full optimizer state)."""
    import torch

    for p in model.parameters():
        p.grad = torch.full_like(p, 1e-3)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def fsync_path(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cache(root: str | Path) -> None:
    """Evict every file under ``root`` from the page cache (clean pages only: call after fsync)."""
    root = Path(root)
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def dir_bytes(root: str | Path) -> int:
    root = Path(root)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class Bench:
    """Holds the model, the fe_ray System and the paths; each method is one timed operation (seconds)."""

    def __init__(self, params: float, workdir: Path, device: str = "cpu", threads: int | None = None) -> None:
        import torch

        import fe_ray as fe

        self.torch = torch
        self.params = params
        self.workdir = workdir
        self.device = device
        self.threads = threads or harness.available_cores()
        self.model = fe.build(model_fn=big_model_fn(params), optimizer_fn="adam", model_name="big")
        if device == "cuda":
            self.model.to(device)  # before the first optimizer step, so the Adam moments live on the GPU too
        self.optimizer = self.model.current_optimizer
        populate_adam(self.model, self.optimizer)
        self.num_params = sum(p.numel() for p in self.model.parameters())
        self.torch_path = workdir / "torch" / "state.pt"
        self.torch_path.parent.mkdir(parents=True)
        self.raw_path = workdir / "raw.bin"
        self.fe_root = workdir / "fe_store"
        self.peaks: dict[str, list[int]] = {}
        self.system = self._make_system()
        self.torch_save()
        self.nbytes = self.torch_path.stat().st_size
        self.buffer = os.urandom(CHUNK)

    def _make_system(self) -> Any:
        """An fe_ray System over a real in-process Network holding the big model (ops: ModelOp/CE/UpdateOp)."""
        import fe_ray as fe
        from fe_ray.op.tensorop.loss import CrossEntropy
        from fe_ray.op.tensorop.model import ModelOp, UpdateOp
        from fe_ray.summary.system import System

        network = fe.Network(ops=[ModelOp(model=self.model, inputs="x", outputs="y_pred"),
                                  CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                                  UpdateOp(model=self.model, loss_name="ce")])

        class _NoPipeline:
            data: dict[str, Any] = {}

        return System(network=network, pipeline=_NoPipeline())

    def _peak(self, name: str, fn: Callable[[], Any]) -> float:
        with PeakRSS() as mem:
            start = time.perf_counter()
            fn()
            seconds = time.perf_counter() - start
        self.peaks.setdefault(name, []).append(mem.peak_extra)
        return seconds

    # ------------------------------------------------------------------ saves
    def raw_write(self) -> float:
        def run() -> None:
            fd = os.open(self.raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                left = self.nbytes
                view = memoryview(self.buffer)
                while left > 0:
                    left -= os.write(fd, view[:min(left, CHUNK)])
                os.fsync(fd)
            finally:
                os.close(fd)
        seconds = self._peak("raw_write", run)
        drop_cache(self.raw_path)
        return seconds

    def torch_save(self) -> float:
        def run() -> None:
            state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
            with open(self.torch_path, "wb") as f:
                self.torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
        seconds = self._peak("torch_save", run)
        drop_cache(self.torch_path)
        return seconds

    def fe_save(self) -> float:
        from fe_ray.io.checkpoint import CheckpointStore
        from fe_ray.io.state_files import write_checkpoint

        store = CheckpointStore(str(self.fe_root), keep=1)

        def run() -> None:
            payload = self.system.capture_state(copy_models=False)
            store.save(lambda directory: write_checkpoint(payload, directory))
        seconds = self._peak("fe_save", run)
        drop_cache(self.fe_root)
        return seconds

    # ------------------------------------------------------------------ in-memory snapshots (the stall)
    def memcopy(self) -> float:
        def run() -> None:
            torch = self.torch
            # To host memory: a snapshot that outlives the next optimizer step (a GPU run copies device -> host).
            weights = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            moments = {i: {k: v.to("cpu", copy=True) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                       for i, s in enumerate(self.optimizer.state.values())}
            del weights, moments
        return self._peak("memcopy", run)

    def fe_capture(self) -> float:
        return self._peak("fe_capture", lambda: self.system.capture_state())

    # ------------------------------------------------------------------ restores (cold)
    def raw_read(self) -> float:
        drop_cache(self.torch_path)

        def run() -> None:
            with open(self.torch_path, "rb", buffering=0) as f:
                buf = bytearray(CHUNK)
                while f.readinto(buf):
                    pass
        return self._peak("raw_read", run)

    def torch_restore(self) -> float:
        drop_cache(self.torch_path)

        def run() -> None:
            state = self.torch.load(self.torch_path, map_location=self.device, weights_only=True)
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        return self._peak("torch_restore", run)

    def fe_sync(self) -> float:
        """The epoch-end pull of a distributed fit: rank 0's state into the driver's models (sync_models_to_driver)
        of the ``fe_replica`` path's one-replica network, which holds the same model and state."""
        network = self.replica_save().network
        return self._peak("fe_sync", network.sync_models_to_driver)

    def fe_restore(self) -> float:
        from fe_ray.io.checkpoint import CheckpointStore

        latest = CheckpointStore(str(self.fe_root), keep=1).latest()
        if latest is None:
            raise RuntimeError("no fe_ray checkpoint to restore")
        drop_cache(self.fe_root)

        def run() -> None:
            self.system.load_state(latest)  # read_checkpoint + restore_state, as RestoreWizard resumes
        return self._peak("fe_restore", run)

    # ------------------------------------------------------------------ background write (stall + interference)
    def background(self, kind: str, step_fn: Callable[[], None], baseline_step_s: float) -> dict[str, float]:
        """A save that writes in the background while ``step_fn`` trains; returns its costs to training.

        kind "thread": capture_state on the training thread, CheckpointStore.save(write_checkpoint) in a thread.
        kind "fe_thread": fe_ray's BackgroundSaver (capture_state into reused buffers, its writer thread writes).
        kind "fe_replica": RestoreWizard.save() of a distributed run (replica rank 0 copies and writes its state).

        ``blocked_s`` is the time before training can resume; ``slowdown_s`` the extra time the training steps
        run meanwhile took over their undisturbed median (CPU/memory-bandwidth contention with the writer);
        ``stall_s`` = blocked + slowdown, the training time lost to the save. The slowdown is a small difference of
        two large times (a 1 ms error in the median step is 1.5 s over a 15 s write), so the writer's own CPU time
        (``writer_cpu_s``: its writer thread's and the direct-I/O threads', from /proc) is recorded too: on a
        machine whose cores training keeps busy, that CPU is what the write takes from training.
        """
        # Re-measure the undisturbed step right before this save: on a shared machine a baseline taken once
        # drifts, and the slowdown estimate goes negative.
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            step_fn()
            times.append(time.perf_counter() - t0)
        baseline_step_s = statistics.median(times)
        cpu_before = self.writer_cpu(kind)  # outside the timing
        start = time.perf_counter()
        done = self.start_save(kind)
        blocked = time.perf_counter() - start
        return self._train_during_write(kind, step_fn, start, blocked, done, baseline_step_s, cpu_before)

    def start_save(self, kind: str) -> Callable[[], bool]:
        """Start a background save of ``kind`` (see :meth:`background`); returns once training may go on, with a
        predicate telling whether the write has finished."""
        from fe_ray.io.checkpoint import CheckpointStore
        from fe_ray.io.state_files import write_checkpoint

        if kind == "fe_replica":
            return self.replica_save().start_save()
        if kind == "fe_thread":
            future = self.background_saver().save(CheckpointStore(str(self.fe_root), keep=1),
                                                  lambda buffers: self.system.capture_state(buffers=buffers))
            return future.done
        # The thread writes while training goes on, so it needs its own copy.
        payload = self.system.capture_state()
        store = CheckpointStore(str(self.fe_root), keep=1)
        writer = threading.Thread(target=lambda: store.save(lambda d: write_checkpoint(payload, d)))
        writer.start()
        return lambda: not writer.is_alive()

    def paired_stall(self, kind: str, step_fn: Callable[[], None], window_steps: int, save_first: bool,
                     lead_steps: int = 5) -> dict[str, float]:
        """The stall of one save as a paired difference: ``window_steps`` training steps with a save started after
        ``lead_steps`` of them, against the same number of steps without one, run back to back (in the order
        ``save_first`` says). The window is sized to outlast the write, so blocking, contention and the writer's
        CPU all land inside it; no per-step baseline is needed."""
        def window(with_save: bool) -> tuple[float, bool]:
            done: Callable[[], bool] = lambda: True  # noqa: E731
            start = time.perf_counter()
            for index in range(window_steps):
                if with_save and index == lead_steps:
                    done = self.start_save(kind)
                step_fn()
            seconds = time.perf_counter() - start
            finished = done()
            while not done():  # not counted: the window was too short (reported)
                time.sleep(0.01)
            return seconds, finished

        arms = {}
        for with_save in ((True, False) if save_first else (False, True)):
            arms[with_save] = window(with_save)
        drop_cache(self.fe_root)
        return {"stall_s": arms[True][0] - arms[False][0], "window_s": arms[False][0],
                "write_inside_window": float(arms[True][1])}

    def writer_cpu(self, kind: str) -> float:
        """CPU seconds used so far by the writer of ``kind`` (NaN where it is not measured)."""
        if kind == "fe_thread":
            return self.saver_thread_cpu_s()
        if kind == "fe_replica":
            return self.replica_save().writer_cpu_s()
        return float("nan")

    def _train_during_write(self, kind: str, step_fn: Callable[[], None], start: float, blocked: float,
                            done: Callable[[], bool], baseline_step_s: float, cpu_before: float) -> dict[str, float]:
        steps = 0
        while not done():
            step_fn()
            steps += 1
        total = time.perf_counter() - start
        writer_cpu = self.writer_cpu(kind) - cpu_before
        drop_cache(self.fe_root)
        lost = total - blocked - steps * baseline_step_s
        return {"blocked_s": blocked, "write_wall_s": total, "steps_during_write": steps,
                "baseline_step_s": baseline_step_s, "slowdown_s": lost, "stall_s": blocked + max(lost, 0.0),
                "writer_cpu_s": writer_cpu}

    def background_saver(self) -> Any:
        if not hasattr(self, "_saver"):
            from fe_ray.io.background_save import BackgroundSaver

            self._saver = BackgroundSaver()
        return self._saver

    def saver_thread_cpu_s(self) -> float:
        """CPU seconds the BackgroundSaver's writer thread has used so far (NaN before its first save), plus those of
        every thread of this process that has ended: the direct-I/O thread of each file it wrote (one per file,
        gone once the file is closed, so a difference over a write counts exactly the ones it started)."""
        saver = self.background_saver()
        if saver._executor is None:
            return float("nan")
        if not hasattr(self, "_saver_tid"):
            self._saver_tid = saver._executor.submit(threading.get_native_id).result(timeout=60)
        return harness.proc_cpu_s(f"/proc/self/task/{self._saver_tid}/stat") + harness.ended_threads_cpu_s()

    def replica_save(self) -> Any:
        """The ``fe_replica`` path's one-replica RayNetwork (built on first use; see benchmarks/replica_save.py)."""
        if not hasattr(self, "_replica"):
            from benchmarks.replica_save import ReplicaSave

            self._replica = ReplicaSave(big_model_fn(self.params), self.workdir / "fe_replica", self.threads)
        return self._replica


def small_trainer(device: str = "cpu") -> tuple[Callable[[], None], float]:
    """A LeNet training step to run during background writes, and its undisturbed median step time."""

    from benchmarks.baselines import PlainTorchTrainer
    from benchmarks.models import synthetic_data

    trainer = PlainTorchTrainer("lenet", device)
    data = synthetic_data("lenet", 32)

    def step() -> None:
        float(trainer.step(data["x"], data["y"]).detach())  # waits for the step (cuda) like a logged loss

    for _ in range(10):
        step()
    times = []
    for _ in range(50):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return step, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--params", type=float, default=100e6, help="model size in parameters (default 100e6)")
    parser.add_argument("--dir", default="", help="directory to write into (default: a temp dir under /tmp)")
    parser.add_argument("--paths", default="",
                        help="background save paths to run, comma-separated (default: all of thread, fe_thread, "
                             "fe_replica)")
    parser.add_argument("--paired-repeats", type=int, default=0,
                        help="repeats of the paired-window stall per path (default: max(repeats, 5))")
    args = parser.parse_args(argv)
    params = 2e6 if args.quick else args.params
    repeats = args.repeats or (2 if args.quick else 3)
    threads = args.threads or harness.available_cores()
    harness.set_thread_budget(threads)
    device, note = harness.resolve_device(args.device)
    if note:
        print(note)
    if device == "cuda":
        print("NOTE: model and Adam state live on the GPU; every save includes the device -> host copy.")
    workdir = Path(tempfile.mkdtemp(prefix="fe_ray_ckpt_bench_", dir=args.dir or None))
    bench: Bench | None = None
    try:
        bench = Bench(params, workdir, device, threads)
        gib = bench.nbytes / 2**30
        print(f"model: {bench.num_params:,} params + Adam state; torch.save file {bench.nbytes:,} bytes "
              f"({gib:.2f} GiB); dir {workdir}; threads={threads}; repeats={repeats}")
        ops = {"raw_write": bench.raw_write, "torch_save": bench.torch_save, "fe_save": bench.fe_save,
               "memcopy": bench.memcopy, "fe_capture": bench.fe_capture, "raw_read": bench.raw_read,
               "torch_restore": bench.torch_restore, "fe_restore": bench.fe_restore}
        if device == "cpu" and "fe_replica" in (args.paths or "fe_replica"):
            try:
                bench.fe_sync()  # warm-up: starts Ray and the replica; the driver's optimizer gets its state
                ops["fe_sync"] = bench.fe_sync
            except Exception as err:  # noqa: BLE001 - e.g. no Ray on this machine
                print(f"fe_sync not run: {type(err).__name__}: {err}")
        bench.fe_save()  # warm-up: creates the fe checkpoint that fe_restore reads
        for name in ops:
            bench.peaks.pop(name, None)
        series = harness.alternate(ops, repeats, "s", higher_is_better=False, quiet_wait_s=args.wait_quiet)
        fe_bytes = dir_bytes(bench.fe_root)
        print(harness.series_table(series))
        peak_rows = [[name, f"{max(v) / 2**30:.2f}", f"{max(v) / bench.nbytes:.2f}x"]
                     for name, v in bench.peaks.items()]
        print(harness.format_table(peak_rows, ["operation", "peak extra RSS GiB", "x state size"]))
        mb = bench.nbytes / 1e6
        rates = [[name, f"{mb / series[name].median:,.0f}"] for name in
                 ("raw_write", "torch_save", "fe_save", "raw_read", "torch_restore", "fe_restore")]
        print(harness.format_table(rates, ["operation", "MB/s (of the torch.save byte count)"]))
        # Background writes: stall and interference, measured separately (they need a concurrent training loop).
        step_fn, step_s = small_trainer(device)
        kinds = ["thread", "fe_thread", "fe_replica"]
        if args.paths:
            wanted = [kind.strip() for kind in args.paths.split(",") if kind.strip()]
            unknown = sorted(set(wanted) - set(kinds))
            if unknown:
                parser.error(f"--paths: unknown or unavailable path(s) {unknown}; choose from {kinds}")
            kinds = [kind for kind in kinds if kind in wanted]
        # Each path's training: a LeNet loop in this process, except fe_replica, whose replica trains one.
        steppers: dict[str, tuple[Callable[[], None], float]] = {kind: (step_fn, step_s) for kind in kinds}
        bg_runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        first_saves: dict[str, dict[str, float]] = {}
        for kind in list(kinds):  # warm-up: Ray start, writer actor start, first-touch of buffers
            try:
                if kind == "fe_replica" and device == "cpu":
                    replica = bench.replica_save()
                    steppers[kind] = (replica.step, replica.undisturbed_step_s())
                elif kind == "fe_replica":
                    raise RuntimeError("the replica path runs on the CPU only")
                first_saves[kind] = bench.background(kind, *steppers[kind])
            except Exception as err:  # noqa: BLE001 - e.g. no Ray on this machine
                print(f"background path {kind} not run: {type(err).__name__}: {err}")
                kinds.remove(kind)
                bg_runs.pop(kind)
        for rep in range(repeats):
            for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
                bg_runs[kind].append(bench.background(kind, *steppers[kind]))
        bg_med = {kind: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for kind, runs in bg_runs.items()}
        print(f"background saves (LeNet training steps of {step_s * 1e3:.1f} ms run during the write; fe_replica: "
              f"{steppers.get('fe_replica', (None, float('nan')))[1] * 1e3:.1f} ms steps on the replica), medians "
              f"of {repeats}:")
        print(harness.format_table([[kind, m["blocked_s"], m["slowdown_s"], m["stall_s"], m["writer_cpu_s"],
                                     m["write_wall_s"], m["steps_during_write"]] for kind, m in bg_med.items()],
                                   ["path", "blocked s", "slowdown s", "stall s", "writer CPU s", "write wall s",
                                    "steps"]))
        print("the first save of each path (before the repeats; fresh buffers, writer start):")
        print(harness.format_table([[kind, m["blocked_s"], m["slowdown_s"], m["stall_s"], m["write_wall_s"]]
                                    for kind, m in first_saves.items()],
                                   ["path", "blocked s", "slowdown s", "stall s", "write wall s"]))
        # The same stall as paired windows (with a save / without), sized from the longest write seen above.
        paired: dict[str, list[dict[str, float]]] = {}
        for kind in kinds:
            longest = max(r["write_wall_s"] for r in bg_runs[kind])
            kind_step_fn, kind_step_s = steppers[kind]
            window_steps = max(200, int(2 * longest / kind_step_s) + 5)
            paired[kind] = [bench.paired_stall(kind, kind_step_fn, window_steps, save_first=rep % 2 == 0)
                            for rep in range(args.paired_repeats or max(repeats, 5))]
        paired_med = {kind: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                      for kind, runs in paired.items()}
        print("paired windows (training steps with one save against as many without, back to back; medians):")
        print(harness.format_table([[kind, m["stall_s"], min(r["stall_s"] for r in paired[kind]),
                                     max(r["stall_s"] for r in paired[kind]), m["window_s"],
                                     f"{sum(r['write_inside_window'] for r in paired[kind]):.0f}/{len(paired[kind])}"]
                                    for kind, m in paired_med.items()],
                                   ["path", "stall s", "min", "max", "window s", "write inside"]))
        r = lambda a, b: harness.ratio(series, a, b)  # noqa: E731
        checks = [("fe_save/torch_save", r("fe_save", "torch_save"), 1.3, "<="),
                  ("fe_restore/torch_restore", r("fe_restore", "torch_restore"), 1.3, "<="),
                  ("torch_save/raw_write", r("torch_save", "raw_write"), None, "<="),
                  ("fe_capture/memcopy", r("fe_capture", "memcopy"), None, "<="),
                  ("fe_sync/memcopy", r("fe_sync", "memcopy") if "fe_sync" in series else None, None, "<="),
                  *[(f"{kind} stall / memcopy", m["stall_s"] / series["memcopy"].median, 1.0, "<=")
                    for kind, m in bg_med.items()],
                  *[(f"{kind} blocked / memcopy", m["blocked_s"] / series["memcopy"].median, None, "<=")
                    for kind, m in bg_med.items()],
                  *[(f"{kind} (blocked + writer CPU) / memcopy",
                     (m["blocked_s"] + m["writer_cpu_s"]) / series["memcopy"].median, 1.0, "<=")
                    for kind, m in bg_med.items() if kind in ("fe_replica", "fe_thread")],
                  # Only where every write ended inside its window; otherwise part of the write was not counted.
                  *[(f"{kind} paired stall / memcopy", m["stall_s"] / series["memcopy"].median
                     if all(r["write_inside_window"] for r in paired[kind]) else None, 1.0, "<=")
                    for kind, m in paired_med.items()],
                  ("sync fe_save stall / memcopy", r("fe_save", "memcopy"), 1.0, "<=")]
        print(harness.ratio_table(checks))
        payload = {"benchmark": "checkpoint", "environment": harness.environment(threads, device),
                   "args": vars(args), "num_params": bench.num_params, "torch_save_bytes": bench.nbytes,
                   "fe_checkpoint_bytes": fe_bytes, "series": {k: s.to_json() for k, s in series.items()},
                   "peak_extra_rss_bytes": {k: max(v) for k, v in bench.peaks.items()},
                   "background_write": {"runs": bg_runs, "median": bg_med, "first_save": first_saves,
                                        "paired": {"runs": paired, "median": paired_med}, "lenet_step_s": step_s},
                   "ratios": {label: {"value": v, "target": t} for label, v, t, _ in checks}}
        path = harness.write_json("checkpoint" + ("_cuda" if device == "cuda" else "")
                                  + ("_quick" if args.quick else ""), payload, not args.no_save)
        if path:
            print(f"wrote {path}")
    finally:
        if bench is not None and hasattr(bench, "_replica"):
            bench._replica.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
