"""The hand-written ways of training that benchmarks/throughput.py compares fe_ray with (a, a_shuffled, a_malloc, e,
and TF's a), and what every variant shares (:class:`Variant`, the warm-up length, the GPU share of an actor).

The fe_ray variants and the factory that builds them by key are in :mod:`benchmarks.variants`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from benchmarks import harness

#: Untimed steps before the timed ones: first-call costs (actor start, tracing, allocator) stay out of the figures.
WARMUP_STEPS = 5


#: Ray's logical GPU share of each GPU-holding actor (fe_ray replica, hand-written rank, plain loop in an actor)
#: in a CUDA run. Every variant is prepared before any is measured, so all of them hold their actors at once: with a
#: share of 1/N per replica, c (1 x 1.0), d (2 x 0.5) and e (2 x 0.5) would ask for 3 GPUs of a 1-GPU machine and d
#: would never be placed; with 1/8, the device suite's twelve LeNet variants held 10 actors and the first of them
#: over 8 (a_malloc) waited for a GPU share until the suite stopped the run (H200, 2026-11-26). 0.02 places 50 (every
#: torch variant together holds 31); ``throughput.py`` checks the sum before it starts any. The share is only Ray's
#: bookkeeping (every actor sees the same device), and any fraction below 1 makes fe_ray use gloo, as the
#: hand-written ranks (e) do. (0.02 is exact at Ray's four decimal places; 1/64 would be rounded.)
GPU_SHARE = 0.02


def gpu_share(device: str) -> float:
    """The ``num_gpus`` of one GPU-holding actor on ``device`` (:data:`GPU_SHARE` on cuda, 0 on the CPU)."""
    return GPU_SHARE if device == "cuda" else 0.0


def check_gpu_shares(variants: Sequence[Variant], device: str) -> None:
    """Raise ValueError if the Ray actors of ``variants``, all held at once, ask for more than one GPU on ``device``.

    Ray would leave the actors beyond one GPU unplaced, and the run would wait for them until its remote timeout:
    the error says so before any actor starts.
    """
    actors = sum(variant.ray_actors() for variant in variants)
    if device == "cuda" and actors * GPU_SHARE > 1 + 1e-9:
        keys = ", ".join(f"{v.key} ({v.ray_actors()})" for v in variants if v.ray_actors())
        raise ValueError(f"the variants hold {actors} GPU actors of {GPU_SHARE} GPU each, more than one GPU: {keys}; "
                         f"pick fewer with --variants (at most {round(1 / GPU_SHARE)} actors in one run)")


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

    def ray_actors(self) -> int:
        """How many Ray actors the variant holds once prepared (each with a GPU share in a CUDA run)."""
        return 0


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
        x, y = self.cfg["data"]["x"], self.cfg["data"]["y"]
        # The trainer's own timed loop; each batch is gathered inside it, when the loop asks for it.
        seconds = self.trainer.run({"x": x[rows], "y": y[rows]} for rows in self.indices)
        return len(self.indices) * self.cfg["batch_size"] / seconds


def start_like_replica(cls: type, cfg: dict[str, Any], *args: Any) -> Any:
    """Start ``cls(cfg["model"], cfg["threads"], cfg["device"], *args)`` as a Ray actor with a replica's resources
    and environment (:func:`fe_ray.distributed.cluster.replica_env`: thread share, malloc settings, priority, GPU
    visibility) on the benchmark's local Ray; returns its handle."""
    import ray

    from fe_ray.distributed.cluster import replica_env

    harness.init_ray(cfg["ray_cpus"])
    threads, gpus = cfg["threads"], gpu_share(cfg["device"])
    remote = ray.remote(cls).options(num_cpus=threads, num_gpus=gpus,
                                     runtime_env=replica_env(None, threads, num_gpus=gpus))
    return remote.remote(cfg["model"], threads, cfg["device"], *args)


class PlainLoopInActor(Variant):
    """(a_malloc, a_malloc_tf): the plain loop in a Ray actor with fe_ray's replica environment (its thread share,
    glibc malloc settings and priority, :func:`fe_ray.distributed.cluster.replica_env`): what the hand-written loop
    itself gains or loses in the process and settings fe_ray gives its replicas, so that c / a_malloc is fe_ray's own
    cost at equal settings. ``framework="tf"``: the plain ``tf.function`` loop on the TF data."""

    def __init__(self, key: str, cfg: dict[str, Any], framework: str = "torch") -> None:
        super().__init__(key, cfg)
        self.framework = framework

    def ray_actors(self) -> int:
        return 1

    def prepare(self) -> None:
        import ray

        from benchmarks.baselines import PlainLoopActor, batches_of

        cfg = self.cfg
        self.actor = start_like_replica(PlainLoopActor, cfg, self.framework)
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


class PlainLoopServed(Variant):
    """(a_served): the plain torch step in a Ray actor with fe_ray's replica environment, served over fe_ray's
    step stream on the serving thread fe_ray's replicas use (:class:`benchmarks.baselines.ServedLoopActor`): the
    driver sends each batch and waits for the loss. ``c / a_served`` is then what fe_ray's Network and Estimator cost
    in a replica, ``a_served / a`` what the stream, the thread and its idle wait between steps cost. Its actor's
    own step time (``inner_step_us``, without the stream) compares with c's ``replica_us``."""

    def ray_actors(self) -> int:
        return 1

    def prepare(self) -> None:
        import ray

        from benchmarks.baselines import ServedLoopActor, batches_of
        from fe_ray.distributed.step_stream import StepStream

        cfg = self.cfg
        self.actor = start_like_replica(ServedLoopActor, cfg)
        address = ray.get(self.actor.listen.remote(harness.REMOTE_TIMEOUT_S), timeout=harness.REMOTE_TIMEOUT_S)
        self.stream = StepStream([address], harness.REMOTE_TIMEOUT_S)
        self.batches = [(b["x"], b["y"]) for b in batches_of(cfg["data"], cfg["batch_size"])[:cfg["steps"]]]
        self.inner_step_s: list[float] = []
        self._run(self.batches[:WARMUP_STEPS])
        ray.get(self.actor.take_step_seconds.remote(), timeout=harness.REMOTE_TIMEOUT_S)

    def _run(self, batches: list[tuple[Any, Any]]) -> float:
        start = time.perf_counter()
        for batch in batches:
            (answer,) = self.stream.run([batch], harness.REMOTE_TIMEOUT_S)
            if isinstance(answer, BaseException):
                raise answer
        return time.perf_counter() - start

    def measure(self) -> float:
        import ray

        seconds = self._run(self.batches)
        self.inner_step_s.append(ray.get(self.actor.take_step_seconds.remote(), timeout=harness.REMOTE_TIMEOUT_S))
        return len(self.batches) * self.cfg["batch_size"] / seconds

    def close(self) -> None:
        import ray

        self.stream.close()
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

    def ray_actors(self) -> int:
        return int(self.cfg["replicas"])

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


# ---------------------------------------------------------------------------------------------------- tensorflow
class PlainTF(Variant):
    def prepare(self) -> None:
        from benchmarks.baselines import PlainTFTrainer, batches_of

        self.trainer = PlainTFTrainer(self.cfg["model"])
        self.batches = batches_of(self.cfg["data_tf"], self.cfg["batch_size"])[:self.cfg["steps"]]
        self.trainer.run(self.batches[:WARMUP_STEPS])

    def measure(self) -> float:
        return len(self.batches) * self.cfg["batch_size"] / self.trainer.run(self.batches)
