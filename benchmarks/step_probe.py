"""A benchmark probe that splits each distributed step into its phases, timed where they happen.

The driver sees a step on the default transport (the step stream) only as a whole: ``StepStream.run`` sends every
replica its slice and returns their answers. This probe stamps both ends with ``time.perf_counter``, whose clock
(CLOCK_MONOTONIC on Linux) is one clock for every process of a machine, so stamps taken in the driver and in a
replica on the same node compare directly:

- on the driver, :func:`driver_stamps` wraps ``StepStream.run`` and records when each step was called and when
  its answers were back;
- in each replica, :func:`install` (a Ray worker setup hook, see :func:`runtime_env`) wraps ``Replica.step`` and
  ``Replica.step_early``, the stream's entry points, and records when the replica started its part of the step,
  when its answer was ready and when the weight update it runs after answering was done, its thread's
  CPU time, the process's minor page faults during it (memory the allocator gave back and the step touched
  again) and the time the step spent inside the collective's all-reduce calls (see :func:`timed_allreduce`). At
  the end of each epoch (``Replica.exit_context``) it appends them to the file named by
  :data:`LOG_ENV`, so nothing is written during the timed steps; :func:`collect` reads them on the driver.

:func:`breakdown` then gives, per step: ``to_replicas`` (pickling and sending the slices, the replicas' wake-up,
reading and unpickling them, and what was left of the previous step's weight update), ``replica`` (the replicas'
own step up to their answer: copying the slice into owned memory, the Network step with its all-reduce, or up to
the weight update where that follows the answer, outputs to numpy; ``replica_allreduce`` says how long each
replica spent in the all-reduce, waiting for the slowest replica included), ``back`` (pickling and sending the
answers, the driver's wake-up, reading them; also what is left of the driver's overlap work, the following batch,
if that outlasts the replicas' step) and ``driver`` (from the answers to the next step's call: merging, traces, the
Estimator's bookkeeping).

This is for the benchmarks only: fe_ray has no such hook, and nothing changes in a process without the variable.
Ray runs a ``worker_process_setup_hook`` given to ``ray.init`` only (a per-actor runtime environment's is
ignored), so :func:`benchmarks.harness.init_ray` names :data:`SETUP_HOOK` in the job's runtime environment for every
worker it starts (a no-op in the many without the variable), and :func:`runtime_env` sets only the variable, in
the replicas' own runtime environment, whose variables Ray adds to the job's. If the hook does not run,
:func:`collect` says so rather than report nothing.
"""

from __future__ import annotations

import cProfile
import functools
import os
import resource
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOG_ENV = "FE_RAY_BENCH_STEP_LOG"
#: With this variable also set (a path prefix), each replica runs its steps under cProfile and writes the profile of
#: its last context's steps to ``<prefix>.rank<r>`` when the context ends (``benchmarks.profile_step --replica``).
PROFILE_ENV = "FE_RAY_BENCH_STEP_PROFILE"
#: The Ray worker setup hook (``runtime_env={"worker_process_setup_hook": ...}`` of ``ray.init``).
SETUP_HOOK = f"{__name__}.install"
PHASES = ("to_replicas", "replica", "back", "driver")


# ------------------------------------------------------------------------------------------------- replica side
def runtime_env(log_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Ray runtime environment for replicas that record their step stamps into ``log_path``.

    The stamps are taken by :data:`SETUP_HOOK`, which must be in Ray's job runtime environment (``ray.init``, as
    :func:`benchmarks.harness.init_ray` does).
    """
    return {"env_vars": {LOG_ENV: os.fspath(log_path)}}


def timed_allreduce(spent: list[float]) -> None:
    """Add the seconds of every all-reduce call of fe_ray's collectives in this process to ``spent[0]``.

    Wraps the one call each framework's gradient reducer makes per bucket: ``TorchCollective.allreduce_tensor_``
    (torch) and ``TcpCollective.allreduce_sum`` (TF). Gloo and the TCP collective return once every rank has
    joined and the sum is in, so the time includes waiting for the slowest replica; NCCL returns once the
    reduction is queued on the GPU, so there it is only the launch (the GPU's wait shows later, where the step
    first reads a result).
    """
    from fe_ray.distributed.collective import TcpCollective, TorchCollective

    def timed(method: Any) -> Any:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start
        return wrapper

    TorchCollective.allreduce_tensor_ = timed(TorchCollective.allreduce_tensor_)  # type: ignore[method-assign]
    TcpCollective.allreduce_sum = timed(TcpCollective.allreduce_sum)  # type: ignore[method-assign]


def install() -> None:
    """Wrap ``Replica.step``, ``Replica.step_early``, ``Replica.exit_context`` and the collectives' all-reduce in
    this process (a no-op without :data:`LOG_ENV`).

    A step answered before its weight update (``step_early``) is stamped when its answer is ready (``end``) and
    when the update that follows the answer is done (``finished``); its CPU time, faults and all-reduce time cover
    both parts. Other steps have ``finished == end``.
    """
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    from fe_ray.distributed.replica import Replica
    from fe_ray.distributed.step_stream import StepReply

    step, step_early, exit_context = Replica.step, Replica.step_early, Replica.exit_context
    rows: list[tuple[float, float, float, int, float, float]] = []
    allreduce_s = [0.0]
    timed_allreduce(allreduce_s)
    profile_prefix = os.environ.get(PROFILE_ENV)
    profiler = [cProfile.Profile()] if profile_prefix else []

    def stamped(run: Any) -> Any:
        def stamped_step(self: Replica, args: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            allreduce_s[0] = 0.0

            def record(end: float, finished: float) -> None:
                if profiler:
                    profiler[0].disable()
                rows.append((start, end, time.thread_time() - cpu,
                             resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, allreduce_s[0], finished))

            if args is None:  # the transport's warm-up call, not a step
                return run(self, args)
            if profiler:
                profiler[0].enable()
            result = then = None
            try:
                result = run(self, args)
            finally:
                end = time.perf_counter()
                then = result.then if isinstance(result, StepReply) else None
                if then is None:  # answered after all of its work (or failed)
                    record(end, end)
            if then is None:
                return result

            def stamped_then() -> None:
                try:
                    then()
                finally:
                    record(end, time.perf_counter())

            return StepReply(result.value, stamped_then)

        return stamped_step

    def flushing_exit_context(self: Replica) -> Any:
        result = exit_context(self)
        lines = "".join(f"{self.rank} {start:.9f} {end:.9f} {cpu:.9f} {faults} {allreduce:.9f} {finished:.9f}\n"
                        for start, end, cpu, faults, allreduce, finished in rows)
        rows.clear()
        if profiler:  # this context's steps only: a fresh profile for the next one
            profiler[0].dump_stats(f"{profile_prefix}.rank{self.rank}")
            profiler[0] = cProfile.Profile()
        with open(path, "a") as log:
            log.write(f"{lines}{self.rank} end\n")
        return result

    Replica.step = stamped(step)  # type: ignore[method-assign]
    Replica.step_early = stamped(step_early)  # type: ignore[method-assign]
    Replica.exit_context = flushing_exit_context  # type: ignore[method-assign]


def collect(log_path: str | os.PathLike[str], replicas: int, timeout_s: float = 10.0) -> dict[int, list[tuple]]:
    """Read and clear one epoch's stamps of ``replicas`` replicas:
    ``{rank: [(start, end, cpu_s, faults, allreduce_s, finished), ...]}``.

    Replicas leave their context asynchronously (the driver does not wait for it), so this waits up to
    ``timeout_s`` for every replica's end-of-epoch line.

    Raises:
        TimeoutError: Not every replica wrote its stamps in time (the setup hook did not run in them).
    """
    path = Path(log_path)
    deadline = time.monotonic() + timeout_s
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if sum(line.endswith(" end") for line in lines) >= replicas:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{replicas} replicas' step stamps did not appear in {path} within {timeout_s:g}s: "
                               f"did Ray run the setup hook {SETUP_HOOK} in them (is it in ray.init's runtime_env, see "
                               "benchmarks.harness.init_ray)?")
        time.sleep(0.02)
    path.unlink()
    out: dict[int, list[tuple]] = {rank: [] for rank in range(replicas)}
    for line in lines:
        rank, *values = line.split()
        if values != ["end"]:
            out[int(rank)].append(tuple(float(v) for v in values))
    return out


# -------------------------------------------------------------------------------------------------- driver side
@contextmanager
def driver_stamps(calls: list[tuple[float, float]]) -> Iterator[None]:
    """Append ``(called, answered)`` for every ``StepStream.run`` (the default transport's step) inside the block."""
    from fe_ray.distributed.step_stream import StepStream

    original = StepStream.run

    def run(stream: Any, per_rank_args: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        called = time.perf_counter()
        try:
            return original(stream, per_rank_args, *args, **kwargs)
        finally:
            if any(value is not None for value in per_rank_args):  # all None: a new stream's warm-up round trip
                calls.append((called, time.perf_counter()))

    StepStream.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        StepStream.run = original  # type: ignore[method-assign]


def breakdown(calls: Sequence[tuple[float, float]], replica_rows: dict[int, list[tuple]],
              last: int | None = None) -> dict[str, float]:
    """Mean seconds per step of each of :data:`PHASES`, plus ``replica_cpu`` (the replicas' thread CPU time),
    ``replica_allreduce`` (the replicas' time inside the all-reduce), ``replica_faults`` (minor page faults per
    replica and step, a count), ``replica_tail`` (the weight update a replica runs after answering, which overlaps
    ``back``, ``driver`` and the next ``to_replicas``; 0 for steps answered after it) and ``replica_idle`` (a
    replica's wait from the end of one step to the start of the next, its thread asleep or reading); the CPU time,
    faults, all-reduce and idle time are means over the replicas and include the tail.

    Step ``i`` of the driver is step ``i`` of every replica. A replica phase runs from the first replica's start
    to the last one's end. Means, not medians: a step's phases add up to the time from its call to the next one's,
    so the means add up to the mean step time, slow steps included, and show where that time went.

    Args:
        calls: :func:`driver_stamps`' ``(called, answered)`` pairs.
        replica_rows: :func:`collect`'s stamps of the same steps.
        last: Average over the last ``last`` steps only (the timed ones; None: all).

    Raises:
        ValueError: The driver and a replica counted different numbers of steps, or the stamps are not in order
            (clocks of different machines).
    """
    counts = {rank: len(rows) for rank, rows in replica_rows.items()}
    if any(count != len(calls) for count in counts.values()):
        raise ValueError(f"the driver ran {len(calls)} steps but the replicas recorded {counts}")
    phases: dict[str, list[float]] = {name: [] for name in (*PHASES, "replica_cpu", "replica_allreduce",
                                                            "replica_faults", "replica_tail", "replica_idle")}
    first = 0 if last is None else max(len(calls) - last, 0)
    for i in range(first, len(calls)):
        called, answered = calls[i]
        starts, ends, cpus, faults, allreduces, finished = zip(*(rows[i] for rows in replica_rows.values()))
        phases["replica_tail"].append(max(finished) - max(ends))
        if i:
            phases["replica_idle"].append(statistics.fmean(
                rows[i][0] - rows[i - 1][5] for rows in replica_rows.values()))
        stamps = [called, min(starts), max(ends), answered]
        if stamps != sorted(stamps):
            raise ValueError(f"step {i}: stamps out of order {stamps}: driver and replicas on different clocks?")
        phases["to_replicas"].append(stamps[1] - stamps[0])
        phases["replica"].append(stamps[2] - stamps[1])
        phases["back"].append(stamps[3] - stamps[2])
        phases["replica_cpu"].append(statistics.fmean(cpus))
        phases["replica_faults"].append(statistics.fmean(faults))
        phases["replica_allreduce"].append(statistics.fmean(allreduces))
        if i:
            phases["driver"].append(called - calls[i - 1][1])
    return {name: statistics.fmean(values) for name, values in phases.items() if values}
