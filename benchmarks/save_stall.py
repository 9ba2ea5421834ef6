"""Background checkpoint saves while training runs: how long training is blocked and what the write costs it.

Part of benchmarks/checkpoint.py (its docstring lists the paths: ``thread``, ``fe_thread``, ``fe_replica``).
:class:`StallBench` starts one background save of a path while a small model trains, and measures it two ways:
per save (blocked time, slowdown of the steps that ran during the write, the writer's CPU) and as paired windows
(the same number of training steps with a save and without one, back to back). :func:`run_background` runs every
path's warm-up save, repeats and paired windows, and prints their tables.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchmarks import harness
from benchmarks.disk import drop_cache

if TYPE_CHECKING:  # checkpoint.py imports this module
    from benchmarks.checkpoint import Bench

#: The background save paths, in the order they are run.
PATHS = ("thread", "fe_thread", "fe_replica")


def choose_paths(spec: str) -> list[str]:
    """The paths named in ``spec`` (comma-separated; empty: all of :data:`PATHS`), in run order.

    Raises:
        ValueError: For a name that is not one of :data:`PATHS`.
    """
    if not spec:
        return list(PATHS)
    wanted = [kind.strip() for kind in spec.split(",") if kind.strip()]
    unknown = sorted(set(wanted) - set(PATHS))
    if unknown:
        raise ValueError(f"--paths: unknown path(s) {unknown}; choose from {list(PATHS)}")
    return [kind for kind in PATHS if kind in wanted]


class StallBench:
    """The background-save measurements of a :class:`benchmarks.checkpoint.Bench` (its System, store and replica).

    Args:
        bench: Holds the model, the System, the checkpoint root and the ``fe_replica`` path's replica.
    """

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.system = bench.system
        self.fe_root = bench.fe_root

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
            return self.bench.replica_save().start_save()
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
            return self.bench.replica_save().writer_cpu_s()
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

    def close(self) -> None:
        """Finish a write in flight and stop the in-process writer thread."""
        if hasattr(self, "_saver"):
            self._saver.close()


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


def run_background(stall: StallBench, kinds: list[str], device: str, repeats: int,
                   paired_repeats: int) -> dict[str, Any]:
    """Every path's warm-up save, ``repeats`` alternating background saves and ``paired_repeats`` paired windows;
    prints their tables and returns them (``runs``, ``median``, ``first_save``, ``paired``, ``lenet_step_s``).

    A path that cannot run here (e.g. ``fe_replica`` without Ray) is reported and left out.
    """
    step_fn, step_s = small_trainer(device)
    kinds = list(kinds)
    # Each path's training: a LeNet loop in this process, except fe_replica, whose replica trains one.
    steppers: dict[str, tuple[Callable[[], None], float]] = {kind: (step_fn, step_s) for kind in kinds}
    bg_runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    first_saves: dict[str, dict[str, float]] = {}
    for kind in list(kinds):  # warm-up: Ray start, replica start, first touch of the buffers
        try:
            if kind == "fe_replica":
                replica = stall.bench.replica_save()
                steppers[kind] = (replica.step, replica.undisturbed_step_s())
            first_saves[kind] = stall.background(kind, *steppers[kind])
        except Exception as err:  # noqa: BLE001 - e.g. no Ray on this machine
            print(f"background path {kind} not run: {type(err).__name__}: {err}")
            kinds.remove(kind)
            bg_runs.pop(kind)
    for rep in range(repeats):
        for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
            bg_runs[kind].append(stall.background(kind, *steppers[kind]))
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
        paired[kind] = [stall.paired_stall(kind, kind_step_fn, window_steps, save_first=rep % 2 == 0)
                        for rep in range(paired_repeats)]
    paired_med = {kind: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for kind, runs in paired.items()}
    print("paired windows (training steps with one save against as many without, back to back; medians):")
    print(harness.format_table([[kind, m["stall_s"], min(r["stall_s"] for r in paired[kind]),
                                 max(r["stall_s"] for r in paired[kind]), m["window_s"],
                                 f"{sum(r['write_inside_window'] for r in paired[kind]):.0f}/{len(paired[kind])}"]
                                for kind, m in paired_med.items()],
                               ["path", "stall s", "min", "max", "window s", "write inside"]))
    return {"runs": bg_runs, "median": bg_med, "first_save": first_saves,
            "paired": {"runs": paired, "median": paired_med}, "lenet_step_s": step_s}
