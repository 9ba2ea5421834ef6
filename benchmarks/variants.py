"""The ways of training that benchmarks/throughput.py measures side by side (its variants), and their factory.

Each variant is a :class:`~benchmarks.plain_variants.Variant`: ``prepare()`` once (build, start actors, warm up),
then ``measure()`` per alternating repeat, returning samples/s. The keys and what they stand for are listed in
throughput.py's docstring; :func:`build_variants` makes those asked for. The fe_ray variants are here, the
hand-written loops in :mod:`benchmarks.plain_variants`. benchmarks/profile_step.py profiles one of them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from benchmarks import harness, step_probe
from benchmarks.plain_variants import (
    GPU_SHARE,
    WARMUP_STEPS,
    GlooDP,
    PlainLoopInActor,
    PlainLoopServed,
    PlainShuffled,
    PlainTF,
    PlainTorch,
    Variant,
    gpu_share,
)
from fe_ray.distributed.step_stream import EARLY_ANSWER_ENV, SPIN_ENV

#: FE_RAY_STREAM_SPIN_US of the c_spin / d_spin variants.
SPIN_US = 5000


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

    def ray_actors(self) -> int:
        return self.num_replicas or 0

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
                 env_vars: dict[str, str] | None = None, spin_us: int | None = None,
                 num_process: int | None = None) -> None:
        super().__init__(key, cfg)
        self.num_process = num_process  # the Pipeline's worker threads (None: its default, batches made in line)
        self.framework = framework
        self.num_replicas = num_replicas
        self.transport = transport
        self.pipeline_ops = pipeline_ops
        self.env_vars = env_vars
        # FE_RAY_STREAM_SPIN_US for the driver (set while the step stream is made) and the replicas.
        self.spin_env = {SPIN_ENV: str(spin_us)} if spin_us is not None else {}

    def ray_actors(self) -> int:
        return self.num_replicas or 0

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
        if self.env_vars or self.spin_env:
            env = {**(env or {}), "env_vars": {**(env or {}).get("env_vars", {}), **(self.env_vars or {}),
                                               **self.spin_env}}
        self.network, self.model = fe_network(cfg, self.framework, self.num_replicas, self.transport, env)
        data = cfg["data"] if self.framework == "torch" else cfg["data_tf"]
        n = (WARMUP_STEPS + cfg["steps"]) * cfg["batch_size"]
        self.dataset = NumpyDataset({k: v[:n] for k, v in data.items()})
        ops = []
        if self.pipeline_ops:
            from fe_ray.op.numpyop.univariate import Minmax

            ops = [Minmax(inputs="x", outputs="x")]
        self.pipeline = fe.Pipeline(train_data=self.dataset, batch_size=cfg["batch_size"], ops=ops,
                                    num_process=self.num_process)
        self.fit_walls: list[float] = []
        self.phases: list[dict[str, float]] = []  # per fit: step_probe.breakdown
        with patched_environ(self.spin_env):  # the driver's end of the stream reads it when the replicas start
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


@contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set inside the block, as it was after it."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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
    replica_envs = (("glibc", no_glibc), ("nopad", no_pad), ("nice15", RAY_NICENESS),
                    ("late", {EARLY_ANSWER_ENV: "0"}))
    if framework == "torch":
        add("a", lambda: PlainTorch("a", cfg), needs_ray=False)
        add("a_twin", lambda: PlainTorch("a_twin", cfg), needs_ray=False)
        add("a_shuffled", lambda: PlainShuffled("a_shuffled", cfg), needs_ray=False)
        if cfg["device"] == "cuda":
            add("a_sync", lambda: PlainTorch("a_sync", cfg, sync_each_step=True), needs_ray=False)
        add("b0", lambda: FeNetworkLoop("b0", cfg, "torch"), needs_ray=False)
        add("b", lambda: FeEstimator("b", cfg, "torch"), needs_ray=False)
        # The Pipeline prepares the next batch in a worker thread while the step runs (num_process=1).
        add("b_prefetch", lambda: FeEstimator("b_prefetch", cfg, "torch", num_process=1), needs_ray=False)
        add("c", lambda: FeEstimator("c", cfg, "torch", 1))
        add("d", lambda: FeEstimator("d", cfg, "torch", 2))
        # The driver and the replicas poll their streams instead of sleeping (FE_RAY_STREAM_SPIN_US, off by
        # default): 5 ms covers a GPU LeNet step's wait for the answers and the replica's wait for the next batch.
        add("c_spin", lambda: FeEstimator("c_spin", cfg, "torch", 1, spin_us=SPIN_US))
        add("d_spin", lambda: FeEstimator("d_spin", cfg, "torch", 2, spin_us=SPIN_US))
        add("b_ops", lambda: FeEstimator("b_ops", cfg, "torch", pipeline_ops=True), needs_ray=False)
        add("c_ops", lambda: FeEstimator("c_ops", cfg, "torch", 1, pipeline_ops=True))
        for transport in ("calls", "compiled"):
            for letter, replicas in (("c", 1), ("d", 2)):
                key = f"{letter}_{transport}"
                add(key, lambda key=key, n=replicas, t=transport: FeEstimator(key, cfg, "torch", n, t))
        add("e", lambda: GlooDP("e", {**cfg, "replicas": 2}))
        add("e_local", lambda: GlooDP("e_local", {**cfg, "replicas": 2}, local_data=True))
        add("a_malloc", lambda: PlainLoopInActor("a_malloc", cfg))
        add("a_served", lambda: PlainLoopServed("a_served", cfg))
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


__all__ = ["FeEstimator", "FeNetworkLoop", "FeNetworkLoopTF", "GPU_SHARE", "GlooDP", "PlainLoopInActor",
           "PlainLoopServed", "PlainShuffled", "PlainTF", "PlainTorch", "Variant", "WARMUP_STEPS", "build_variants",
           "distributed_kwargs", "fe_network", "gpu_share", "make_timing_trace", "ray_unavailable"]
