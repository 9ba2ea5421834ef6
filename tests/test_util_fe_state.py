"""FastEstimator's checkpoint protocol for user classes (fe_ray.util.fe_state): an op, trace or slicer of the user's
own with a ``__getstate__`` is checkpointed through it, resumes exactly, and still reaches replicas whole."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.op.tensorop import TensorOp
from fe_ray.slicer import ChunkSlicer
from fe_ray.trace import Trace
from fe_ray.util.fe_state import uses_getstate
from tests.estimator_helpers import (
    AtTrainStep,
    ToyPipeline,
    classifier_network,
    digits_arrays,
    model_weights,
    torch_mlp,
)


class Scale(TensorOp):
    """Scales its input by a factor that grows every training step: its outputs depend on its state. Checkpointed
    FastEstimator's way, with ``__getstate__`` only (restored into its attributes)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.count = 0

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        if state["mode"] == "train" and not state["warmup"]:
            self.count += 1
        return data * (1.0 + 0.05 * self.count)

    def __getstate__(self) -> dict[str, Any]:
        return {"count": self.count}


class SetState(Scale):
    """With a ``__setstate__`` of its own, which restore calls."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.count = state["count"]
        self.restored_by_setstate = True


class WithStateDict(Scale):
    """fe_ray's protocol in the same class wins over ``__getstate__``."""

    def state_dict(self) -> dict[str, Any]:
        return {"n": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["n"]


class PickleGuard(TensorOp):
    """A ``__getstate__`` for pickling (it returns every attribute but a lock): not a checkpoint state."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()


class Seen(Trace):
    """Counts the samples it has seen, checkpointed FastEstimator's way."""

    def __init__(self) -> None:
        super().__init__(mode="train", inputs="y", outputs="seen")
        self.seen = 0

    def on_batch_end(self, data: Any) -> None:
        self.seen += len(data["y"])

    def on_epoch_end(self, data: Any) -> None:
        data.write_with_log("seen", self.seen)

    def __getstate__(self) -> dict[str, Any]:
        return {"seen": self.seen}


class Crash(AtTrainStep):
    def act(self, data: Any) -> None:
        raise RuntimeError(f"crash before step {self.step}")


def test_which_classes_are_checkpointed_through_getstate() -> None:
    from fe_ray.op.tensorop import Average
    from fe_ray.op.tensorop.loss import CrossEntropy, SuperLoss

    assert uses_getstate(Scale(inputs="x", outputs="x")) and uses_getstate(SetState(inputs="x", outputs="x"))
    assert uses_getstate(Seen())
    assert not uses_getstate(WithStateDict(inputs="x", outputs="x"))
    assert not uses_getstate(Average(inputs=("a", "b"), outputs="c"))  # no __getstate__ but object's
    # fe_ray's own __getstate__ serves copies; its state_dict serves checkpoints
    assert not uses_getstate(SuperLoss(CrossEntropy(inputs=("y_pred", "y"), outputs="ce")))


def test_ops_traces_and_slicers_give_and_take_their_getstate() -> None:
    op, other = Scale(inputs="x", outputs="x"), SetState(inputs="x", outputs="x")
    op.count, other.count = 7, 3
    assert op.state_dict() == {"count": 7} and other.state_dict() == {"count": 3}
    fresh, fresh_other = Scale(inputs="x", outputs="x"), SetState(inputs="x", outputs="x")
    fresh.load_state_dict(op.state_dict())  # no __setstate__: the attributes are updated, as FastEstimator does
    fresh_other.load_state_dict(other.state_dict())
    assert fresh.count == 7 and fresh.outputs == ["x"]
    assert fresh_other.count == 3 and fresh_other.restored_by_setstate

    with_state_dict = WithStateDict(inputs="x", outputs="x")
    with_state_dict.count = 2
    assert with_state_dict.state_dict() == {"n": 2}

    trace = Seen()
    trace.seen = 40
    restored = Seen()
    restored.load_state_dict(trace.state_dict())
    assert restored.seen == 40 and restored.outputs == ["seen"]

    class Rounds(ChunkSlicer):
        def __init__(self) -> None:
            super().__init__(slice="x", unslice="x", n_chunks=2)
            self.rounds = 5

        def __getstate__(self) -> dict[str, Any]:
            return {"rounds": self.rounds}

    slicer = Rounds()
    again = Rounds()
    again.rounds = 0
    again.load_state_dict(slicer.state_dict())
    assert again.rounds == 5


def test_a_checkpoint_state_is_a_copy_and_getstates_for_copies_are_not_one() -> None:
    class Buffer(TensorOp):
        def __init__(self) -> None:
            super().__init__(inputs="x", outputs="x")
            self.values = [1]

        def __getstate__(self) -> Any:
            return {"values": self.values}

    op = Buffer()
    state = op.state_dict()
    op.values.append(2)
    assert state == {"values": [1]}  # the checkpoint does not follow later training

    class Tuple(Buffer):
        def __getstate__(self) -> Any:
            return (1, 2)

    # States written for copies are left to pickling: a tuple, or a dict of every attribute (it holds "mode")
    assert Tuple().state_dict() == {} and PickleGuard(inputs="x", outputs="y").state_dict() == {}
    assert not uses_getstate(Tuple()) and not uses_getstate(PickleGuard(inputs="x", outputs="y"))


def test_replicas_receive_the_whole_op_not_its_checkpoint_state() -> None:
    """A FastEstimator-style __getstate__ returns no inputs / outputs: the op is shipped from its attributes. A
    __getstate__ written for pickling (every attribute but a lock) is still used."""
    from fe_ray.distributed.serialization import dumps_ops, loads_ops

    op = Scale(inputs="x", outputs="x")
    op.count = 4
    guard = PickleGuard(inputs="x", outputs="y")
    shipped, shipped_guard = loads_ops(dumps_ops([op, guard], []))
    assert (shipped.inputs, shipped.outputs, shipped.count) == (["x"], ["x"], 4)
    assert shipped.state_dict() == {"count": 4}
    assert shipped_guard.outputs == ["y"] and shipped_guard.lock is not guard.lock  # its own __setstate__ ran


def _run(tmp_path: Any, crash_at: int | None) -> tuple[dict, list[np.ndarray], int, int]:
    train, evaluation = digits_arrays(n_train=48, n_eval=16)
    model = torch_mlp()
    scale = Scale(inputs="x", outputs="x", mode="train")
    network = fe.Network(ops=[scale, *classifier_network(model).ops])
    seen = Seen()
    traces = [seen, fe.trace.RestoreWizard(str(tmp_path), steps=2), Crash(crash_at)]
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), network, epochs=2, traces=traces,
                             log_steps=None)
    history = estimator.fit().history
    losses = {mode: dict(history[mode]["ce"]) for mode in ("train", "eval")}
    return losses, model_weights(model), scale.count, seen.seen


def test_a_run_resumed_from_getstate_checkpoints_equals_the_uninterrupted_one(tmp_path: Any) -> None:
    expected = _run(tmp_path / "whole", None)
    with pytest.raises(RuntimeError, match="crash before step 9"):
        _run(tmp_path / "resumed", 9)  # checkpoints every 2 steps: the run resumes after step 8, in epoch 2
    losses, weights, count, seen = _run(tmp_path / "resumed", None)
    assert (count, seen) == (expected[2], expected[3]) == (12, 96)
    assert losses == expected[0]
    assert all(np.array_equal(a, b) for a, b in zip(weights, expected[1]))
