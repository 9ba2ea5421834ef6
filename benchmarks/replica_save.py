"""The checkpoint benchmark's ``fe_replica`` path: a background save of a distributed run, as RestoreWizard takes it.

The other background paths of :mod:`benchmarks.checkpoint` save a state that lives in the benchmark's own process.
With ``num_replicas`` the state lives in a replica: this path builds a one-replica RayNetwork whose replica holds
the ~100M-parameter model with its Adam state (trained for one step in epoch 1, so the optimizer state exists) and
a LeNet that it keeps training (epoch 2 runs only the LeNet ops), and saves with ``RestoreWizard.save()`` itself.
So everything a real distributed save does counts: getting the state out of the replica, the snapshot, the write
and its CPU, and the replica's training steps during the write (driven from here, as the Estimator drives them).
With ``device="cuda"`` the replica holds both models on the GPU, so each save includes the device -> host copy.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness


class ReplicaSave:
    """A one-replica RayNetwork holding the big model (+ Adam) and a LeNet that it trains, and a RestoreWizard.

    Args:
        big_model_fn: Builds the big torch model (see :func:`benchmarks.checkpoint.big_model_fn`).
        root: The checkpoint directory.
        threads: CPUs (and intra-op threads) of the replica.
        device: "cpu", or "cuda" for a replica that asks for a share of the GPU (its models then live there).
    """

    def __init__(self, big_model_fn: Callable[[], Any], root: Path, threads: int, device: str = "cpu") -> None:
        import fe_ray as fe
        from benchmarks.models import synthetic_data, torch_model_fn
        from benchmarks.variants import distributed_kwargs
        from fe_ray.op.tensorop.loss import CrossEntropy, MeanSquaredError
        from fe_ray.op.tensorop.model import ModelOp, UpdateOp
        from fe_ray.schedule import EpochScheduler
        from fe_ray.summary.system import System
        from fe_ray.trace import RestoreWizard

        harness.init_ray(harness.available_cores())
        big = fe.build(model_fn=big_model_fn, optimizer_fn="adam", model_name="big")
        lenet = fe.build(model_fn=torch_model_fn("lenet"), optimizer_fn="adam", model_name="lenet")
        only_first = lambda op: EpochScheduler({1: op, 2: None})  # noqa: E731
        ops = [only_first(ModelOp(model=big, inputs="xb", outputs="yb")),
               only_first(MeanSquaredError(inputs=("yb", "tb"), outputs="mse")),
               only_first(UpdateOp(model=big, loss_name="mse")),
               ModelOp(model=lenet, inputs="x", outputs="y_pred"),
               CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
               UpdateOp(model=lenet, loss_name="ce")]
        # The resources of throughput's one-replica variant (c): the CPUs, and on cuda a share of the one GPU.
        self.network = fe.Network(ops, num_replicas=1,
                                  **distributed_kwargs({"device": device, "threads": threads}, 1))
        width = big[0].in_features
        self.batch = synthetic_data("lenet", 32)
        rows = len(self.batch["x"])  # one batch size for every key
        first = {**self.batch, "xb": np.full((rows, width), 0.01, np.float32),
                 "tb": np.zeros((rows, width), np.float32)}
        with self.network(mode="train", epoch=1, ds_id="", desired_output_keys={"ce", "mse"}, warmup=False,
                          eager=False):
            self.network.run_step(first)  # the big model's Adam state now exists on the replica
        # Epoch 2 trains the LeNet only; the context stays open for every step and save of the benchmark.
        self._context = self.network(mode="train", epoch=2, ds_id="", desired_output_keys={"ce"}, warmup=False,
                                     eager=False)
        self._context.__enter__()

        class _NoPipeline:
            data: dict[str, Any] = {}

        self.system = System(network=self.network, pipeline=_NoPipeline())
        self.system.mode, self.system.epoch_idx, self.system.global_step = "train", 2, 1
        self.wizard = RestoreWizard(str(root), keep=1)
        self.wizard.system = self.system
        self.pid = int(self.network.replica_info()[0]["pid"])
        self._writer_tid: int | None = None
        self.step()

    def step(self) -> None:
        """One LeNet training step on the replica (what training does while a checkpoint is written)."""
        self.network.run_step(self.batch)

    def undisturbed_step_s(self, steps: int = 50) -> float:
        """Median time of a training step with no save in flight."""
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            self.step()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def start_save(self) -> Callable[[], bool]:
        """``RestoreWizard.save()``; returns once training may go on, with a predicate telling whether the
        checkpoint has been committed."""
        store = self.wizard.store
        before = store.latest()
        self.wizard.save()
        return lambda: store.latest() not in (None, before)

    def writer_cpu_s(self) -> float:
        """CPU seconds of the replica's checkpoint writer thread, plus those of the replica's threads that have
        ended (its direct-I/O threads end with each file); NaN before the first save started the writer."""
        if self._writer_tid is None:
            import ray

            rank0 = self.network._holder.group.actors[0]
            self._writer_tid = ray.get(rank0.__ray_call__.remote(_writer_thread_id), timeout=60)
            if self._writer_tid is None:
                return float("nan")
        return (harness.proc_cpu_s(f"/proc/{self.pid}/task/{self._writer_tid}/stat")
                + harness.ended_threads_cpu_s(self.pid))

    def close(self) -> None:
        self._context.__exit__(None, None, None)
        self.network.shutdown()


def _writer_thread_id(replica: Any) -> int | None:
    """(Run inside the replica actor) the native thread id of its checkpoint writer thread, None if it has none."""
    import threading

    saver = replica._saver
    if saver is None or saver._executor is None:
        return None
    return saver._executor.submit(threading.get_native_id).result(timeout=60)


__all__ = ["ReplicaSave"]
