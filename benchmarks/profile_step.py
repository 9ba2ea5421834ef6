"""cProfile one throughput variant's steady-state steps and print where the time goes (the profiling behind
RESULTS.md's analyses).

Run: ``python -m benchmarks.profile_step --variant b0 [--model lenet|resnet|mlp] [--device cuda] [--steps 200]
[--top 25] [--replica] [--cpu-time]``.
Variants are those of throughput.py (a, b0, b, c, d, e; TF: a_tf, b0_tf, b_tf). Only the timed ``measure()``
call is profiled (setup and warm-up are not). ``--replica`` (variants c, d) profiles the steps inside replica rank
0's process instead of the driver (through :mod:`benchmarks.step_probe`'s setup hook). ``--cpu-time`` (driver
only) times each function by the driver thread's CPU time instead of the wall clock: a wall-clock profile of a
distributed step counts the time the driver's thread waited to run again inside the call it was in (on a busy
machine a socket send can read ~0.7 ms of wall time a step for ~40 us of CPU).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness, step_probe
from benchmarks.models import MODELS, PROBE_MODELS, synthetic_data
from benchmarks.throughput import DEFAULTS
from benchmarks.variants import WARMUP_STEPS, build_variants


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--variant", default="b0")
    parser.add_argument("--model", choices=(*MODELS, *PROBE_MODELS), default="lenet")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"))
    parser.add_argument("--replica", action="store_true",
                        help="profile rank 0's steps inside its replica process (variants c, d) instead of the driver")
    parser.add_argument("--callers", default="",
                        help="also print who calls the functions matching this regex (e.g. 'tensor|ones_like')")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the driver's functions by its thread's CPU time, not by the wall clock")
    args = parser.parse_args(argv)
    if args.cpu_time and args.replica:
        parser.error("--cpu-time profiles the driver; it cannot be combined with --replica.")
    harness.set_process_malloc(args.glibc_defaults)
    threads = args.threads or harness.available_cores()
    framework = "tf" if args.variant.endswith("_tf") else "torch"
    if framework == "tf":
        import tensorflow  # noqa: F401
    harness.set_thread_budget(threads)
    device, note = harness.resolve_device(args.device)
    if note:
        print(note)
    batch_size, steps = DEFAULTS[args.model]
    steps = args.steps or steps
    cfg = {"model": args.model, "device": device, "threads": threads, "batch_size": batch_size, "steps": steps,
           "ray_cpus": max(8, 4 * threads), "tf_distributed": True}
    n = (WARMUP_STEPS + steps) * batch_size
    cfg["data"] = synthetic_data(args.model, n)
    if framework == "tf":
        cfg["data_tf"] = synthetic_data(args.model, n, channels_last=True)
    variants, skipped = build_variants(cfg, framework, {args.variant.removesuffix("_tf")})
    if args.variant not in variants:
        print(f"variant {args.variant} not available: {skipped.get(args.variant, 'unknown key')}")
        return 1
    variant = variants[args.variant]
    prefix = None
    if args.replica:
        if not hasattr(variant, "env_vars") or args.variant.removesuffix("_tf") not in ("c", "d"):
            print(f"--replica profiles fe_ray replicas on the default transport: variant c or d, not {args.variant}")
            return 1
        prefix = str(Path(tempfile.mkdtemp(prefix="fe_ray_profile_")) / "steps")
        variant.env_vars = {**(variant.env_vars or {}), step_probe.PROFILE_ENV: prefix}
    variant.prepare()
    variant.measure()  # one more unprofiled pass
    profiler = cProfile.Profile(time.thread_time) if args.cpu_time else cProfile.Profile()
    if prefix is None:
        profiler.enable()
    rate = variant.measure()
    profiler.disable()
    variant.close()
    where = "in replica rank 0" if prefix else "in the driver" + (" (thread CPU time)" if args.cpu_time else "")
    print(f"{args.variant} {args.model} batch={batch_size} steps={steps} device={device}: {rate:,.0f} samples/s "
          f"with the profiler {where} ({1e3 * batch_size / rate:.2f} ms/step)")
    out = io.StringIO()
    stats = pstats.Stats(f"{prefix}.rank0", stream=out) if prefix else pstats.Stats(profiler, stream=out)
    stats.sort_stats(args.sort).print_stats(args.top)
    if args.callers:
        stats.print_callers(args.callers)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
