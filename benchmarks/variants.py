"""The ways of training that benchmarks/throughput.py measures side by side (its variants), and their factory.

Each variant is a :class:`Variant`: ``prepare()`` once (build, start actors, warm up), then ``measure()`` per
alternating repeat, returning samples/s. The keys and what they stand for are listed in throughput.py's docstring;
:func:`build_variants` makes those asked for. benchmarks/profile_step.py profiles one of them.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from benchmarks import harness, step_probe

#: Untimed steps before the timed ones: first-call costs (actor start, tracing, allocator) stay out of the figures.
WARMUP_STEPS = 5


#: Ray's logical GPU share of each GPU-holding actor (fe_ray replica, hand-written rank, plain loop in an actor)
#: in a CUDA run. Every variant is prepared before any is measured, so all of them hold their actors at once: with a
#: share of 1/N per replica, c (1 x 1.0), d (2 x 0.5) and e (2 x 0.5) would ask for 3 GPUs of a 1-GPU machine and d
#: would never be placed. Up to 8 such actors share one GPU; the share is only Ray's bookkeeping (every actor sees
#: the same device), and any fraction below 1 makes fe_ray use gloo, as the hand-written ranks (e) do.
GPU_SHARE = 1 / 8


def gpu_share(device: str) -> float:
    """The ``num_gpus`` of one GPU-holding actor on ``device`` (:data:`GPU_SHARE` on cuda, 0 on the CPU)."""
    return GPU_SHARE if device == "cuda" else 0.0


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


class PlainShuffled(PlainTorch):
    """(a_shuffled): the plain loop drawing each batch as a real training loop does, by gathering a shuffled epoch's
    rows from the whole dataset every step (numpy fancy indexing, as fe_ray's Pipeline gathers a NumpyDataset's
    batch); a takes views of pre-cut consecutive batches, which costs nothing. b / a_shuffled compares fe_ray's
    Estimator with a loop doing the same data work."""

    def prepare(self) -> None:
        import numpy as np

        super().prepare()
        data, size = self.cfg["data"], self.cfg["batch_size"]
        order = np.random.default_rng(0).permutation(len(data["y"]))
        self.indices = [order[i * size:(i + 1) * size] for i in range(len(self.batches))]

    def measure(self) -> float:
        x, y, trainer = self.cfg["data"]["x"], self.cfg["data"]["y"], self.trainer
        start = time.perf_counter()
        loss = None
        for rows in self.indices:
            loss = trainer.step(x[rows], y[rows])
        if loss is not None:
            float(loss.detach())
        return len(self.indices) * self.cfg["batch_size"] / (time.perf_counter() - start)


class PlainLoopInActor(Variant):
    """(a_malloc, a_malloc_tf): the plain loop in a Ray actor with fe_ray's replica environment (its thread share,
    glibc malloc settings and priority, :func:`fe_ray.distributed.cluster.replica_env`): what the hand-written loop
    itself gains or loses in the process and settings fe_ray gives its replicas, so that c / a_malloc is fe_ray's own
    cost at equal settings. ``framework="tf"``: the plain ``tf.function`` loop on the TF data."""

    def __init__(self, key: str, cfg: dict[str, Any], framework: str = "torch") -> None:
        super().__init__(key, cfg)
        self.framework = framework

    def prepare(self) -> None:
        import ray

        from benchmarks.baselines import PlainLoopActor, batches_of
        from fe_ray.distributed.cluster import replica_env

        cfg = self.cfg
        harness.init_ray(cfg["ray_cpus"])
        threads = cfg["threads"]
        remote = ray.remote(PlainLoopActor).options(num_cpus=threads, num_gpus=gpu_share(cfg["device"]),
                                                    runtime_env=replica_env(None, threads))
        self.actor = remote.remote(cfg["model"], threads, cfg["device"], self.framework)
        data = cfg["data_tf"] if self.framework == "tf" else cfg["data"]
        batches = batches_of(data, cfg["batch_size"])[:cfg["steps"]]
        self.count = len(batches)
        self.batches = ray.put(batches)
        ray.get(self.actor.run.remote(batches[:WARMUP_STEPS]), timeout=harness.REMOTE_TIMEOUT_S)

    def measure(self) -> float:
        import ray

        seconds = ray.get(self.actor.run.remote(self.batches), timeout=harness.REMOTE_TIMEOUT_S)
        return self.count * self.cfg["batch_size"] / seconds

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
            gpus = gpu_share(cfg["device"])
            remote = ray.remote(num_cpus=1, num_gpus=gpus, runtime_env=runtime_env)(DPWorker)
            self.workers = [remote.remote(r, self.n, port, cfg["model"], threads, cfg["device"])
                            for r in range(self.n)]
            data = cfg["data"]
        self.actor_threads = ray.get([w.setup.remote() for w in self.workers], timeout=harness.REMOTE_TIMEOUT_S)
        self.batches = batches_of(data, cfg["batch_size"])[:cfg["steps"]]
        self._run(self.batches[:WARMUP_STEPS])
        if self.local_data:
            ray.get([w.run_local.remote(WARMUP_STEPS, cfg["batch_size"] // self.n) for w in self.workers],
                    timeout=harness.REMOTE_TIMEOUT_S)

    def _run(self, batches: list[dict[str, Any]]) -> float:
        import ray

        start = time.perf_counter()
        per = self.cfg["batch_size"] // self.n
        for batch in batches:
            refs = [w.step.remote(batch["x"][r * per:(r + 1) * per], batch["y"][r * per:(r + 1) * per])
                    for r, w in enumerate(self.workers)]
            ray.get(refs, timeout=harness.REMOTE_TIMEOUT_S)
        return time.perf_counter() - start

    def measure(self) -> float:
        import ray

        cfg = self.cfg
        if self.local_data:
            per = cfg["batch_size"] // self.n
            seconds = max(ray.get([w.run_local.remote(cfg["steps"], per) for w in self.workers],
                                  timeout=harness.REMOTE_TIMEOUT_S))
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
            res["GPU"] = gpu_share(cfg["device"])
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
        from fe_ray.dataset import NumpyDataset

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
        self.dataset = NumpyDataset({k: v[:n] for k, v in data.items()})
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
            phases = step_probe.breakdown(calls, stamps, last=self.cfg["steps"])
            self.phases.append({**phases, "driver_cpu": timer.thread_cpu_per_step()})
        return timer.samples_per_second(self.cfg["batch_size"])

    def measure(self) -> float:
        return self.fit()

    def close(self) -> None:
        shutdown = getattr(self.network, "shutdown", None)
        if callable(shutdown):
            shutdown()
        if self.step_log is not None:
            shutil.rmtree(self.step_log.parent, ignore_errors=True)


def make_timing_trace(skip: int) -> Any:
    """A Trace recording perf_counter and the thread's CPU time at the end of every train batch (steps after
    ``skip`` are timed)."""
    from fe_ray.trace import Trace

    class StepTimer(Trace):
        """Timestamps batch ends; throughput is taken between batch ``skip`` and the last batch."""

        def __init__(self) -> None:
            super().__init__(mode="train")
            self.stamps: list[float] = []
            self.cpu_stamps: list[float] = []

        def on_batch_end(self, data: Any) -> None:
            self.stamps.append(time.perf_counter())
            self.cpu_stamps.append(time.thread_time())

        def samples_per_second(self, batch_size: int) -> float:
            timed = self._timed(self.stamps)
            return (len(timed) - 1) * batch_size / (timed[-1] - timed[0])

        def thread_cpu_per_step(self) -> float:
            """CPU seconds the Estimator's thread used per timed step (with replicas: the driver's own work)."""
            timed = self._timed(self.cpu_stamps)
            return (timed[-1] - timed[0]) / (len(timed) - 1)

        def _timed(self, stamps: list[float]) -> list[float]:
            if len(stamps) < skip + 1:
                raise RuntimeError(f"StepTimer saw only {len(stamps)} batches.")
            return stamps[skip - 1:]

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


def ray_unavailable() -> str:
    """Why the variants that need Ray cannot run here ('' where they can), e.g. a GPU machine without Ray."""
    try:
        import ray  # noqa: F401

        import fe_ray.distributed  # noqa: F401
    except ImportError as err:
        return f"{type(err).__name__}: {err}"
    return ""


#: Ray's default worker niceness, which fe_ray's replicas ran at before 2026-11-25 (c_nice15, d_nice15), and the
#: driver's priority for the hand-written ranks (e_nice0), as fe_ray now gives its replicas.
RAY_NICENESS = {"RAY_worker_niceness": "15"}
NICE0 = {"RAY_worker_niceness": "0"}


def build_variants(cfg: dict[str, Any], framework: str, only: set[str] | None) -> tuple[dict[str, Variant],
                                                                                      dict[str, str]]:
    """The variants of ``framework`` to run (keys without their ``_tf`` suffix in ``only``; None: all) and, for
    those that cannot run here, why. ``cfg["tf_distributed"]`` False leaves out fe_ray's TF replica variants."""
    skipped: dict[str, str] = {}
    variants: dict[str, Variant] = {}
    no_ray = ray_unavailable()

    def add(key: str, factory: Callable[[], Variant], needs_ray: bool = True, reason: str = "") -> None:
        if only and key.removesuffix("_tf") not in only:
            return
        reason = reason or (no_ray if needs_ray else "")
        if reason:
            skipped[key] = reason
        else:
            variants[key] = factory()

    no_glibc = {"GLIBC_TUNABLES": ""}  # fe_ray's documented opt-out of its replicas' malloc settings
    # The replicas' malloc settings before the top pad (2026-11-25): a user's MALLOC_* variable replaces fe_ray's.
    no_pad = {key: value for key, value in _malloc_env().items() if key != "MALLOC_TOP_PAD_"}
    # c and d with one of these replica environments each: c_glibc, d_nopad, c_nice15, ... (TF: with _tf).
    replica_envs = (("glibc", no_glibc), ("nopad", no_pad), ("nice15", RAY_NICENESS))
    if framework == "torch":
        add("a", lambda: PlainTorch("a", cfg), needs_ray=False)
        add("a_twin", lambda: PlainTorch("a_twin", cfg), needs_ray=False)
        add("a_shuffled", lambda: PlainShuffled("a_shuffled", cfg), needs_ray=False)
        if cfg["device"] == "cuda":
            add("a_sync", lambda: PlainTorch("a_sync", cfg, sync_each_step=True), needs_ray=False)
        add("b0", lambda: FeNetworkLoop("b0", cfg, "torch"), needs_ray=False)
        add("b", lambda: FeEstimator("b", cfg, "torch"), needs_ray=False)
        add("c", lambda: FeEstimator("c", cfg, "torch", 1))
        add("d", lambda: FeEstimator("d", cfg, "torch", 2))
        add("b_ops", lambda: FeEstimator("b_ops", cfg, "torch", pipeline_ops=True), needs_ray=False)
        add("c_ops", lambda: FeEstimator("c_ops", cfg, "torch", 1, pipeline_ops=True))
        for transport in ("calls", "compiled"):
            for letter, replicas in (("c", 1), ("d", 2)):
                key = f"{letter}_{transport}"
                add(key, lambda key=key, n=replicas, t=transport: FeEstimator(key, cfg, "torch", n, t))
        add("e", lambda: GlooDP("e", {**cfg, "replicas": 2}))
        add("e_local", lambda: GlooDP("e_local", {**cfg, "replicas": 2}, local_data=True))
        add("a_malloc", lambda: PlainLoopInActor("a_malloc", cfg))
        for letter, replicas in (("c", 1), ("d", 2)):
            for suffix, env in replica_envs:
                key = f"{letter}_{suffix}"
                add(key, lambda key=key, n=replicas, env=env: FeEstimator(key, cfg, "torch", n, env_vars=env))
        add("e_malloc", lambda: GlooDP("e_malloc", {**cfg, "replicas": 2}, env_vars=_malloc_env()))
        add("e_nice0", lambda: GlooDP("e_nice0", {**cfg, "replicas": 2}, env_vars=NICE0))
    else:
        add("a_tf", lambda: PlainTF("a_tf", cfg), needs_ray=False)
        add("a_twin_tf", lambda: PlainTF("a_twin_tf", cfg), needs_ray=False)
        add("b0_tf", lambda: FeNetworkLoopTF("b0_tf", cfg, "tf"), needs_ray=False)
        add("b_tf", lambda: FeEstimator("b_tf", cfg, "tf"), needs_ray=False)
        # fe_ray's TF replica variants; --no-tf-distributed leaves them out.
        off = "" if cfg.get("tf_distributed", False) else "left out (--no-tf-distributed)"
        add("c_tf", lambda: FeEstimator("c_tf", cfg, "tf", 1), reason=off)
        add("d_tf", lambda: FeEstimator("d_tf", cfg, "tf", 2), reason=off)
        add("b_ops_tf", lambda: FeEstimator("b_ops_tf", cfg, "tf", pipeline_ops=True), needs_ray=False)
        add("c_ops_tf", lambda: FeEstimator("c_ops_tf", cfg, "tf", 1, pipeline_ops=True), reason=off)
        for transport in ("calls", "compiled"):
            for letter, replicas in (("c", 1), ("d", 2)):
                key = f"{letter}_{transport}_tf"
                add(key, lambda key=key, n=replicas, t=transport: FeEstimator(key, cfg, "tf", n, t), reason=off)
        for letter, replicas in (("c", 1), ("d", 2)):
            for suffix, env in replica_envs:
                key = f"{letter}_{suffix}_tf"
                add(key, lambda key=key, n=replicas, env=env: FeEstimator(key, cfg, "tf", n, env_vars=env), reason=off)
        add("e_tf", lambda: GlooDP("e_tf", {**cfg, "replicas": 2}, framework="tf"))
        add("a_malloc_tf", lambda: PlainLoopInActor("a_malloc_tf", cfg, "tf"))
        add("e_nice0_tf", lambda: GlooDP("e_nice0_tf", {**cfg, "replicas": 2}, framework="tf", env_vars=NICE0))
    return variants, skipped


def _malloc_env() -> dict[str, str]:
    from fe_ray.allocator import MALLOC_ENV

    return dict(MALLOC_ENV)
