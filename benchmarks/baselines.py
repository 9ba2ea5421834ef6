"""Hand-written reference loops the fe_ray variants are compared against.

* :class:`PlainTorchTrainer`: the plain single-process PyTorch loop (variant (a) of throughput.py).
* :class:`DPWorker`: one rank of a hand-written gloo data-parallel loop on a Ray actor (variant (e)); also used by
  overhead.py to time the primitive operations (empty actor call, a step stream's round trip, gloo all_reduce) of
  any distributed path.
* :class:`PlainTFTrainer`: the plain ``tf.function`` Keras training loop (variant (a) of throughput.py --framework tf).
* :class:`TFDPWorker`: one rank of a hand-written TF data-parallel loop on a Ray actor (variant (e) for TF).

The loss math matches fe_ray's CrossEntropy on softmax outputs (torch: FastEstimator's formula, the log of the true
class's probability as given; TF: Keras', clip to [1e-7, 1-1e-7], log, gather), and the optimizer is Adam(lr=1e-3)
everywhere (fe.build's "adam" default), so every variant does the same work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from benchmarks.harness import per_op
from benchmarks.models import synthetic_data, tf_model, torch_model

EPSILON = 1e-7


def sparse_ce(pred: Any, y: Any) -> Any:
    """Mean sparse cross entropy of softmax probabilities ``pred`` (torch), as fe_ray's CrossEntropy computes it."""
    import torch

    p_true = pred.gather(1, y.reshape(-1, 1).long()).squeeze(1)
    return -torch.log(p_true).mean()


def batches_of(data: dict[str, np.ndarray], batch_size: int) -> list[dict[str, np.ndarray]]:
    """Cut a {"x", "y"} dataset into consecutive batch dicts (views, no copies)."""
    n = len(data["y"]) // batch_size
    return [{k: v[i * batch_size:(i + 1) * batch_size] for k, v in data.items()} for i in range(n)]


class PlainTorchTrainer:
    """The plain PyTorch loop: from_numpy -> (to device) -> forward -> CE -> backward -> Adam step."""

    def __init__(self, model_name: str, device: str = "cpu") -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.model = torch_model(model_name).to(self.device)
        self.model.train()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def step(self, x: np.ndarray, y: np.ndarray) -> Any:
        """One training step on numpy arrays; returns the (device) loss tensor."""
        torch = self.torch
        xt = torch.from_numpy(x).to(self.device, non_blocking=True)
        yt = torch.from_numpy(y).to(self.device, non_blocking=True)
        self.optimizer.zero_grad(set_to_none=True)
        loss = sparse_ce(self.model(xt), yt)
        loss.backward()
        self.optimizer.step()
        return loss

    def run(self, batches: Iterable[dict[str, np.ndarray]]) -> float:
        """Train on ``batches`` (made lazily by a generator, their making is timed too); return wall seconds
        (synchronised with the device at the end)."""
        start = time.perf_counter()
        loss = None
        for batch in batches:
            loss = self.step(batch["x"], batch["y"])
        if loss is not None:
            float(loss.detach())  # forces completion (cuda); fe_ray also returns the loss to the host
        return time.perf_counter() - start


class PlainLoopActor:
    """The plain loop (:class:`PlainTorchTrainer`, or :class:`PlainTFTrainer` with ``framework="tf"``) in its own
    process: wrap with ``ray.remote``; give it the runtime environment whose effect on the loop is measured (e.g.
    fe_ray's replica environment). Threads as in the driver's plain loop (``threads`` intra-op, one inter-op)."""

    def __init__(self, model_name: str, threads: int, device: str = "cpu", framework: str = "torch") -> None:
        self.trainer: PlainTorchTrainer | PlainTFTrainer
        if framework == "tf":
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            self.trainer = PlainTFTrainer(model_name)
        else:
            import torch

            torch.set_num_threads(threads)
            self.trainer = PlainTorchTrainer(model_name, device)

    def run(self, batches: Sequence[dict[str, np.ndarray]]) -> float:
        """As :meth:`PlainTorchTrainer.run`."""
        return self.trainer.run(batches)


class ServedLoopActor:
    """The plain torch step served the way fe_ray serves a replica's steps: on the one thread of fe_ray's
    :class:`~fe_ray.distributed.step_stream.StepServer`, which waits in ``select`` between steps, reads each batch
    from fe_ray's step stream and answers with the loss on the host. Wrap with ``ray.remote`` and fe_ray's replica
    environment. Against fe_ray's replica (c) it leaves out only fe_ray's Network and Estimator; against the plain
    loop (a) it adds only the stream, the serving thread and its idle wait between steps."""

    def __init__(self, model_name: str, threads: int, device: str = "cpu") -> None:
        from fe_ray.distributed.step_stream import StepServer

        self.step_seconds = 0.0
        self.steps = 0
        self.server = StepServer(self._serve)
        # All torch work on the serving thread, as a replica's; the same loop and threads as PlainLoopActor's.
        self.trainer = self.server.run(lambda: PlainLoopActor(model_name, threads, device).trainer)

    def _serve(self, args: tuple[np.ndarray, np.ndarray] | None) -> Any:
        if args is None:  # the stream's warm-up round trip
            return True
        start = time.perf_counter()
        try:
            loss = float(self.trainer.step(*args).detach())  # the loss on the host, as a replica's outputs
        except Exception as err:  # noqa: BLE001 - the server's handler must not raise: the driver raises it
            return err
        self.step_seconds += time.perf_counter() - start
        self.steps += 1
        return loss

    def listen(self, accept_timeout_s: float) -> tuple[str, int]:
        """Open the step stream on this node's address (as a replica does)."""
        import ray

        return self.server.listen(ray.util.get_node_ip_address(), accept_timeout_s)

    def take_step_seconds(self) -> float:
        """Mean seconds of the served steps since the last call (the serving thread's own step, without the
        stream), then start counting afresh."""
        def take() -> float:
            mean = self.step_seconds / max(self.steps, 1)
            self.step_seconds, self.steps = 0.0, 0
            return mean

        return self.server.run(take)


def median_synchronized_seconds(op: Callable[[], Any], barrier: Callable[[], Any], iters: int,
                                warmup: int = 3) -> float:
    """Median seconds of ``op`` over ``iters`` runs (after ``warmup``), every run started right after ``barrier``
    so that all ranks time the same collective call."""
    times = []
    for i in range(iters + warmup):
        barrier()
        start = time.perf_counter()
        op()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return float(np.median(times))


class RoundTripProbes:
    """Actor methods that time Ray's round trip (overhead.py), shared by the hand-written workers."""

    def noop(self, *args: Any) -> int:
        """An empty call (args are received and dropped), for round-trip timing."""
        return 0

    def hold(self, seconds: float, *args: Any) -> int:
        """A call that lasts ``seconds`` (sleeping; args are received and dropped): the round trip of a call as
        long as a training step, without the step's compute."""
        time.sleep(seconds)
        return 0

    def compute_time(self, batch_size: int, iters: int) -> float:
        """Mean seconds of one plain training step (``plain_step``) on ``batch_size`` samples, no all-reduce: the
        compute share of a data-parallel step."""
        step = self.plain_step(batch_size)
        step()
        return per_op(step, iters)

    def lockstep_times(self, batch_size: int, iters: int) -> list[float]:
        """Seconds of each of ``iters`` plain steps on ``batch_size`` samples (the worker's ``plain_step``), each
        started right after a barrier of all ranks, as the steps of a synchronous data-parallel loop start together:
        per step, the slowest rank's time is what every rank waits for before the all-reduce can finish."""
        step = self.plain_step(batch_size)
        step()
        times = []
        for _ in range(iters):
            self.dist.barrier()
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return times

    def plain_step(self, batch_size: int) -> Callable[[], Any]:
        """One plain training step on ``batch_size`` samples of this rank's data (what ``compute_time`` times)."""
        raise NotImplementedError

    def open_echo_stream(self, node_ip: str, accept_timeout_s: float) -> tuple[str, int]:
        """Serve fe_ray's step stream (its ``StepServer``, as a replica does) with :func:`echo_step` as the step:
        the transport's round trip with the real slices and answers, without the step's work. Returns the address
        to connect a ``StepStream`` to within ``accept_timeout_s``."""
        from fe_ray.distributed.step_stream import StepServer

        self._echo = StepServer(echo_step)
        return self._echo.listen(node_ip, accept_timeout_s)


def echo_step(args: Any) -> Any:
    """A step stream handler that answers a slice as a replica of the benchmark network does: per-sample class
    scores and the loss. ``("hold", seconds, slice)`` answers after sleeping ``seconds`` (a step's duration); None
    is the stream's warm-up call."""
    if args is None:
        return True
    if isinstance(args, tuple):
        _, seconds, args = args
        time.sleep(seconds)
    rows = len(args["x"])
    return {"y_pred": np.full((rows, 10), 0.1, dtype=np.float32), "ce": np.float32(2.3)}


class DPWorker(RoundTripProbes):
    """One rank of a hand-written synchronous data-parallel loop (gloo all-reduce of one flat gradient bucket).

    Wrap with ``ray.remote(DPWorker)``. ``setup`` must be called on all ranks concurrently (gloo rendezvous).
    """

    def __init__(self, rank: int, world_size: int, port: int, model_name: str, threads: int,
                 device: str = "cpu") -> None:
        import torch

        torch.set_num_threads(threads)
        self.rank, self.world_size, self.port = rank, world_size, port
        self.model_name, self.device_name = model_name, device
        self.threads = threads

    def setup(self) -> int:
        """Join the gloo process group and build the model/optimizer; returns torch's thread count."""
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        if self.device_name == "cuda":
            torch.cuda.set_device(0)
        self.device = torch.device(self.device_name)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{self.port}", rank=self.rank,
                                world_size=self.world_size)
        self.trainer = PlainTorchTrainer(self.model_name, self.device_name)
        self.params = [p for p in self.trainer.model.parameters() if p.requires_grad]
        return torch.get_num_threads()

    def _allreduce_grads(self) -> None:
        torch = self.torch
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        if flat.device.type != "cpu":
            flat = flat.cpu()  # gloo reduces host memory; a GPU run copies the bucket (as gloo-on-CPU fe_ray does)
        self.dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad), non_blocking=True)
            offset += n

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One synchronous DP step on this rank's slice; returns the local loss."""
        trainer, torch = self.trainer, self.torch
        xt = torch.from_numpy(x).to(self.device)
        yt = torch.from_numpy(y).to(self.device)
        trainer.optimizer.zero_grad(set_to_none=True)
        loss = sparse_ce(trainer.model(xt), yt)
        loss.backward()
        self._allreduce_grads()
        trainer.optimizer.step()
        return float(loss)

    def run_local(self, steps: int, batch_size: int, seed: int = 0) -> float:
        """``steps`` DP steps on data generated inside the actor (no driver round trip); returns seconds."""
        data = synthetic_data(self.model_name, steps * batch_size, seed=seed + self.rank)
        self.dist.barrier()
        start = time.perf_counter()
        for i in range(steps):
            sl = slice(i * batch_size, (i + 1) * batch_size)
            self.step(data["x"][sl], data["y"][sl])
        self.dist.barrier()
        return time.perf_counter() - start

    def plain_step(self, batch_size: int) -> Callable[[], Any]:
        """One local training step (forward, backward, Adam) on ``batch_size`` samples (torch runs it synchronously
        on the CPU; on a GPU the loss is read back, which waits for it)."""
        data = synthetic_data(self.model_name, batch_size, seed=self.rank)
        trainer = self.trainer
        return lambda: float(trainer.step(data["x"], data["y"]).detach())

    def allreduce_time(self, numel: int, iters: int) -> float:
        """Median seconds of a gloo all_reduce of ``numel`` float32 values (after 3 warm-ups)."""
        buf = self.torch.ones(numel, dtype=self.torch.float32)
        return median_synchronized_seconds(lambda: self.dist.all_reduce(buf), self.dist.barrier, iters)

    def num_grad_params(self) -> int:
        """Number of gradient elements all-reduced per step."""
        return sum(p.numel() for p in self.params)

    def shutdown(self) -> None:
        """Leave the process group."""
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------------- tensorflow
def tf_sparse_ce(pred: Any, y: Any) -> Any:
    """TF twin of :func:`sparse_ce`."""
    import tensorflow as tf

    p = pred / tf.reduce_sum(pred, axis=-1, keepdims=True)
    log_p = tf.math.log(tf.clip_by_value(p, EPSILON, 1 - EPSILON))
    return -tf.reduce_mean(tf.gather(log_p, tf.cast(y, tf.int32), axis=-1, batch_dims=1))


class PlainTFTrainer:
    """The plain TF loop: a ``tf.function`` step (GradientTape, same CE math, Adam) fed numpy batches."""

    def __init__(self, model_name: str) -> None:
        import keras
        import tensorflow as tf

        self.tf = tf
        self.model = tf_model(model_name)
        self.optimizer = keras.optimizers.Adam(learning_rate=1e-3)

        @tf.function(reduce_retracing=True)
        def train_step(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf_sparse_ce(self.model(x, training=True), y)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

        self.train_step = train_step

    def run(self, batches: Sequence[dict[str, np.ndarray]]) -> float:
        """Train on ``batches``; return wall seconds."""
        start = time.perf_counter()
        loss = None
        for batch in batches:
            loss = self.train_step(batch["x"], batch["y"])
        if loss is not None:
            float(loss)
        return time.perf_counter() - start


class TFDPWorker(RoundTripProbes):
    """One rank of a hand-written synchronous TF data-parallel loop (variant (e) of ``--framework tf``).

    Each step: a ``tf.function`` computes the local loss and the gradients as one flat float32 bucket; the bucket
    is averaged over the ranks with a gloo ``all_reduce`` (``torch.distributed`` on the bucket's numpy memory: the
    same all-reduce primitive as the torch baseline (e), and the fastest CPU all-reduce installed here); a second
    ``tf.function`` splits it back and applies Adam. Wrap with ``ray.remote(TFDPWorker)``; ``setup`` must be called
    on all ranks concurrently (gloo rendezvous).
    """

    def __init__(self, rank: int, world_size: int, port: int, model_name: str, threads: int) -> None:
        import tensorflow as tf

        try:  # before TF's runtime starts: its thread pools are fixed once the first op runs
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:  # already running in this process (in-process tests): keep its pools
            pass
        self.rank, self.world_size, self.port = rank, world_size, port
        self.model_name = model_name
        self.fe_collective: Any = None  # fe_ray's TcpCollective, opened only for overhead.py's all-reduce phase
        self._plain: PlainTFTrainer | None = None  # the plain step (plain_step), built on first use

    def setup(self) -> int:
        """Join the gloo process group and build the model, optimizer and step functions; returns TF's intra-op
        thread setting."""
        import keras
        import tensorflow as tf
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{self.port}", rank=self.rank,
                                world_size=self.world_size)
        self.model = model = tf_model(self.model_name)
        optimizer = keras.optimizers.Adam(learning_rate=1e-3)
        variables = model.trainable_variables
        sizes = [int(np.prod(v.shape)) for v in variables]

        @tf.function(reduce_retracing=True)
        def grad_step(x: Any, y: Any) -> tuple[Any, Any]:
            with tf.GradientTape() as tape:
                loss = tf_sparse_ce(model(x, training=True), y)
            grads = tape.gradient(loss, variables)
            return loss, tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)

        @tf.function(reduce_retracing=True)
        def apply_step(flat: Any) -> None:
            grads = [tf.reshape(g, v.shape) for g, v in zip(tf.split(flat, sizes), variables)]
            optimizer.apply_gradients(zip(grads, variables))

        self.grad_step, self.apply_step = grad_step, apply_step
        return tf.config.threading.get_intra_op_parallelism_threads()

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One synchronous DP step on this rank's slice; returns the local loss."""
        loss, flat = self.grad_step(x, y)
        bucket = np.array(flat, dtype=np.float32)  # writable host copy for gloo (~0.4 MB for LeNet)
        self.dist.all_reduce(self.torch.from_numpy(bucket))
        bucket /= self.world_size
        self.apply_step(bucket)
        return float(loss)

    # Primitives timed by overhead.py --framework tf (noop and hold: RoundTripProbes).
    def num_grad_params(self) -> int:
        """Number of gradient elements all-reduced per step."""
        return int(sum(np.prod(v.shape) for v in self.model.trainable_variables))

    def plain_step(self, batch_size: int) -> Callable[[], Any]:
        """One plain TF training step (:class:`PlainTFTrainer`'s) on ``batch_size`` samples."""
        if self._plain is None:
            self._plain = PlainTFTrainer(self.model_name)
        batch = synthetic_data(self.model_name, batch_size, seed=self.rank, channels_last=True)
        plain = self._plain
        return lambda: plain.run([batch])

    def split_compute_time(self, batch_size: int, iters: int) -> float:
        """Mean seconds of :meth:`step` without its all-reduce on ``batch_size`` samples: the gradients out of the
        graph as one host bucket, then applied by a second function, as every data-parallel TF step must (the
        fused step of :meth:`compute_time` never leaves the graph)."""
        batch = synthetic_data(self.model_name, batch_size, seed=self.rank, channels_last=True)

        def once() -> None:
            _, flat = self.grad_step(batch["x"], batch["y"])
            self.apply_step(np.array(flat, dtype=np.float32))

        once()
        return per_op(once, iters)

    def open_fe_collective(self) -> tuple[str, int]:
        """(rank 0) Open fe_ray's TF all-reduce (:class:`~fe_ray.distributed.collective.TcpCollective`); returns
        the address the other ranks join with :meth:`join_fe_collective` (call that on all ranks concurrently)."""
        from fe_ray.distributed.collective import TcpCollective

        self.fe_collective = TcpCollective(self.rank, self.world_size, timeout_s=60.0)
        return self.fe_collective.listen("127.0.0.1")

    def join_fe_collective(self, address: tuple[str, int]) -> bool:
        """Join fe_ray's TF all-reduce opened by rank 0."""
        from fe_ray.distributed.collective import TcpCollective

        if self.fe_collective is None:
            self.fe_collective = TcpCollective(self.rank, self.world_size, timeout_s=60.0)
        self.fe_collective.connect(tuple(address))
        return True

    def allreduce_time(self, numel: int, iters: int) -> float:
        """Median seconds of one all-reduce of ``numel`` float32 values with fe_ray's TF collective (after 3
        warm-ups): the all-reduce a TF replica step pays."""
        buf = np.ones(numel, dtype=np.float32)
        return median_synchronized_seconds(lambda: self.fe_collective.allreduce_sum([buf]), self.dist.barrier, iters)

    def shutdown(self) -> None:
        """Leave the process group (and fe_ray's collective, if opened)."""
        if self.fe_collective is not None:
            self.fe_collective.close()
        if self.dist.is_initialized():
            self.dist.destroy_process_group()
