"""Training-step throughput (samples/s): hand-written loops vs fe_ray, same model/data/batch/thread budget.

Variants (torch):
    a   plain single-process PyTorch loop
    a_twin  (informational) the same plain loop built a second time: a_twin/a is an A/A ratio, this run's noise
    a_shuffled  (informational) the plain loop gathering each batch's rows of a shuffled epoch from the whole dataset
        every step, as a real loop (and fe_ray's Pipeline) does; a takes views of pre-cut batches: b/a_shuffled
        compares fe_ray's Estimator with a loop doing the same data work
    b0  fe_ray in-process ``Network.run_step`` loop (no Pipeline/Estimator): isolates the Network's own cost
    b   fe_ray in-process Network + Pipeline + Estimator.fit
    b_prefetch  (informational) b with the Pipeline making the next batch in one worker thread while the step runs
        (``num_process=1``; fe_ray's default makes it in line, between steps): on a GPU the step's waits release
        the GIL, so the batch's making can leave the step's critical path
    c   fe_ray ``num_replicas=1`` (Estimator.fit; default ``step_transport="stream"``: one TCP stream per replica
        carries the steps)
    d   fe_ray ``num_replicas=2`` (same)
    c_spin, d_spin  (informational) c and d with the driver and the replicas polling their step streams for up to
        5 ms instead of sleeping (``FE_RAY_STREAM_SPIN_US=5000``, off by default): what the hops' wake-ups cost
    c_calls, d_calls  (informational) c and d with ``step_transport="calls"`` (one Ray actor call per replica and
        step, the default before fe_ray had step streams)
    c_compiled, d_compiled  (informational) c and d with ``step_transport="compiled"`` (a Ray Compiled Graph)
    e   hand-written 2-rank gloo data-parallel loop on Ray actors, batches sent from the driver each step
    b_ops, c_ops  (informational) b and c with a per-sample Pipeline op (``Minmax`` on x, as the MNIST examples
        use) made on the driver's thread: in-process it adds to every step, with replicas the Pipeline makes the
        next batch while the replicas compute (compare c_ops/c with b_ops/b)
    e_local  (informational) the same ranks training on data generated inside the actors: no driver round trip
    a_malloc, e_malloc  (informational) a in a Ray actor with fe_ray's replica environment, and e with its glibc
        malloc settings (fe_ray.allocator.MALLOC_ENV): c / a_malloc and d / e_malloc compare fe_ray with
        hand-written loops in the same kind of process (TF: a_malloc_tf, the plain tf.function loop in such an actor)
    a_served  (informational) the plain step in such an actor, served over fe_ray's step stream on the thread fe_ray's
        replicas use (each batch sent, the loss answered): c / a_served is fe_ray's Network + Estimator in a
        replica, a_served / a the stream's, the serving thread's and its idle wait's cost; its ``inner_step_us``
        (the actor's own step) compares with c's ``replica_us``
    c_glibc, d_glibc  (informational) c and d with glibc's malloc defaults (fe_ray's opt-out, ``GLIBC_TUNABLES=""``):
        what the replicas' malloc settings change (TF: c_glibc_tf, d_glibc_tf)
    c_nice15, d_nice15, e_nice0  (informational) c and d with their replicas at Ray's default worker niceness (15
        levels below the driver; fe_ray's replicas ran so before 2026-11-25), and e at the driver's priority, as fe_ray
        now runs its replicas (TF: the same with ``_tf``)
    c_nopad, d_nopad  (informational) c and d with the replicas' malloc settings less ``MALLOC_TOP_PAD_`` (fe_ray's
        settings before 2026-11-25): what the top pad changes for a step computed on the replica's step thread
    c_late, d_late  (informational) c and d with their replicas answering each step after its weight update
        (``FE_RAY_EARLY_ANSWER=0``, fe_ray's behaviour before 2026-11-26): what answering before it changes (TF
        steps are one graph and always answer after it)

``--framework tf``: the same letters with an ``_tf`` suffix: a plain ``tf.function`` loop (a_tf), fe_ray in-process
(b0_tf, b_tf) and with replicas (c_tf, d_tf and their calls / compiled twins), and e_tf, a hand-written 2-rank TF
data-parallel loop on Ray actors (tf.function gradients, one flat bucket averaged by a gloo all_reduce).

Allocator: this process runs with the malloc settings fe_ray gives every process that trains (fe_ray.allocator),
whichever variants run, so the plain loops (a, a_twin) and fe_ray in-process (b0, b) share them; ``--glibc-defaults``
keeps glibc's defaults in this process, as in a hand-written script (fe_ray's replicas keep their settings; every
run before 2026-11-25, midday, ran so). The hand-written ranks (e) keep glibc's defaults either way (e_malloc: with
the settings).

Thread budget: ``--threads`` (default: all cores) intra-op threads for in-process variants; each of N replicas
gets ``threads // N`` (min 1), for fe_ray replicas and hand-written ranks alike.

Run: ``python -m benchmarks.throughput [--model lenet|resnet|all] [--framework torch|tf] [--quick]``. The variants
themselves live in benchmarks/variants.py and benchmarks/plain_variants.py; this script runs them side by side and
reports.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from typing import Any

from benchmarks import harness, step_probe
from benchmarks.models import INPUT_SHAPES, MODELS, PROBE_MODELS, count_params, synthetic_data
from benchmarks.plain_variants import check_gpu_shares
from benchmarks.variants import WARMUP_STEPS, FeEstimator, Variant, build_variants, ray_unavailable

# name -> (label, default batch size, default timed steps)
DEFAULTS = {"lenet": (32, 150), "resnet": (64, 10), "mlp": (32, 1000)}
QUICK = {"lenet": (32, 10), "resnet": (16, 2), "mlp": (32, 50)}
LABELS = {
    "a": "(a) plain torch loop", "a_twin": "(a_twin) plain torch loop, second copy",
    "a_twin_tf": "(a_twin) plain tf.function loop, second copy",
    "a_sync": "(a_sync) plain loop, loss.item() every step",
    "a_shuffled": "(a_shuffled) plain loop, shuffled gather",
    "b0": "(b0) fe_ray Network.run_step loop", "b": "(b) fe_ray Network+Estimator",
    "b_prefetch": "(b_prefetch) b, next batch made in a thread",
    "c": "(c) fe_ray num_replicas=1", "d": "(d) fe_ray num_replicas=2", "e": "(e) hand-written gloo DP x2",
    "c_spin": "(c_spin) c, streams polled 5 ms", "d_spin": "(d_spin) d, streams polled 5 ms",
    "c_compiled": "(c_compiled) c, compiled graph", "d_compiled": "(d_compiled) d, compiled graph",
    "c_compiled_tf": "(c_compiled) TF c, compiled graph", "d_compiled_tf": "(d_compiled) TF d, compiled graph",
    "b_ops": "(b_ops) b + per-sample Pipeline op", "c_ops": "(c_ops) c + per-sample Pipeline op",
    "b_ops_tf": "(b_ops) TF b + per-sample Pipeline op", "c_ops_tf": "(c_ops) TF c + per-sample Pipeline op",
    "c_calls": "(c_calls) c, actor calls", "d_calls": "(d_calls) d, actor calls",
    "c_calls_tf": "(c_calls) TF c, actor calls", "d_calls_tf": "(d_calls) TF d, actor calls",
    "e_local": "(e_local) gloo DP x2, actor-local data",
    "a_malloc": "(a_malloc) a in an actor, replica env",
    "a_served": "(a_served) a served over fe_ray's stream",
    "a_malloc_tf": "(a_malloc) TF a in an actor, replica env",
    "c_nice15": "(c_nice15) c at Ray's worker nice 15", "d_nice15": "(d_nice15) d at Ray's worker nice 15",
    "e_nice0": "(e_nice0) e at the driver's priority",
    "c_nice15_tf": "(c_nice15) TF c at Ray's worker nice 15", "d_nice15_tf": "(d_nice15) TF d at Ray's worker nice 15",
    "e_nice0_tf": "(e_nice0) TF e at the driver's priority", "e_malloc": "(e_malloc) e with replica malloc env",
    "c_glibc": "(c_glibc) c, glibc's malloc defaults", "d_glibc": "(d_glibc) d, glibc's malloc defaults",
    "c_glibc_tf": "(c_glibc) TF c, glibc's malloc defaults", "d_glibc_tf": "(d_glibc) TF d, glibc's malloc defaults",
    "c_nopad": "(c_nopad) c, no malloc top pad", "d_nopad": "(d_nopad) d, no malloc top pad",
    "c_late": "(c_late) c, answered after the update", "d_late": "(d_late) d, answered after the update",
    "c_late_tf": "(c_late) TF c, answered after the update", "d_late_tf": "(d_late) TF d, answered after the update",
    "c_nopad_tf": "(c_nopad) TF c, no malloc top pad", "d_nopad_tf": "(d_nopad) TF d, no malloc top pad",
    "a_tf": "(a) plain tf.function loop", "b0_tf": "(b0) fe_ray TF Network.run_step loop",
    "b_tf": "(b) fe_ray TF Network+Estimator", "c_tf": "(c) fe_ray TF num_replicas=1",
    "d_tf": "(d) fe_ray TF num_replicas=2", "e_tf": "(e) hand-written TF DP x2 (gloo)",
}
TARGETS = [("b", "a", 0.97), ("c", "a", 0.93), ("d", "e", 0.95),
           ("b_tf", "a_tf", 0.97), ("c_tf", "a_tf", 0.93), ("d_tf", "e_tf", 0.95)]
#: Informational ratios (label, numerator, denominator), printed where both variants ran.
EXTRA_RATIOS = [
    ("a_twin/a", "a_twin", "a"), ("a_twin_tf/a_tf", "a_twin_tf", "a_tf"),
    ("b0/a", "b0", "a"), ("b/a_sync", "b", "a_sync"), ("b0/a_sync", "b0", "a_sync"),
    ("b_prefetch/a", "b_prefetch", "a"), ("b_prefetch/b", "b_prefetch", "b"),
    ("b/a_shuffled", "b", "a_shuffled"), ("a_shuffled/a", "a_shuffled", "a"),
    ("d/c", "d", "c"), ("c_spin/c", "c_spin", "c"), ("d_spin/d", "d_spin", "d"), ("c_spin/a", "c_spin", "a"),
    ("d_spin/e", "d_spin", "e"), ("e/a", "e", "a"), ("e/e_local", "e", "e_local"),
    ("c/a_malloc", "c", "a_malloc"), ("a_malloc/a", "a_malloc", "a"), ("c/a_served", "c", "a_served"),
    ("a_served/a", "a_served", "a"), ("a_served/a_malloc", "a_served", "a_malloc"), ("d/e_malloc", "d", "e_malloc"),
    ("e_malloc/e", "e_malloc", "e"), ("c_tf/a_malloc_tf", "c_tf", "a_malloc_tf"),
    ("a_malloc_tf/a_tf", "a_malloc_tf", "a_tf"),
    ("c/c_nice15", "c", "c_nice15"), ("d/d_nice15", "d", "d_nice15"), ("d/e_nice0", "d", "e_nice0"),
    ("e_nice0/e", "e_nice0", "e"), ("c_nice15/a", "c_nice15", "a"),
    ("c_tf/c_nice15_tf", "c_tf", "c_nice15_tf"), ("d_tf/d_nice15_tf", "d_tf", "d_nice15_tf"),
    ("d_tf/e_nice0_tf", "d_tf", "e_nice0_tf"), ("e_nice0_tf/e_tf", "e_nice0_tf", "e_tf"),
    ("c_nice15_tf/a_tf", "c_nice15_tf", "a_tf"), ("c/c_glibc", "c", "c_glibc"), ("d/d_glibc", "d", "d_glibc"),
    ("c_glibc/a", "c_glibc", "a"), ("d_glibc/e", "d_glibc", "e"),
    ("c_tf/c_glibc_tf", "c_tf", "c_glibc_tf"), ("d_tf/d_glibc_tf", "d_tf", "d_glibc_tf"),
    ("c_glibc_tf/a_tf", "c_glibc_tf", "a_tf"), ("d_glibc_tf/e_tf", "d_glibc_tf", "e_tf"),
    ("c/c_nopad", "c", "c_nopad"), ("d/d_nopad", "d", "d_nopad"), ("c/c_late", "c", "c_late"),
    ("d/d_late", "d", "d_late"), ("c_late/a", "c_late", "a"),
    ("c_tf/c_nopad_tf", "c_tf", "c_nopad_tf"), ("d_tf/d_nopad_tf", "d_tf", "d_nopad_tf"),
    ("c_calls/a", "c_calls", "a"), ("d_calls/e", "d_calls", "e"),
    ("c_calls_tf/a_tf", "c_calls_tf", "a_tf"), ("d_calls_tf/e_tf", "d_calls_tf", "e_tf"),
    ("c_compiled/a", "c_compiled", "a"), ("d_compiled/e", "d_compiled", "e"),
    ("c_compiled_tf/a_tf", "c_compiled_tf", "a_tf"), ("d_compiled_tf/e_tf", "d_compiled_tf", "e_tf"),
    ("d_tf/c_tf", "d_tf", "c_tf"), ("e_tf/a_tf", "e_tf", "a_tf"),
    ("b0_tf/a_tf", "b0_tf", "a_tf"), ("b_ops/b", "b_ops", "b"), ("c_ops/c", "c_ops", "c"),
    ("b_ops_tf/b_tf", "b_ops_tf", "b_tf"), ("c_ops_tf/c_tf", "c_ops_tf", "c_tf"),
]


def run_model(model: str, args: Any, device: str, threads: int) -> dict[str, Any]:
    """Prepare every variant for one model, alternate the repeats, and print/return the results."""
    batch_size, steps = (QUICK if args.quick else DEFAULTS)[model]
    batch_size = args.batch_size or batch_size
    steps = args.steps or steps
    n = (WARMUP_STEPS + steps) * batch_size  # Estimator variants run WARMUP_STEPS untimed batches first
    cfg: dict[str, Any] = {"model": model, "device": device, "threads": threads, "batch_size": batch_size,
                           "steps": steps}
    cfg["data"] = synthetic_data(model, n)
    if args.framework == "tf":
        cfg["data_tf"] = synthetic_data(model, n, channels_last=True)
        cfg["tf_distributed"] = args.tf_distributed
    only = set(args.variants.split(",")) if args.variants else None
    # Logical CPUs for Ray: every Ray variant's actors stay alive through the alternating repeats, each reserving
    # up to the thread budget; too few and the last variant's actors never start.
    cfg["ray_cpus"] = max(8, threads * (len(only) if only else len(LABELS)) + 2)
    variants, skipped = build_variants(cfg, args.framework, only)
    check_gpu_shares(list(variants.values()), device)
    print(f"\n== {model} {INPUT_SHAPES[model]} batch={batch_size} steps={steps} threads={threads} device={device}")
    ready: dict[str, Variant] = {}
    for key, variant in variants.items():
        start = time.perf_counter()
        try:
            variant.prepare()
            ready[key] = variant
            print(f"  prepared {LABELS[key]} in {time.perf_counter() - start:.1f}s")
        except Exception as err:  # noqa: BLE001 - a broken fe_ray piece must not hide the other variants
            skipped[key] = f"prepare failed: {type(err).__name__}: {err}"
            print(f"  SKIP {LABELS[key]}: {skipped[key]}", file=sys.stderr)
            if args.verbose:
                traceback.print_exc()
    repeats = args.repeats or (2 if args.quick else 5)
    # The driver's thread per step: what b's extra microseconds are on a GPU (CPU work or waiting) and how cold it runs.
    meters: dict[str, list[dict[str, float]]] = {key: [] for key in ready}
    calls = {key: harness.metered(v.measure, steps_per_measure(v, steps), meters[key]) for key, v in ready.items()}
    series = harness.alternate(calls, repeats, "samples/s", quiet_wait_s=args.wait_quiet)
    for key, readings in meters.items():
        series[key].extra["driver_thread"] = readings
    for variant in ready.values():
        try:
            variant.close()
        except Exception:  # noqa: BLE001
            pass
    return report(cfg, args.framework, series, ready, variants, skipped)


def one_process_setup(args: Any) -> tuple[str, int, int, int, list[dict[str, Any]]]:
    """The common start of the one-process step probes (idle_gap, step_gap): this process's malloc settings and
    thread budget (one intra-op thread unless ``--threads``), the device (its note printed), and the model's
    synthetic batches.

    Returns:
        ``(device, threads, batch_size, repeats, batches)``: ``--steps`` batches (default 500, quick 20) and
        ``--repeats`` (default 5, quick 2).
    """
    from benchmarks.baselines import batches_of

    harness.set_process_malloc(args.glibc_defaults)
    threads = args.threads or 1  # one intra-op thread, as a replica with one CPU; --threads for more
    harness.set_thread_budget(threads)
    device, note = harness.resolve_device(args.device)
    if note:
        print(note)
    batch_size = (QUICK if args.quick else DEFAULTS)[args.model][0]
    steps = args.steps or (20 if args.quick else 500)
    repeats = args.repeats or (2 if args.quick else 5)
    return device, threads, batch_size, repeats, batches_of(synthetic_data(args.model, steps * batch_size), batch_size)


def steps_per_measure(variant: Variant, steps: int) -> int:
    """Training steps one ``measure()`` call runs: an Estimator's fit also runs its WARMUP_STEPS untimed batches."""
    return steps + WARMUP_STEPS if isinstance(variant, FeEstimator) else steps


def driver_thread_table(series: dict[str, harness.Series]) -> str:
    """The medians over the repeats of :func:`benchmarks.harness.metered`'s readings, one row per variant."""
    rows = []
    for key, s in series.items():
        readings = s.extra.get("driver_thread") or []
        if readings:
            rows.append([LABELS.get(key, key), *(round(statistics.median(r[name] for r in readings), 2)
                                                 for name in harness.METER_KEYS)])
    return harness.format_table(rows, ["variant", "wall us", "CPU us", "minor faults", "vol. switches",
                                       "invol. switches"])


def report(cfg: dict[str, Any], framework: str, series: dict[str, harness.Series], ready: dict[str, Variant],
           variants: dict[str, Variant], skipped: dict[str, str]) -> dict[str, Any]:
    """Print one model's tables (rates, time per step, fixed costs and step phases, ratios and their verdicts)
    and return them for the JSON file."""
    model, batch_size = cfg["model"], cfg["batch_size"]
    print(harness.series_table(series, LABELS))
    step_us = {key: 1e6 * batch_size / s.median for key, s in series.items() if s.median}
    base = "a_tf" if framework == "tf" else "a"
    if base in step_us:
        print(f"Median time per step and what each variant adds over {base} (on the mlp probe model, the "
              "framework's per-step cost):")
        for key, us in step_us.items():
            print(f"  {LABELS[key]}: {us:,.0f} us/step ({us - step_us[base]:+,.0f} us)")
    print("The driver's thread per step (whole measure() calls: an Estimator's fit with its setup and warm-up "
          "batches; with replicas or actors, the driver's share only), medians over the repeats:")
    print(driver_thread_table(series))
    fixed = fixed_costs(cfg, series, ready)
    # The targets are for the real models; on the probe model a ratio only restates the us/step above.
    checks = [(f"{num}/{den}", harness.ratio(series, num, den), target if model in MODELS else None, ">=")
              for num, den, target in TARGETS if num in variants or den in variants or num in skipped]
    checks += [(label, harness.ratio(series, num, den), None, ">=") for label, num, den in EXTRA_RATIOS
               if num in series and den in series]
    best, paired, intervals = print_ratios(series, checks)
    for key, reason in skipped.items():
        print(f"  not run: {LABELS.get(key, key)}: {reason}")
    params = None
    try:
        if framework == "torch":
            from benchmarks.models import torch_model

            params = count_params(torch_model(model))
    except Exception:  # noqa: BLE001
        pass
    return {"config": {k: v for k, v in cfg.items() if not k.startswith("data")}, "params": params,
            "us_per_step": step_us,
            "series": {k: s.to_json() for k, s in series.items()},
            "ratios": {label: {"value": value, "target": target} for label, value, target, _ in checks},
            "best_of_n_ratios": best, "paired_ratios": paired,
            "paired_ratio_intervals_90": {k: list(v) for k, v in intervals.items() if v is not None},
            "fixed_costs": fixed, "skipped": skipped}


def fixed_costs(cfg: dict[str, Any], series: dict[str, harness.Series],
                ready: dict[str, Variant]) -> dict[str, dict[str, float]]:
    """Per-epoch fixed costs of the Estimator variants and, with replicas, each step's phases; printed and
    returned (the series get the raw per-repeat values in their ``extra``)."""
    batch_size = cfg["batch_size"]
    fixed: dict[str, dict[str, float]] = {}
    total_steps = WARMUP_STEPS + cfg["steps"]
    for key, variant in ready.items():
        if getattr(variant, "fit_walls", None) and key in series:
            wall = statistics.median(variant.fit_walls)
            fixed[key] = {"fit_wall_s": wall,
                          "fixed_s": wall - total_steps * batch_size / series[key].median}
            series[key].extra["fit_wall_s"] = variant.fit_walls
        if getattr(variant, "phases", None) and key in series:
            # Per repeat, the step time the run measured less the probe's mean phases: what the probe missed.
            rest = [batch_size / sps - sum(p[name] for name in step_probe.PHASES)
                    for sps, p in zip(series[key].values, variant.phases)]
            phases = {f"{name}_us": 1e6 * statistics.median(p[name] for p in variant.phases)
                      for name in (*step_probe.PHASES, "replica_cpu", "replica_allreduce", "replica_tail",
                                   "replica_idle", "driver_cpu") if all(name in p for p in variant.phases)}
            faults = statistics.median(p["replica_faults"] for p in variant.phases)
            fixed.setdefault(key, {}).update({**phases, "unaccounted_us": 1e6 * statistics.median(rest),
                                              "replica_faults": faults})
            series[key].extra["phases_s"] = variant.phases
        if getattr(variant, "inner_step_s", None) and key in series:
            fixed[key] = {"inner_step_us": 1e6 * statistics.median(variant.inner_step_s)}
            series[key].extra["inner_step_s"] = variant.inner_step_s
        if getattr(variant, "context_costs", None) and key in series:
            fixed[key] = {"first_step_of_context_s": statistics.median(variant.context_costs)}
            series[key].extra["first_step_of_context_s"] = variant.context_costs
    if fixed:
        print("Per-epoch fixed costs (outside the steady-state figures above) and, with replicas, each step's phases "
              "(benchmarks/step_probe.py): to_replicas (send, the replicas' wake-up and read), replica (their own "
              "step; replica_cpu: its thread's CPU time; replica_allreduce: the part of it inside the all-reduce, "
              "waiting for the slowest replica included; replica_faults: the replica process's minor page faults), "
              "back (answers sent, the driver's wake-up and read), driver "
              "(answers -> next step sent; driver_cpu: the CPU time the driver's thread used per step, its whole "
              "share of the step's work), all means over a fit's timed steps; unaccounted (step time - phases); "
              "medians over the repeats:")
        for key, info in fixed.items():
            print(f"  {LABELS[key]}: " + ", ".join(f"{k}={v:.3f}" for k, v in info.items()))
    return fixed


def print_ratios(series: dict[str, harness.Series], checks: list[tuple[str, float | None, float | None, str]]
                 ) -> tuple[dict[str, float | None], dict[str, float | None], dict[str, Any]]:
    """Print the ratios (medians; best-of-n and paired companions) and, for each target, whether this run's noise
    allows a verdict; returns the best-of-n and paired ratios and the paired ratios' 90% intervals."""
    print(harness.ratio_table(checks))
    best = {label: harness.ratio(series, *label.split("/"), best=True) for label, *_ in checks}
    print("best-of-n ratios (contention-robust companion): "
          + ", ".join(f"{k}={v:.3f}" for k, v in best.items() if v is not None))
    paired = {label: harness.ratio(series, *label.split("/"), paired=True) for label, *_ in checks}
    print("paired ratios (median of per-repeat ratios; companion): "
          + ", ".join(f"{k}={v:.3f}" for k, v in paired.items() if v is not None))
    intervals = {label: harness.paired_interval(series, *label.split("/")) for label, *_ in checks}
    # Whether this run's noise allows a verdict at all: a target inside the interval is neither met nor missed
    # beyond doubt, however the medians above happen to fall.
    for label, _value, target, _op in checks:
        if target is not None and label in paired and paired[label] is not None:
            interval = intervals[label]
            shown = f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "n/a"
            print(f"  {label}: paired {paired[label]:.3f}, 90% interval of the median {shown}, target {target}: "
                  f"{harness.interval_verdict(interval, target)}")
    return best, paired, intervals


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", choices=(*MODELS, *PROBE_MODELS, "all"), default="all",
                        help="'all' runs lenet and resnet; mlp is the per-step overhead probe (microseconds per "
                             "step over the plain loop)")
    parser.add_argument("--framework", choices=("torch", "tf"), default="torch")
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--steps", type=int, default=0, help="timed steps per repeat")
    parser.add_argument("--variants", default="", help="comma list of variant keys (a,b0,b,c,d,e,e_local)")
    parser.add_argument("--no-tf-distributed", dest="tf_distributed", action="store_false",
                        help="skip fe_ray TF with num_replicas (c_tf, d_tf)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--try-fix", default="", help="comma list of benchmarks/fixes.py patches (experiments)")
    args = parser.parse_args(argv)
    harness.set_process_malloc(args.glibc_defaults)
    if args.try_fix:
        from benchmarks import fixes

        print(f"EXPERIMENT: fe_ray patched with {fixes.apply(args.try_fix)} (benchmarks/fixes.py)")
    threads = args.threads or harness.available_cores()
    harness.set_thread_budget(threads)
    if args.framework == "tf":
        import tensorflow  # noqa: F401 - import before set_thread_budget's TF part

        harness.set_thread_budget(threads)
    device, note = harness.resolve_device(args.device)
    if note:
        print(note)
    if args.framework == "tf" and device == "cuda":
        print("NOTE: the TF comparison runs on TF's default device placement.")
    results = {}
    models = MODELS if args.model == "all" else (args.model,)
    for model in models:
        results[model] = run_model(model, args, device, threads)
    name = "throughput" if args.framework == "torch" else "throughput_tf"
    if device == "cuda":
        name += "_cuda"
    if args.try_fix:
        name += "_fix-" + args.try_fix.replace(",", "_")
    if args.quick:
        name += "_quick"
    payload = {"benchmark": name, "environment": harness.environment(threads, device), "args": vars(args),
               "ray_unavailable": ray_unavailable(), "results": results}
    harness.save_results(name, payload, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
