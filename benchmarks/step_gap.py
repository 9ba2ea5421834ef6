"""Where a step's Python meets an idle GPU: the stretch from one step's wait for the device to the next step's
model call and backward pass, for the plain loop and for fe_ray's Network.

On the GPU a LeNet step waits once for the device (the plain loop at its next host-to-device copy, or at its
``loss.item()``; fe_ray at its outputs' copy to the host), and the GPU has nothing queued until the next step
launches its first kernel. Python run in that stretch adds to the step one for one; Python run once the backward
pass is queued overlaps the GPU's work and costs nothing. This script times, for every step, how long after the
previous step's wait ended the model is called (``model``) and the backward pass starts (``backward``), for
the plain loop bringing its loss to the host every step (a_sync) and for ``Network.run_step`` (b0)::

    python -m benchmarks.step_gap [--model lenet|mlp|resnet] [--device cuda] [--steps 500] [--repeats 5]
                                  [--profile 2000]

It marks the moments by wrapping the model's ``forward``, torch's autograd entry point and fe_ray's outputs'
copy to the host (a private function of the torch backend); the wrappers' own cost, a few microseconds, is
paid by both loops alike. Medians of the per-step values, per repeat, then over the repeats.

``--profile STEPS`` then runs b0 for that many more steps under ``cProfile`` and lists fe_ray's own functions by
their time per step (their code only, not the torch calls they make), so a machine where the Network costs more
than on the CPU VM shows which of its functions do. cProfile's hooks inflate every figure (about 1.6x on the VM):
read them relative to each other.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks import harness
from benchmarks.models import MODELS, PROBE_MODELS
from benchmarks.throughput import one_process_setup

#: The marks of the current repeat: (name, perf_counter_ns) in the order they happened.
MARKS: list[tuple[str, int]] = []


def _marking(name: str, fn: Callable[..., Any], after: bool = False) -> Callable[..., Any]:
    """``fn`` wrapped to append ``(name, now)`` to :data:`MARKS` before (or, with ``after``, after) each call."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not after:
            MARKS.append((name, time.perf_counter_ns()))
            return fn(*args, **kwargs)
        result = fn(*args, **kwargs)
        MARKS.append((name, time.perf_counter_ns()))
        return result
    return wrapper


def gaps(marks: list[tuple[str, int]]) -> dict[str, float]:
    """Median microseconds from each ``waited`` mark to the first ``model`` and the first ``backward`` mark after
    it (a step's later backward passes, if any, do not count)."""
    found: dict[str, list[float]] = {"model": [], "backward": []}
    waited: int | None = None
    seen: set[str] = set()
    for name, stamp in marks:
        if name == "waited":
            waited, seen = stamp, set()
        elif waited is not None and name in found and name not in seen:
            found[name].append((stamp - waited) / 1000)
            seen.add(name)
    return {name: statistics.median(values) if values else float("nan") for name, values in found.items()}


def _measure(args: Any, device: str, batches: list[dict[str, Any]], batch_size: int, repeats: int) -> dict[str, Any]:
    """Both loops, alternating for ``repeats``; the JSON payload. Needs :func:`main`'s marks in place."""
    from benchmarks.baselines import PlainTorchTrainer
    from benchmarks.variants import fe_network

    plain = PlainTorchTrainer(args.model, device)
    plain.model.forward = _marking("model", plain.model.forward)
    network, model = fe_network({"model": args.model}, "torch", None)  # the b0 variant's network
    model.forward = _marking("model", model.forward)
    waited = _marking("waited", lambda loss: float(loss.detach()), after=True)

    def run_plain() -> None:
        for batch in batches:
            waited(plain.step(batch["x"], batch["y"]))

    def run_fe() -> None:
        with network(mode="train", epoch=1, desired_output_keys={"ce"}):
            for batch in batches:
                network.run_step(batch)

    results: dict[str, dict[str, list[float]]] = {"a_sync": {"model": [], "backward": []},
                                                   "b0": {"model": [], "backward": []}}
    for run in (run_plain, run_fe):  # first-call costs (cuDNN's choice, the context's first step) out of the figures
        run()
    print(f"== step gap: torch {args.model} batch={batch_size} steps={len(batches)} device={device}")
    for repeat in range(repeats):
        for key, run in (("a_sync", run_plain), ("b0", run_fe)):
            MARKS.clear()
            run()
            for name, value in gaps(MARKS).items():
                results[key][name].append(value)
        print(f"  repeat {repeat + 1}/{repeats}: " + ", ".join(
            f"{key} model {results[key]['model'][-1]:.1f} backward {results[key]['backward'][-1]:.1f} us"
            for key in results))
    rows = [(key, statistics.median(values["model"]), statistics.median(values["backward"]))
            for key, values in results.items()]
    print(harness.format_table(rows, ("loop", "wait -> model call us", "wait -> backward pass us")))
    extra = {name: rows[1][i] - rows[0][i] for i, name in ((1, "model"), (2, "backward"))}
    print(f"fe_ray's b0 over the plain loop: +{extra['model']:.1f} us to the model call, "
          f"+{extra['backward']:.1f} us to the backward pass")
    payload = {"benchmark": "step_gap", "environment": harness.environment(args.threads or 1, device),
               "args": vars(args), "results": results, "b0_over_a_sync_us": extra}
    if args.profile:
        profiler = cProfile.Profile()
        with network(mode="train", epoch=1, desired_output_keys={"ce"}):
            profiler.enable()
            for step in range(args.profile):
                network.run_step(batches[step % len(batches)])
            profiler.disable()
        payload["profile_b0_us_per_step"] = own_time(profiler, args.profile)
        print(f"b0 under cProfile, {args.profile} steps: fe_ray's own code "
              f"{sum(payload['profile_b0_us_per_step'].values()):.1f} us a step; its costliest functions:")
        top = sorted(payload["profile_b0_us_per_step"].items(), key=lambda item: -item[1])[:20]
        print(harness.format_table(top, ("function", "us/step")))
    return payload


def own_time(profiler: cProfile.Profile, steps: int, package: str = "fe_ray") -> dict[str, float]:
    """Microseconds per step spent in the code of ``package``'s functions (cProfile's tottime: not counting the
    functions they call), keyed ``module/path.py:line name``. The models of ``package.architecture`` are left out:
    the benchmark's LeNet is fe_ray's, and the plain loop runs the same forward."""
    marker = f"/{package}/"
    own: dict[str, float] = {}
    for (filename, line, name), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        if marker in filename and f"{marker}architecture/" not in filename:
            key = f"{filename.rsplit(marker, 1)[1]}:{line} {name}"
            own[key] = own.get(key, 0.0) + row[2] / steps * 1e6
    return own


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", choices=(*MODELS, *PROBE_MODELS), default="lenet")
    parser.add_argument("--steps", type=int, default=0, help="steps per repeat (default 500, quick 20)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="then profile b0 for STEPS steps and list fe_ray's own time per function")
    args = parser.parse_args(argv)
    device, _, batch_size, repeats, batches = one_process_setup(args)
    import torch

    from fe_ray.backend import torch_step

    # Both loops' moments: the model's call, the backward pass's start (loss.backward() and autograd.grad both go
    # through this function of torch.autograd) and the end of the step's wait for the device. Restored at the end:
    # the script also runs inside the test suite's process.
    saved = torch.autograd._engine_run_backward, torch_step._to_host
    torch.autograd._engine_run_backward = _marking("backward", saved[0])
    torch_step._to_host = _marking("waited", saved[1], after=True)
    try:
        payload = _measure(args, device, batches, batch_size, repeats)
    finally:
        torch.autograd._engine_run_backward, torch_step._to_host = saved
    harness.save_results("step_gap_quick" if args.quick else "step_gap", payload, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
