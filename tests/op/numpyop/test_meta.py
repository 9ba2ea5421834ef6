"""Sometimes and OneOf: probabilities, pass-through of outputs, the wrapped op's draws, state, pops and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.op.numpyop import Delete, LambdaOp, NumpyOp, forward_numpyop
from fe_ray.op.numpyop.meta import OneOf, Sometimes
from fe_ray.op.numpyop.multivariate import HorizontalFlip, RandomCrop
from fe_ray.op.tensorop.tensorop import LambdaOp as TensorLambdaOp


def _state(seed: int) -> dict[str, Any]:
    return {"mode": "train", "rng": np.random.default_rng(seed)}


def _plus_one(**kwargs: Any) -> LambdaOp:
    return LambdaOp(lambda x: x + 1, inputs="x", outputs="x", **kwargs)


def test_sometimes_extremes_and_one_coin_per_sample() -> None:
    for prob, expected in ((1.0, 6), (0.0, 5)):
        data = {"x": 5}
        forward_numpyop([Sometimes(_plus_one(), prob=prob)], data, {})
        assert data["x"] == expected
    op = Sometimes(_plus_one(), prob=0.3)
    for seed in range(20):
        ran = np.random.default_rng(seed).random() < 0.3  # the documented draw: one uniform number per sample
        assert op.forward([5], _state(seed)) == [6 if ran else 5]


def test_sometimes_passes_existing_outputs_through() -> None:
    """An output the wrapped op does not read keeps its current value when the op does not run."""
    op = Sometimes(LambdaOp(lambda x: x * 2, inputs="x", outputs="y"), prob=0.0)
    assert op.inputs == ["x", "y"] and op.outputs == ["y"]
    data = {"x": 3, "y": -1}
    forward_numpyop([op], data, {})
    assert data == {"x": 3, "y": -1}
    forward_numpyop([Sometimes(LambdaOp(lambda x: x * 2, inputs="x", outputs="y"), prob=1.0)], data, {})
    assert data["y"] == 6


def test_sometimes_takes_the_wrapped_ops_mode_and_ds_id() -> None:
    op = Sometimes(_plus_one(mode="train", ds_id="a"))
    assert op.mode == {"train"} and op.ds_id == {"a"}


def test_sometimes_called_directly_with_a_bare_value() -> None:
    flipped = Sometimes(HorizontalFlip(image_in="x"), prob=1.0).forward(np.array([[1, 2]]), {})
    np.testing.assert_array_equal(flipped, [[2, 1]])  # not a list: the call gave no list either


def test_a_wrapped_random_op_continues_the_same_generator() -> None:
    grid = np.arange(16).reshape(4, 4)
    op = Sometimes(RandomCrop(2, 2, image_in="x"), prob=1.0)
    out = op.forward([grid], _state(4))[0]
    rng = np.random.default_rng(4)
    rng.random()  # Sometimes' coin
    top, left = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    np.testing.assert_array_equal(out, grid[top:top + 2, left:left + 2])


def test_sometimes_as_a_pop_decides_for_the_whole_batch() -> None:
    batch = np.stack([np.array([[1, 2]])] * 8)
    outcomes = set()
    np.random.seed(1)
    for _ in range(20):
        data = {"x": batch}
        forward_numpyop([Sometimes(HorizontalFlip(image_in="x"))], data, {}, batched=True)
        firsts = set(data["x"][:, 0, 0].tolist())
        assert len(firsts) == 1  # every sample of the batch flipped, or none
        outcomes |= firsts
    assert outcomes == {1, 2}


def test_one_of_picks_each_op_uniformly_by_the_generator() -> None:
    op = OneOf(_plus_one(), LambdaOp(lambda x: x * 10, inputs="x", outputs="x"))
    results = []
    for seed in range(30):
        choice = int(np.random.default_rng(seed).integers(2))
        result = op.forward([3], _state(seed))  # LambdaOp takes a list of inputs, as in FastEstimator
        assert result == (4 if choice == 0 else 30)
        results.append(result)
    assert set(results) == {4, 30}
    np.random.seed(0)
    data = {"x": np.array([1, 2])}
    forward_numpyop([op], data, {}, batched=True)  # as a pop: one op for the whole batch
    assert data["x"].tolist() in ([2, 3], [10, 20])


def test_one_of_with_probs_draws_once_from_the_generator() -> None:
    ops = [LambdaOp(lambda x, v=v: v, inputs="x", outputs="x") for v in (0, 1, 2)]
    op = OneOf(*ops, probs=[0.2, 0.0, 0.8])
    results = [op.forward([3], _state(seed)) for seed in range(300)]
    for seed, result in enumerate(results):
        draw = np.random.default_rng(seed).random()
        assert result == (0 if draw < 0.2 else 2)
    assert results.count(1) == 0 and 30 < results.count(0) < 90  # about 60 of 300
    # The wrapped op continues from the same generator after the one draw: OneOf is replayable by position.
    coin = OneOf(_plus_one(), _plus_one(), probs=[0.5, 0.5])
    state = _state(9)
    coin.forward([1], state)
    rng = np.random.default_rng(9)
    rng.random()
    assert state["rng"].random() == rng.random()
    assert OneOf(*ops, probs=[0.0, 0.0, 1.0]).forward([3], _state(0)) == 2
    uniform, empty = OneOf(*ops), OneOf(*ops, probs=[])
    assert [empty.forward([3], _state(s)) for s in range(20)] == [uniform.forward([3], _state(s)) for s in range(20)]
    data = {"x": np.array([1, 2])}
    np.random.seed(0)
    forward_numpyop([OneOf(*ops, probs=[0.0, 1.0, 0.0])], data, {}, batched=True)  # as a pop
    assert np.asarray(data["x"]).tolist() in (1, [1, 1])  # the middle op, for the whole batch


@pytest.mark.parametrize("probs, match", [
    ([0.5, 0.5], "one probability per op: 3 ops but 2"),
    ([0.5, 0.7, -0.2], "non-negative"),
    ([0.3, 0.3, 0.3], "sum to 1"),
    ([0.5, float("nan"), 0.5], "non-negative"),
    ("abc", "list of 3 probabilities"),
])
def test_one_of_probs_errors(probs: Any, match: str) -> None:
    ops = [LambdaOp(abs, inputs="x", outputs="x") for _ in range(3)]
    with pytest.raises(ValueError, match=match):
        OneOf(*ops, probs=probs)


def test_one_of_state_keeps_probs_out() -> None:
    op = OneOf(_Counter(), _Counter(), probs=[0.1, 0.9])
    assert set(op.state_dict()) == {"ops"}


@pytest.mark.parametrize("ops, match", [
    ((), "at least one NumpyOp"),
    ((LambdaOp(abs, inputs="x", outputs="x"), LambdaOp(abs, inputs="x", outputs="y")), "share their outputs"),
    ((LambdaOp(abs, inputs="x", outputs="x", mode="train"), LambdaOp(abs, inputs="x", outputs="x")),
     "share their mode"),
])
def test_one_of_errors(ops: tuple[NumpyOp, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        OneOf(*ops)


def test_meta_argument_errors() -> None:
    with pytest.raises(ValueError, match=r"prob must be a probability in \[0, 1\], got 1.5"):
        Sometimes(_plus_one(), prob=1.5)
    with pytest.raises(TypeError, match="Sometimes wraps NumpyOps, got LambdaOp"):
        Sometimes(TensorLambdaOp(abs, inputs="x", outputs="x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="OneOf cannot wrap Delete"):
        OneOf(Delete("x"))
    with pytest.raises(TypeError, match=r"state\['rng'\] must be a numpy.random.Generator"):
        Sometimes(_plus_one()).forward([1], {"rng": 3})


class _Counter(NumpyOp):
    """A stateful op: counts the samples it has seen."""

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")
        self.count = 0

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.count += 1
        return data

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


def test_meta_ops_save_and_restore_the_wrapped_ops_state() -> None:
    counted = OneOf(_Counter(), _Counter())
    for seed in range(10):
        counted.forward(0, _state(seed))
    state = counted.state_dict()
    assert sum(op_state["count"] for op_state in state["ops"]) == 10
    fresh = OneOf(_Counter(), _Counter())
    fresh.load_state_dict(state)
    assert [op.count for op in fresh.ops] == [s["count"] for s in state["ops"]]  # type: ignore[attr-defined]
    assert Sometimes(_plus_one()).state_dict() == {}  # stateless: nothing saved
    with pytest.raises(ValueError, match="wraps 1 op"):
        Sometimes(_Counter()).load_state_dict(state)


def test_meta_state_and_prob_checks_match_the_tensor_meta_ops() -> None:
    """The checks shared with the TensorOp meta ops (fe_ray.op.meta_common): numpy scalar probabilities are numbers,
    and a state with keys other than 'ops' is refused by name."""
    assert Sometimes(_plus_one(), prob=np.float32(0.25)).prob == 0.25
    with pytest.raises(ValueError, match=r"prob must be a probability in \[0, 1\], got True"):
        Sometimes(_plus_one(), prob=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"OneOf state has unknown keys \['seed'\] \(valid: \['ops'\]\)"):
        OneOf(_Counter(), _Counter()).load_state_dict({"ops": [{"count": 0}, {"count": 0}], "seed": 1})
