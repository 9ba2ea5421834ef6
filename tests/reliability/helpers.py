"""Small pieces shared by the reliability tests: a tiny digits run, fault-injecting ops and traces."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

import fe_ray as fe
from fe_ray.op.tensorop import LambdaOp
from fe_ray.op.tensorop.loss import CrossEntropy
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.trace import RestoreWizard, Trace
from tests.estimator_helpers import ToyPipeline, digits_arrays, model_weights, tf_mlp, torch_mlp
from tests.helpers.processes import pid_alive, wait_for

EPOCHS = 2
STEPS_PER_EPOCH = 6  # 60 training samples, batches of 10


def hang_if_marked(x: Any) -> Any:
    """Sleep 'forever' in the replica whose pid is written in $FE_RAY_HANG_FILE (a hung op)."""
    marker = os.environ.get("FE_RAY_HANG_FILE", "")
    if marker and os.path.exists(marker) and Path(marker).read_text().strip() == str(os.getpid()):
        time.sleep(3600)
    return x


def build_run(framework: str = "torch", traces: list[Any] | None = None, first_op: Any = None,
              **network_kwargs: Any) -> tuple[Any, Any]:
    """(Estimator, model) of a 2-epoch, 12-step digits MLP run; ``network_kwargs`` go to fe.Network.

    ``first_op``: a function ``x -> x`` run as a LambdaOp before the model (a fault injector)."""
    fe.enable_deterministic(3)
    train, _ = digits_arrays(framework, n_train=EPOCHS * 30, n_eval=0)
    model = torch_mlp(seed=3) if framework == "torch" else tf_mlp(seed=3)
    ops: list[Any] = [LambdaOp(first_op, inputs="x", outputs="x")] if first_op is not None else []
    ops += [ModelOp(model=model, inputs="x", outputs="y_pred"), CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
            UpdateOp(model=model, loss_name="ce")]
    network = fe.Network(ops, **network_kwargs)
    pipeline = ToyPipeline(train, None, batch_size=10, seed=3)
    return fe.Estimator(pipeline, network, epochs=EPOCHS, traces=traces, log_steps=None), model


def weights_of(model: Any) -> list[np.ndarray]:
    return model_weights(model)


class KillReplica(Trace):
    """SIGKILLs replica ``rank`` once, right after training step ``step`` (not checkpointed: restores do not re-arm
    it, and a run without it may resume from the same checkpoints)."""

    checkpointed = False

    def __init__(self, network: Any, step: int, rank: int = 1) -> None:
        super().__init__(mode="train")
        self.network, self.step, self.rank = network, step, rank
        self.killed_at: float | None = None

    def on_batch_end(self, data: Any) -> None:
        if self.killed_at is None and self.system.global_step == self.step:
            pid = self.network.replica_info()[self.rank]["pid"]
            os.kill(pid, signal.SIGKILL)
            self.killed_at = time.monotonic()


class HangReplica(Trace):
    """Before training step ``step``, names replica ``rank``'s pid in the hang file so its next op hangs."""

    checkpointed = False

    def __init__(self, network: Any, step: int, marker: str, rank: int = 1) -> None:
        super().__init__(mode="train")
        self.network, self.step, self.marker, self.rank = network, step, marker, rank
        self.hung_at: float | None = None

    def on_batch_begin(self, data: Any) -> None:
        if self.hung_at is None and self.system.global_step == self.step:
            Path(self.marker).write_text(str(self.network.replica_info()[self.rank]["pid"]))
            self.hung_at = time.monotonic()


class SlowToPickle:
    """Pickles instantly in the process that made it, but in any other process (the checkpoint writer) it first
    writes that process's pid to ``marker`` and then blocks for ``seconds``: a checkpoint write in progress."""

    def __init__(self, owner_pid: int, marker: str, seconds: float = 3600.0) -> None:
        self.owner_pid, self.marker, self.seconds = owner_pid, marker, seconds

    def __reduce__(self) -> tuple[Any, ...]:
        if os.getpid() != self.owner_pid:
            Path(self.marker).write_text(str(os.getpid()))
            time.sleep(self.seconds)
        return (SlowToPickle, (self.owner_pid, self.marker, self.seconds))


__all__ = ["EPOCHS", "HangReplica", "KillReplica", "RestoreWizard", "SlowToPickle", "build_run", "hang_if_marked",
           "pid_alive", "wait_for", "weights_of"]
