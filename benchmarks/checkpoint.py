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
    fe_sync          (with Ray) what a distributed fit does at every epoch end: rank 0's state pulled into the
                     driver's models (RayNetwork.sync_models_to_driver of the fe_replica path's replica, below)

Background saves, outside the alternation (they need a training loop running meanwhile): ``fe_replica`` is a
distributed run's save, ``RestoreWizard.save()`` on a one-replica RayNetwork whose replica holds the same model
and state and keeps training a LeNet (see benchmarks/replica_save.py: replica rank 0 copies its state into reused
buffers and its writer thread writes it); ``fe_thread`` is fe_ray's in-process one as RestoreWizard drives it
without Ray (BackgroundSaver: a parallel copy into snapshot buffers reused from save to save, a writer thread);
``thread`` measures the obvious in-process one (a fresh copying capture_state on the training thread, written by a
new thread). All time training steps of a small model running concurrently (in this process, or on the replica),
so contention with the writer counts as stall too. Each kind is run once before the repeats (Ray and replica
start, first touch of the buffers); that first save is reported separately. benchmarks/save_stall.py runs these.
With ``--device cuda`` every path's state lives on the GPU (the replica's too), so each save includes the device ->
host copy.

Peak extra resident memory of each operation (sampled every 5 ms) is reported too: 100M fp32 parameters are
400 MB of weights and 800 MB of Adam moments, and every extra copy costs 1.2 GB.

Run: ``python -m benchmarks.checkpoint [--params 100e6] [--dir /path] [--quick]``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.disk import dir_bytes, drop_cache
from benchmarks.save_stall import StallBench, choose_paths, run_background

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

    def replica_save(self) -> Any:
        """The ``fe_replica`` path's one-replica RayNetwork (built on first use; see benchmarks/replica_save.py)."""
        if not hasattr(self, "_replica"):
            from benchmarks.replica_save import ReplicaSave

            self._replica = ReplicaSave(big_model_fn(self.params), self.workdir / "fe_replica", self.threads,
                                        self.device)
        return self._replica

    def close(self) -> None:
        """Stop the ``fe_replica`` path's replica, if one was started."""
        if hasattr(self, "_replica"):
            self._replica.close()



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
    harness.set_process_malloc(args.glibc_defaults)
    try:
        kinds = choose_paths(args.paths)  # checked before the minutes of work below
    except ValueError as err:
        parser.error(str(err))
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
        if "fe_replica" in kinds:
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
        stall = StallBench(bench)
        try:
            background = run_background(stall, kinds, device, repeats, args.paired_repeats or max(repeats, 5))
        finally:
            stall.close()
        bg_med, paired, paired_med = background["median"], background["paired"]["runs"], background["paired"]["median"]
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
                   "background_write": background,
                   "ratios": {label: {"value": v, "target": t} for label, v, t, _ in checks}}
        harness.save_results("checkpoint" + ("_cuda" if device == "cuda" else "") + ("_quick" if args.quick else ""),
                             payload, args)
    finally:
        if bench is not None:
            bench.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
