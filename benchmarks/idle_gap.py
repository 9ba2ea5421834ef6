"""How much slower a training step runs right after its thread waited idle, as a replica's does between steps.

A replica's serving thread sleeps in ``select`` while the driver merges the previous step and the next batch
travels (~0.5 ms a step on the machines measured so far); the plain loop's thread never sleeps. If a step run after
such a sleep is slower (caches, TLB and branch predictors refilled after the core idled, the CPU's frequency, a
virtual CPU halted and resumed), part of c/a's gap is the sleep itself, not fe_ray's code, and polling instead of
sleeping (``FE_RAY_STREAM_SPIN_US``) would win it back. This script times the plain torch step (the plain loop
of ``throughput.py``) with no gap, after a sleep of each gap, and after polling for as long, and with no gap on a
long-lived second thread of the process (``thread``: where a replica runs its steps, its stream's thread, while
the plain loop runs on the main one), alternating::

    python -m benchmarks.idle_gap [--model mlp|lenet|resnet] [--device cuda] [--gaps 300,1000] [--steps 500]

Each measurement is the median time of one step (the loss brought to the host, as a replica's outputs are),
excluding the gap. Printed as a table per gap; ``slept/none``, ``polled/none`` and ``thread/none`` above 1 mean
slower steps.
"""

from __future__ import annotations

import select
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import harness
from benchmarks.models import MODELS, PROBE_MODELS
from benchmarks.throughput import one_process_setup


def sleep_for(idle: socket.socket, seconds: float) -> None:
    """Block in ``select`` on a socket nobody writes to, as a replica's serving thread waits for its next batch."""
    select.select([idle], [], [], seconds)


def poll_for(idle: socket.socket, seconds: float) -> None:
    """Look at the same socket without blocking until ``seconds`` have passed (``FE_RAY_STREAM_SPIN_US``'s way)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        select.select([idle], [], [], 0.0)


def step_times(step: Callable[[dict[str, Any]], Any], batches: Sequence[dict[str, Any]],
               wait: Callable[[], None] | None) -> float:
    """Median seconds of ``step(batch)`` (ending with its loss on the host) over ``batches``, each after ``wait()``."""
    times = []
    for batch in batches:
        if wait is not None:
            wait()
        start = time.perf_counter()
        float(step(batch))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", choices=(*MODELS, *PROBE_MODELS), default="mlp")
    parser.add_argument("--gaps", default="300,1000", help="comma list of idle gaps in microseconds")
    parser.add_argument("--steps", type=int, default=0, help="steps per measurement (default 500, quick 20)")
    args = parser.parse_args(argv)
    try:
        gaps_us = [int(gap) for gap in args.gaps.split(",") if gap.strip()]
    except ValueError:
        parser.error(f"--gaps must be a comma list of whole microseconds, e.g. 300,1000; got {args.gaps!r}.")
    if not gaps_us or any(gap <= 0 for gap in gaps_us):
        parser.error(f"--gaps must list positive microseconds, e.g. 300,1000; got {args.gaps!r}.")
    device, threads, batch_size, repeats, batches = one_process_setup(args)
    from benchmarks.baselines import PlainTorchTrainer

    trainer = PlainTorchTrainer(args.model, device)
    trainer.run(batches[:10])  # first-call costs out of the figures
    idle, other_end = socket.socketpair()

    def step(batch: dict[str, Any]) -> Any:
        return trainer.step(batch["x"], batch["y"]).detach()

    def measure(wait: Callable[[], None] | None) -> Callable[[], float]:
        return lambda: 1e6 * step_times(step, batches, wait)

    # One worker that lives as long as the pool: a long-lived second thread, as a replica's stream thread.
    second = ThreadPoolExecutor(max_workers=1, thread_name_prefix="idle_gap-second")

    def on_second(fn: Callable[[], Any]) -> Any:
        return second.submit(fn).result(timeout=harness.REMOTE_TIMEOUT_S)

    on_second(lambda: trainer.run(batches[:10]))  # the thread's own first-call costs (its CUDA state) too
    variants: dict[str, Callable[[], float]] = {"none": measure(None), "thread": lambda: on_second(measure(None))}
    for gap in gaps_us:
        variants[f"slept_{gap}"] = measure(lambda gap=gap: sleep_for(idle, gap / 1e6))
        variants[f"polled_{gap}"] = measure(lambda gap=gap: poll_for(idle, gap / 1e6))
    print(f"== idle gap: torch {args.model} batch={batch_size} steps={len(batches)} threads={threads} "
          f"device={device} gaps={gaps_us} us")
    series = harness.alternate(variants, repeats, unit="us/step", higher_is_better=False)
    second.shutdown()
    idle.close()
    other_end.close()
    rows = []
    ratios: dict[str, float | None] = {}
    ratios["thread/none"] = harness.ratio(series, "thread", "none", paired=True)
    for gap in gaps_us:
        slept = harness.ratio(series, f"slept_{gap}", "none", paired=True)
        polled = harness.ratio(series, f"polled_{gap}", "none", paired=True)
        ratios[f"slept_{gap}/none"], ratios[f"polled_{gap}/none"] = slept, polled
        rows.append((gap, series["none"].median, series[f"slept_{gap}"].median, series[f"polled_{gap}"].median,
                     slept, polled))
    print(harness.format_table(rows, ("gap us", "no gap us/step", "after a sleep", "after polling",
                                      "slept/none (paired)", "polled/none (paired)")))
    print(harness.format_table([(series["none"].median, series["thread"].median, ratios["thread/none"])],
                               ("no gap us/step", "on a second thread", "thread/none (paired)")))
    payload = {"benchmark": "idle_gap", "environment": harness.environment(threads, device), "args": vars(args),
               "results": {name: s.to_json() for name, s in series.items()}, "ratios": ratios}
    harness.save_results("idle_gap_quick" if args.quick else "idle_gap", payload, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
