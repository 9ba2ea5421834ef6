"""Training-step throughput (samples/s): hand-written loops vs fe_ray, same model/data/batch/thread budget.

Variants (torch):
    a   plain single-process PyTorch loop
    b0  fe_ray in-process ``Network.run_step`` loop (no Pipeline/Estimator): isolates the Network's own cost
    b   fe_ray in-process Network + Pipeline + Estimator.fit
    c   fe_ray ``num_replicas=1`` (Estimator.fit; default ``step_transport="stream"``: one TCP stream per replica
        carries the steps)
    d   fe_ray ``num_replicas=2`` (same)
    c_calls, d_calls  (informational) c and d with ``step_transport="calls"`` (one Ray actor call per replica and
        step, the default before fe_ray had step streams)
    c_compiled, d_compiled  (informational) c and d with ``step_transport="compiled"`` (a Ray Compiled Graph)
    e   hand-written 2-rank gloo data-parallel loop on Ray actors, batches sent from the driver each step
    b_ops, c_ops  (informational) b and c with a per-sample Pipeline op (``Minmax`` on x, as the MNIST examples
        use) made on the driver's thread: in-process it adds to every step, with replicas the Pipeline makes the
        next batch while the replicas compute (compare c_ops/c with b_ops/b)
    e_local  (informational) the same ranks training on data generated inside the actors: no driver round trip
    a_malloc, e_malloc  (informational) a in a Ray actor with fe_ray's replica environment, and e with its glibc
        malloc settings (fe_ray.distributed.cluster.MALLOC_ENV): c / a_malloc and d / e_malloc compare fe_ray with
        hand-written loops at equal allocator settings
    c_glibc, d_glibc  (informational) c and d with glibc's malloc defaults (fe_ray's opt-out, ``GLIBC_TUNABLES=""``):
        what the replicas' malloc settings change (TF: c_glibc_tf, d_glibc_tf)

``--framework tf``: the same letters with an ``_tf`` suffix: a plain ``tf.function`` loop (a_tf), fe_ray in-process
(b0_tf, b_tf) and with replicas (c_tf, d_tf and their calls / compiled twins), and e_tf, a hand-written 2-rank TF
data-parallel loop on Ray actors (tf.function gradients, one flat bucket averaged by a gloo all_reduce).

Thread budget: ``--threads`` (default: all cores) intra-op threads for in-process variants; each of N replicas
gets ``threads // N`` (min 1), for fe_ray replicas and hand-written ranks alike.

Run: ``python -m benchmarks.throughput [--model lenet|resnet|all] [--framework torch|tf] [--quick]``.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from benchmarks import harness, step_probe
from benchmarks.models import INPUT_SHAPES, MODELS, PROBE_MODELS, count_params, synthetic_data

# name -> (label, default batch size, default timed steps)
DEFAULTS = {"lenet": (32, 150), "resnet": (64, 10), "mlp": (32, 1000)}
QUICK = {"lenet": (32, 10), "resnet": (16, 2), "mlp": (32, 50)}
WARMUP_STEPS = 5
LABELS = {
    "a": "(a) plain torch loop", "a_sync": "(a_sync) plain loop, loss.item() every step",
    "b0": "(b0) fe_ray Network.run_step loop", "b": "(b) fe_ray Network+Estimator",
    "c": "(c) fe_ray num_replicas=1", "d": "(d) fe_ray num_replicas=2", "e": "(e) hand-written gloo DP x2",
    "c_compiled": "(c_compiled) c, compiled graph", "d_compiled": "(d_compiled) d, compiled graph",
    "c_compiled_tf": "(c_compiled) TF c, compiled graph", "d_compiled_tf": "(d_compiled) TF d, compiled graph",
    "b_ops": "(b_ops) b + per-sample Pipeline op", "c_ops": "(c_ops) c + per-sample Pipeline op",
    "b_ops_tf": "(b_ops) TF b + per-sample Pipeline op", "c_ops_tf": "(c_ops) TF c + per-sample Pipeline op",
    "c_calls": "(c_calls) c, actor calls", "d_calls": "(d_calls) d, actor calls",
    "c_calls_tf": "(c_calls) TF c, actor calls", "d_calls_tf": "(d_calls) TF d, actor calls",
    "e_local": "(e_local) gloo DP x2, actor-local data",
    "a_malloc": "(a_malloc) a in an actor, replica env", "e_malloc": "(e_malloc) e with replica malloc env",
    "c_glibc": "(c_glibc) c, glibc's malloc defaults", "d_glibc": "(d_glibc) d, glibc's malloc defaults",
    "c_glibc_tf": "(c_glibc) TF c, glibc's malloc defaults", "d_glibc_tf": "(d_glibc) TF d, glibc's malloc defaults",
    "a_tf": "(a) plain tf.function loop", "b0_tf": "(b0) fe_ray TF Network.run_step loop",
    "b_tf": "(b) fe_ray TF Network+Estimator", "c_tf": "(c) fe_ray TF num_replicas=1",
    "d_tf": "(d) fe_ray TF num_replicas=2", "e_tf": "(e) hand-written TF DP x2 (gloo)",
}
TARGETS = [("b", "a", 0.97), ("c", "a", 0.93), ("d", "e", 0.95),
           ("b_tf", "a_tf", 0.97), ("c_tf", "a_tf", 0.93), ("d_tf", "e_tf", 0.95)]


class Variant:
    """One way of training: ``prepare()`` once (build + warm up), then ``measure()`` -> samples/s per repeat."""

    def __init__(self, key: str, cfg: dict[str, Any]) -> None:
        self.key = key
        self.cfg = cfg

    def prepare(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def measure(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        """Release processes/resources."""


# ---------------------------------------------------------------------------------------------------- (a) / (e)
class PlainTorch(Variant):
    """(a): the plain loop; with ``sync_each_step`` (a_sync, GPU runs only) it also brings the loss to the host
    every step, as fe_ray does for its outputs, so a GPU cannot run ahead of the Python loop."""

    def __init__(self, key: str, cfg: dict[str, Any], sync_each_step: bool = False) -> None:
        super().__init__(key, cfg)
        self.sync_each_step = sync_each_step

    def prepare(self) -> None:
        from benchmarks.baselines import PlainTorchTrainer, batches_of

        cfg = self.cfg
        self.trainer = PlainTorchTrainer(cfg["model"], cfg["device"])
        self.batches = batches_of(cfg["data"], cfg["batch_size"])[:cfg["steps"]]
        self.trainer.run(self.batches[:WARMUP_STEPS])

    def measure(self) -> float:
        if self.sync_each_step:
            start = time.perf_counter()
            for batch in self.batches:
                float(self.trainer.step(batch["x"], batch["y"]).detach())
            seconds = time.perf_counter() - start
        else:
            seconds = self.trainer.run(self.batches)
        return len(self.batches) * self.cfg["batch_size"] / seconds


class PlainTorchActor(Variant):
    """(a_malloc): the plain loop in a Ray actor with fe_ray's replica environment (its thread share and glibc
    malloc settings, :func:`fe_ray.distributed.cluster.replica_env`): what the hand-written loop itself gains from
    the settings fe_ray gives its replicas, so that c / a_malloc is fe_ray's cost at equal allocator settings."""

    def prepare(self) -> None:
        import ray

        from benchmarks.baselines import PlainLoopActor, batches_of
        from fe_ray.distributed.cluster import replica_env

        cfg = self.cfg
        harness.init_ray(cfg["ray_cpus"])
        threads = cfg["threads"]
        remote = ray.remote(PlainLoopActor).options(num_cpus=threads, num_gpus=1 if cfg["device"] == "cuda" else 0,
                                                    runtime_env=replica_env(None, threads))
        self.actor = remote.remote(cfg["model"], threads, cfg["device"])
        batches = batches_of(cfg["data"], cfg["batch_size"])[:cfg["steps"]]
        self.count = len(batches)
        self.batches = ray.put(batches)
        ray.get(self.actor.run.remote(batches[:WARMUP_STEPS]), timeout=600)

    def measure(self) -> float:
        import ray

        return self.count * self.cfg["batch_size"] / ray.get(self.actor.run.remote(self.batches), timeout=600)

    def close(self) -> None:
        import ray

        ray.kill(self.actor)


class GlooDP(Variant):
    """Hand-written synchronous DP on ``replicas`` Ray actors (one flat gradient bucket, gloo all_reduce); torch
    ranks (:class:`~benchmarks.baselines.DPWorker`) or, with ``framework="tf"``, TF ranks
    (:class:`~benchmarks.baselines.TFDPWorker`). ``env_vars``: the ranks' extra environment (e_malloc: fe_ray's
    replica malloc settings)."""

    def __init__(self, key: str, cfg: dict[str, Any], local_data: bool = False, framework: str = "torch",
                 env_vars: dict[str, str] | None = None) -> None:
        super().__init__(key, cfg)
        self.local_data = local_data
        self.framework = framework
        self.env_vars = env_vars

    def prepare(self) -> None:
        import ray

        from benchmarks.baselines import DPWorker, TFDPWorker, batches_of

        cfg = self.cfg
        self.n = cfg["replicas"]
        harness.init_ray(cfg["ray_cpus"])
        port = harness.free_port()
        threads = max(1, cfg["threads"] // self.n)
        runtime_env = {"env_vars": self.env_vars} if self.env_vars else None
        if self.framework == "tf":
            remote = ray.remote(num_cpus=1, runtime_env=runtime_env)(TFDPWorker)
            self.workers = [remote.remote(r, self.n, port, cfg["model"], threads) for r in range(self.n)]
            data = cfg["data_tf"]
        else:
            gpus = 1.0 / self.n if cfg["device"] == "cuda" else 0
            remote = ray.remote(num_cpus=1, num_gpus=gpus, runtime_env=runtime_env)(DPWorker)
            self.workers = [remote.remote(r, self.n, port, cfg["model"], threads, cfg["device"])
                            for r in range(self.n)]
            data = cfg["data"]
        self.actor_threads = ray.get([w.setup.remote() for w in self.workers], timeout=600)
        self.batches = batches_of(data, cfg["batch_size"])[:cfg["steps"]]
        self._run(self.batches[:WARMUP_STEPS])
        if self.local_data:
            ray.get([w.run_local.remote(WARMUP_STEPS, cfg["batch_size"] // self.n) for w in self.workers])

    def _run(self, batches: list[dict[str, Any]]) -> float:
        import ray

        start = time.perf_counter()
        per = self.cfg["batch_size"] // self.n
        for batch in batches:
            refs = [w.step.remote(batch["x"][r * per:(r + 1) * per], batch["y"][r * per:(r + 1) * per])
                    for r, w in enumerate(self.workers)]
            ray.get(refs)
        return time.perf_counter() - start

    def measure(self) -> float:
        import ray

        cfg = self.cfg
        if self.local_data:
            per = cfg["batch_size"] // self.n
            seconds = max(ray.get([w.run_local.remote(cfg["steps"], per) for w in self.workers]))
            return cfg["steps"] * per * self.n / seconds
        return len(self.batches) * cfg["batch_size"] / self._run(self.batches)

    def close(self) -> None:
        import ray

        for w in self.workers:
            ray.kill(w)


# ---------------------------------------------------------------------------------------------------- fe_ray
def fe_network(cfg: dict[str, Any], framework: str, num_replicas: int | None,
               transport: str | None = None, runtime_env: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """Build the fe_ray LeNet/ResNet network: ModelOp -> CrossEntropy -> UpdateOp (Adam, as fe.build('adam')).
    ``runtime_env``: the replicas' Ray runtime environment (e.g. :func:`benchmarks.step_probe.runtime_env`)."""
    import fe_ray as fe
    from benchmarks.models import tf_model_fn, torch_model_fn
    from fe_ray.op.tensorop.loss import CrossEntropy
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp

    model_fn = torch_model_fn(cfg["model"]) if framework == "torch" else tf_model_fn(cfg["model"])
    model = fe.build(model_fn=model_fn, optimizer_fn="adam")
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
           CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
           UpdateOp(model=model, loss_name="ce")]
    kwargs: dict[str, Any] = {}
    if num_replicas is not None:
        kwargs = distributed_kwargs(cfg, num_replicas)
        if transport is not None:
            kwargs["step_transport"] = transport
        if runtime_env is not None:
            kwargs["runtime_env"] = runtime_env
    return fe.Network(ops=ops, num_replicas=num_replicas, **kwargs), model


def distributed_kwargs(cfg: dict[str, Any], num_replicas: int) -> dict[str, Any]:
    """Options giving each fe_ray replica the same resources as a hand-written rank (threads // N CPUs)."""
    import inspect

    from fe_ray.distributed import RayNetwork

    params = inspect.signature(RayNetwork).parameters
    threads = max(1, cfg["threads"] // num_replicas)
    kwargs: dict[str, Any] = {}
    if "resources_per_replica" in params:
        res: dict[str, float] = {"CPU": threads}
        if cfg["device"] == "cuda":
            res["GPU"] = 1.0 / num_replicas
        kwargs["resources_per_replica"] = res
    return kwargs


class FeNetworkLoop(Variant):
    """(b0): ``with network(mode='train', epoch=1): network.run_step(batch)`` per batch, no Pipeline/Estimator."""

    def __init__(self, key: str, cfg: dict[str, Any], framework: str, num_replicas: int | None = None) -> None:
        super().__init__(key, cfg)
        self.framework = framework
        self.num_replicas = num_replicas

    def prepare(self) -> None:
        from benchmarks.baselines import batches_of

        if self.num_replicas is not None:
            harness.init_ray(self.cfg["ray_cpus"])
        self.network, self.model = fe_network(self.cfg, self.framework, self.num_replicas)
        self.batches = batches_of(self.cfg["data"], self.cfg["batch_size"])[:self.cfg["steps"]]
        self.epoch = 1
        self.context_costs: list[float] = []
        self._run(self.batches[:WARMUP_STEPS])
        self.context_costs.clear()

    def _run(self, batches: list[dict[str, Any]]) -> float:
        """Open a train context, run one untimed step (per-context costs such as a tf.function retrace are
        recorded in ``self.context_costs``), then time ``batches``."""
        start = time.perf_counter()
        with self.network(mode="train", epoch=self.epoch, desired_output_keys={"ce"}):
            float(self.network.run_step(batches[0])["ce"])
            self.context_costs.append(time.perf_counter() - start)
            start = time.perf_counter()
            for batch in batches:
                out = self.network.run_step(batch)
            float(out["ce"])  # the loss reaches the host, as an Estimator would log it
            seconds = time.perf_counter() - start
        return seconds

    def measure(self) -> float:
        return len(self.batches) * self.cfg["batch_size"] / self._run(self.batches)

    def close(self) -> None:
        shutdown = getattr(self.network, "shutdown", None)
        if callable(shutdown):
            shutdown()


class FeEstimator(Variant):
    """(b)/(c)/(d): Estimator.fit for WARMUP_STEPS + steps steps; timed between batch WARMUP_STEPS and the last."""

    def __init__(self, key: str, cfg: dict[str, Any], framework: str, num_replicas: int | None = None,
                 transport: str | None = None, pipeline_ops: bool = False,
                 env_vars: dict[str, str] | None = None) -> None:
        super().__init__(key, cfg)
        self.framework = framework
        self.num_replicas = num_replicas
        self.transport = transport
        self.pipeline_ops = pipeline_ops
        self.env_vars = env_vars

    def prepare(self) -> None:
        import fe_ray as fe

        if self.num_replicas is not None:
            harness.init_ray(self.cfg["ray_cpus"])
        cfg = self.cfg
        # With the default transport, each step is split into its phases where they happen (benchmarks/step_probe.py).
        self.step_log = None
        if self.num_replicas and self.transport in (None, "stream"):
            self.step_log = Path(tempfile.mkdtemp(prefix="fe_ray_bench_")) / f"{self.key}_steps.log"
        env = step_probe.runtime_env(self.step_log) if self.step_log else None
        if self.env_vars:
            env = {**(env or {}), "env_vars": {**(env or {}).get("env_vars", {}), **self.env_vars}}
        self.network, self.model = fe_network(cfg, self.framework, self.num_replicas, self.transport, env)
        data = cfg["data"] if self.framework == "torch" else cfg["data_tf"]
        n = (WARMUP_STEPS + cfg["steps"]) * cfg["batch_size"]
        self.dataset = make_dataset({k: v[:n] for k, v in data.items()})
        ops = []
        if self.pipeline_ops:
            from fe_ray.op.numpyop.univariate import Minmax

            ops = [Minmax(inputs="x", outputs="x")]
        self.pipeline = fe.Pipeline(train_data=self.dataset, batch_size=cfg["batch_size"], ops=ops)
        self.fit_walls: list[float] = []
        self.phases: list[dict[str, float]] = []  # per fit: step_probe.breakdown
        self.fit()  # warm-up run (first-call costs: actor start, tracing, allocator)
        self.fit_walls.clear()
        self.phases.clear()

    def fit(self) -> float:
        import fe_ray as fe

        timer = make_timing_trace(WARMUP_STEPS)
        estimator = fe.Estimator(pipeline=self.pipeline, network=self.network, epochs=1, traces=[timer],
                                 log_steps=None)
        calls: list[tuple[float, float]] = []
        probe = step_probe.driver_stamps(calls) if self.step_log is not None else nullcontext()
        start = time.perf_counter()
        with probe:
            estimator.fit()
        self.fit_walls.append(time.perf_counter() - start)
        if self.step_log is not None:
            stamps = step_probe.collect(self.step_log, self.num_replicas)
            self.phases.append(step_probe.breakdown(calls, stamps, last=self.cfg["steps"]))
        return timer.samples_per_second(self.cfg["batch_size"])

    def measure(self) -> float:
        return self.fit()

    def close(self) -> None:
        shutdown = getattr(self.network, "shutdown", None)
        if callable(shutdown):
            shutdown()
        if self.step_log is not None:
            shutil.rmtree(self.step_log.parent, ignore_errors=True)


def make_dataset(data: dict[str, Any]) -> Any:
    """fe_ray's NumpyDataset when present, else the dict itself."""
    try:
        from fe_ray.dataset import NumpyDataset

        return NumpyDataset(data)
    except ImportError:
        return data


def make_timing_trace(skip: int) -> Any:
    """A Trace recording perf_counter at the end of every train batch (steps after ``skip`` are timed)."""
    from fe_ray.trace import Trace

    class StepTimer(Trace):
        """Timestamps batch ends; throughput is taken between batch ``skip`` and the last batch."""

        def __init__(self) -> None:
            super().__init__(mode="train")
            self.stamps: list[float] = []

        def on_batch_end(self, data: Any) -> None:
            self.stamps.append(time.perf_counter())

        def samples_per_second(self, batch_size: int) -> float:
            timed = self.stamps[skip - 1:]
            if len(timed) < 2:
                raise RuntimeError(f"StepTimer saw only {len(self.stamps)} batches.")
            return (len(timed) - 1) * batch_size / (timed[-1] - timed[0])

    return StepTimer()


# ---------------------------------------------------------------------------------------------------- tensorflow
class PlainTF(Variant):
    def prepare(self) -> None:
        from benchmarks.baselines import PlainTFTrainer, batches_of

        self.trainer = PlainTFTrainer(self.cfg["model"])
        self.batches = batches_of(self.cfg["data_tf"], self.cfg["batch_size"])[:self.cfg["steps"]]
        self.trainer.run(self.batches[:WARMUP_STEPS])

    def measure(self) -> float:
        return len(self.batches) * self.cfg["batch_size"] / self.trainer.run(self.batches)


class FeNetworkLoopTF(FeNetworkLoop):
    def prepare(self) -> None:
        cfg = dict(self.cfg)
        cfg["data"] = cfg["data_tf"]
        self.cfg = cfg
        super().prepare()


# ---------------------------------------------------------------------------------------------------- driver
def availability() -> dict[str, str]:
    """Which fe_ray pieces exist now: name -> '' (available) or the reason it is missing."""
    import importlib

    checks = {"network_ops": "fe_ray.op.tensorop.model", "estimator": "fe_ray.estimator",
              "pipeline": "fe_ray.pipeline", "trace": "fe_ray.trace", "distributed": "fe_ray.distributed"}
    out = {}
    for name, module in checks.items():
        try:
            mod = importlib.import_module(module)
            if name == "distributed" and not hasattr(mod, "RayNetwork"):
                raise ImportError("fe_ray.distributed has no RayNetwork yet")
            if name == "trace" and not hasattr(mod, "Trace"):
                raise ImportError("fe_ray.trace has no Trace yet")
            out[name] = ""
        except Exception as err:  # noqa: BLE001 - any import failure means "not available yet"
            out[name] = f"{type(err).__name__}: {err}"
    return out


def build_variants(cfg: dict[str, Any], framework: str, only: set[str] | None,
                   avail: dict[str, str]) -> tuple[dict[str, Variant], dict[str, str]]:
    """Variants to run and, for those skipped, why."""
    skipped: dict[str, str] = {}
    est_ok = not (avail["estimator"] or avail["pipeline"] or avail["trace"])
    est_reason = avail["estimator"] or avail["pipeline"] or avail["trace"]
    dist_ok = not avail["distributed"]
    variants: dict[str, Variant] = {}

    def add(key: str, factory: Callable[[], Variant], ok: bool = True, reason: str = "") -> None:
        if only and key.removesuffix("_tf") not in only:
            return
        if ok:
            variants[key] = factory()
        else:
            skipped[key] = reason

    if framework == "torch":
        add("a", lambda: PlainTorch("a", cfg))
        if cfg["device"] == "cuda":
            add("a_sync", lambda: PlainTorch("a_sync", cfg, sync_each_step=True))
        add("b0", lambda: FeNetworkLoop("b0", cfg, "torch"), not avail["network_ops"], avail["network_ops"])
        add("b", lambda: FeEstimator("b", cfg, "torch"), est_ok, est_reason)
        add("c", lambda: FeEstimator("c", cfg, "torch", 1), est_ok and dist_ok, est_reason or avail["distributed"])
        add("d", lambda: FeEstimator("d", cfg, "torch", 2), est_ok and dist_ok, est_reason or avail["distributed"])
        add("b_ops", lambda: FeEstimator("b_ops", cfg, "torch", pipeline_ops=True), est_ok, est_reason)
        add("c_ops", lambda: FeEstimator("c_ops", cfg, "torch", 1, pipeline_ops=True), est_ok and dist_ok,
            est_reason or avail["distributed"])
        for transport in ("calls", "compiled"):
            for letter, replicas in (("c", 1), ("d", 2)):
                key = f"{letter}_{transport}"
                add(key, lambda key=key, n=replicas, t=transport: FeEstimator(key, cfg, "torch", n, t),
                    est_ok and dist_ok, est_reason or avail["distributed"])
        add("e", lambda: GlooDP("e", {**cfg, "replicas": 2}))
        add("e_local", lambda: GlooDP("e_local", {**cfg, "replicas": 2}, local_data=True))
        add("a_malloc", lambda: PlainTorchActor("a_malloc", cfg), dist_ok, avail["distributed"])
        for letter, replicas in (("c", 1), ("d", 2)):  # fe_ray's documented opt-out of its malloc settings
            add(f"{letter}_glibc", lambda key=f"{letter}_glibc", n=replicas: FeEstimator(
                key, cfg, "torch", n, env_vars={"GLIBC_TUNABLES": ""}), est_ok and dist_ok,
                est_reason or avail["distributed"])
        add("e_malloc", lambda: GlooDP("e_malloc", {**cfg, "replicas": 2}, env_vars=_malloc_env()), dist_ok,
            avail["distributed"])
    else:
        add("a_tf", lambda: PlainTF("a_tf", cfg))
        add("b0_tf", lambda: FeNetworkLoopTF("b0_tf", cfg, "tf"), not avail["network_ops"], avail["network_ops"])
        add("b_tf", lambda: FeEstimator("b_tf", cfg, "tf"), est_ok, est_reason)
        tf_dist = dist_ok and cfg.get("tf_distributed", False)
        reason = est_reason or avail["distributed"] or "fe_ray's distributed path does not run TF (yet)"
        add("c_tf", lambda: FeEstimator("c_tf", cfg, "tf", 1), est_ok and tf_dist, reason)
        add("d_tf", lambda: FeEstimator("d_tf", cfg, "tf", 2), est_ok and tf_dist, reason)
        add("b_ops_tf", lambda: FeEstimator("b_ops_tf", cfg, "tf", pipeline_ops=True), est_ok, est_reason)
        add("c_ops_tf", lambda: FeEstimator("c_ops_tf", cfg, "tf", 1, pipeline_ops=True), est_ok and tf_dist, reason)
        for transport in ("calls", "compiled"):
            for letter, replicas in (("c", 1), ("d", 2)):
                key = f"{letter}_{transport}_tf"
                add(key, lambda key=key, n=replicas, t=transport: FeEstimator(key, cfg, "tf", n, t),
                    est_ok and tf_dist, reason)
        for letter, replicas in (("c", 1), ("d", 2)):
            add(f"{letter}_glibc_tf", lambda key=f"{letter}_glibc_tf", n=replicas: FeEstimator(
                key, cfg, "tf", n, env_vars={"GLIBC_TUNABLES": ""}), est_ok and tf_dist, reason)
        add("e_tf", lambda: GlooDP("e_tf", {**cfg, "replicas": 2}, framework="tf"), dist_ok, avail["distributed"])
    return variants, skipped


def _malloc_env() -> dict[str, str]:
    from fe_ray.distributed.cluster import MALLOC_ENV

    return dict(MALLOC_ENV)


def run_model(model: str, args: Any, device: str, threads: int, avail: dict[str, str]) -> dict[str, Any]:
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
    variants, skipped = build_variants(cfg, args.framework, only, avail)
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
    series = harness.alternate({k: v.measure for k, v in ready.items()}, repeats, "samples/s",
                               quiet_wait_s=args.wait_quiet)
    for variant in ready.values():
        try:
            variant.close()
        except Exception:  # noqa: BLE001
            pass
    print(harness.series_table(series, LABELS))
    step_us = {key: 1e6 * batch_size / s.median for key, s in series.items() if s.median}
    base = "a_tf" if args.framework == "tf" else "a"
    if base in step_us:
        print(f"Median time per step and what each variant adds over {base} (on the mlp probe model, the "
              "framework's per-step cost):")
        for key, us in step_us.items():
            print(f"  {LABELS[key]}: {us:,.0f} us/step ({us - step_us[base]:+,.0f} us)")
    fixed: dict[str, dict[str, float]] = {}
    total_steps = WARMUP_STEPS + steps
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
                      for name in (*step_probe.PHASES, "replica_cpu")}
            fixed.setdefault(key, {}).update({**phases, "unaccounted_us": 1e6 * statistics.median(rest)})
            series[key].extra["phases_s"] = variant.phases
        if getattr(variant, "context_costs", None) and key in series:
            fixed[key] = {"first_step_of_context_s": statistics.median(variant.context_costs)}
            series[key].extra["first_step_of_context_s"] = variant.context_costs
    if fixed:
        print("Per-epoch fixed costs (outside the steady-state figures above) and, with replicas, each step's phases "
              "(benchmarks/step_probe.py): to_replicas (send, the replicas' wake-up and read), replica (their own "
              "step; replica_cpu: its thread's CPU time), back (answers sent, the driver's wake-up and read), driver "
              "(answers -> next step sent), all means over a fit's timed steps; unaccounted (step time - phases); "
              "medians over the repeats:")
        for key, info in fixed.items():
            print(f"  {LABELS[key]}: " + ", ".join(f"{k}={v:.3f}" for k, v in info.items()))
    checks = []
    for num, den, target in TARGETS:
        if num in variants or den in variants or num in skipped:
            # The targets are for the real models; on the probe model a ratio only restates the us/step above.
            checks.append((f"{num}/{den}", harness.ratio(series, num, den), target if model in MODELS else None,
                           ">="))
    extra = [("b0/a", "b0", "a"), ("b/a_sync", "b", "a_sync"), ("b0/a_sync", "b0", "a_sync"),
              ("d/c", "d", "c"), ("e/a", "e", "a"), ("e/e_local", "e", "e_local"),
             ("c/a_malloc", "c", "a_malloc"), ("a_malloc/a", "a_malloc", "a"), ("d/e_malloc", "d", "e_malloc"),
             ("e_malloc/e", "e_malloc", "e"), ("c/c_glibc", "c", "c_glibc"), ("d/d_glibc", "d", "d_glibc"),
             ("c_glibc/a", "c_glibc", "a"), ("d_glibc/e", "d_glibc", "e"),
             ("c_tf/c_glibc_tf", "c_tf", "c_glibc_tf"), ("d_tf/d_glibc_tf", "d_tf", "d_glibc_tf"),
             ("c_glibc_tf/a_tf", "c_glibc_tf", "a_tf"), ("d_glibc_tf/e_tf", "d_glibc_tf", "e_tf"),
             ("c_calls/a", "c_calls", "a"), ("d_calls/e", "d_calls", "e"),
             ("c_calls_tf/a_tf", "c_calls_tf", "a_tf"), ("d_calls_tf/e_tf", "d_calls_tf", "e_tf"),
             ("c_compiled/a", "c_compiled", "a"), ("d_compiled/e", "d_compiled", "e"),
             ("c_compiled_tf/a_tf", "c_compiled_tf", "a_tf"), ("d_compiled_tf/e_tf", "d_compiled_tf", "e_tf"),
             ("d_tf/c_tf", "d_tf", "c_tf"), ("e_tf/a_tf", "e_tf", "a_tf"),
             ("b0_tf/a_tf", "b0_tf", "a_tf"), ("b_ops/b", "b_ops", "b"), ("c_ops/c", "c_ops", "c"),
             ("b_ops_tf/b_tf", "b_ops_tf", "b_tf"), ("c_ops_tf/c_tf", "c_ops_tf", "c_tf")]
    for label, num, den in extra:
        if num in series and den in series:
            checks.append((label, harness.ratio(series, num, den), None, ">="))
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
    for key, reason in skipped.items():
        print(f"  not run: {LABELS.get(key, key)}: {reason}")
    params = None
    try:
        if args.framework == "torch":
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
    avail = availability()
    results = {}
    models = MODELS if args.model == "all" else (args.model,)
    for model in models:
        results[model] = run_model(model, args, device, threads, avail)
    name = "throughput" if args.framework == "torch" else "throughput_tf"
    if device == "cuda":
        name += "_cuda"
    if args.try_fix:
        name += "_fix-" + args.try_fix.replace(",", "_")
    if args.quick:
        name += "_quick"
    payload = {"benchmark": name, "environment": harness.environment(threads, device), "args": vars(args),
               "fe_ray_availability": avail, "results": results}
    path = harness.write_json(name, payload, not args.no_save)
    if path:
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
