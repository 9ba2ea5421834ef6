"""The NumpyOp meta ops Fuse and Repeat: keys, order, stopping rules, the wrapped ops' draws, state, RUA strength,
pops, errors, and exact per-sample draws in a Pipeline (threads, resume)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import Batch, Delete, LambdaOp, NumpyOp, forward_numpyop
from fe_ray.op.numpyop.meta import Fuse, OneOf, Repeat, Sometimes
from fe_ray.op.numpyop.multivariate import RandomCrop
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate import Brightness, TranslateX
from fe_ray.op.tensorop.tensorop import LambdaOp as TensorLambdaOp
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {"mode": "train", RNG_KEY: np.random.default_rng(seed)}


def _lambda(fn: Any, inputs: Any, outputs: Any, **kwargs: Any) -> LambdaOp:
    return LambdaOp(fn, inputs=inputs, outputs=outputs, **kwargs)


class _Counter(NumpyOp):
    """A stateful op: counts its calls and adds 1."""

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")
        self.count = 0

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.count += 1
        return data + 1

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


# ------------------------------------------------------------------ Fuse
def test_fuse_runs_in_order_and_reads_only_keys_not_written_before() -> None:
    fuse = Fuse([_lambda(lambda x: x + 1, "x", "y"), _lambda(lambda y, z: y * z, ["y", "z"], "w"),
                 _lambda(lambda w: w - 1, "w", "x")])
    assert fuse.inputs == ["x", "z"] and fuse.outputs == ["y", "w", "x"]
    data = {"x": 2, "z": 10}
    forward_numpyop([fuse], data, {})
    assert data == {"x": 29, "y": 3, "z": 10, "w": 30}
    assert Fuse(_lambda(abs, "x", "x")).ops[0].inputs == ["x"]  # a single op, not in a list


def test_fuse_takes_the_ops_mode_and_randomness() -> None:
    fuse = Fuse([_lambda(abs, "x", "x", mode="train", ds_id="a"), _lambda(abs, "x", "x", mode="train", ds_id="a")])
    assert fuse.mode == {"train"} and fuse.ds_id == {"a"} and not fuse.is_random
    assert Fuse([_lambda(abs, "x", "x"), Brightness("x", "x")]).is_random


def test_fused_random_ops_draw_one_after_another_from_the_same_generator() -> None:
    grid = np.arange(36).reshape(6, 6)
    fuse = Fuse([RandomCrop(4, 4, image_in="x"), RandomCrop(2, 2, image_in="x")])
    out = fuse.forward([grid], _state(8))[0]
    rng = np.random.default_rng(8)
    top, left = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    top2, left2 = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    np.testing.assert_array_equal(out, grid[top:top + 4, left:left + 4][top2:top2 + 2, left2:left2 + 2])


def test_fuse_inside_sometimes_and_as_a_pop() -> None:
    fused = Sometimes(Fuse([_lambda(lambda x: x + 1, "x", "x"), _lambda(lambda x: x * 3, "x", "x")]), prob=1.0)
    data = {"x": np.array([1, 2, 3])}
    forward_numpyop([fused], data, {}, batched=True)
    assert data["x"].tolist() == [6, 9, 12]


def test_fuse_with_delete_keeps_the_deleted_intermediate_to_itself() -> None:
    """FastEstimator's rule: a Delete of a key an earlier fused op wrote takes it off the Fuse's outputs; a Delete of
    a key the Fuse reads only removes it inside the Fuse."""
    fused = Fuse([_lambda(lambda a: a + 1, "a", "tmp"), _lambda(lambda t: t * 2, "tmp", "b"), Delete("tmp")])
    assert (fused.inputs, fused.outputs) == (["a"], ["b"])
    data = {"a": np.array(1)}
    forward_numpyop([fused], data, {})
    assert sorted(data) == ["a", "b"] and int(data["b"]) == 4
    reads = Fuse([Delete("c"), _lambda(lambda a: a, "a", "d")])
    assert (reads.inputs, reads.outputs) == (["c", "a"], ["d"])
    data = {"a": np.array(5), "c": np.array(0)}
    forward_numpyop([reads], data, {})
    assert sorted(data) == ["a", "c", "d"]


@pytest.mark.parametrize("ops, error, match", [
    ([], ValueError, "at least one NumpyOp"),
    ([_lambda(abs, "x", "x", mode="train"), _lambda(abs, "x", "x")], ValueError, "must share mode"),
    ([_lambda(abs, "x", "x", ds_id="a"), _lambda(abs, "x", "x")], ValueError, "must share ds_id"),
    ([TensorLambdaOp(abs, inputs="x", outputs="x")], TypeError, "Fuse wraps NumpyOps"),
    ([Batch(batch_size=2)], ValueError, "Fuse cannot wrap a Batch op"),
])
def test_fuse_errors(ops: list[Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Fuse(ops)


def test_fuse_state_and_rua_level() -> None:
    fuse = Fuse([_Counter(), _Counter()])
    assert fuse.forward([0], {}) == [2]
    state = fuse.state_dict()
    assert state == {"ops": [{"count": 1}, {"count": 1}]}
    fresh = Fuse([_Counter(), _Counter()])
    fresh.load_state_dict(state)
    assert [op.count for op in fresh.ops] == [1, 1]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="Fuse wraps 1 op"):
        Fuse(_Counter()).load_state_dict(state)
    scaled = Fuse([Brightness("x", "x", limit=0.4), TranslateX("x", "x", shift_limit=0.2)])
    scaled.set_rua_level(0.5)
    assert scaled.ops[0].limit == pytest.approx((-0.2, 0.2))  # type: ignore[attr-defined]
    assert scaled.ops[1].shift_limit == pytest.approx((-0.1, 0.1))  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="_Counter inside Fuse has no set_rua_level"):
        Fuse([Brightness("x", "x"), _Counter()]).set_rua_level(0.5)


# ------------------------------------------------------------------ Repeat
def test_repeat_a_fixed_number_of_times() -> None:
    op = Repeat(_lambda(lambda x: x * 2, "x", "x"), repeat=5)
    assert op.forward([1], {}) == [32]
    assert Repeat(_lambda(lambda x: x * 2, "x", "x")).forward([1], {}) == [2]  # default: once


def test_repeat_while_the_condition_holds_checked_after_each_run() -> None:
    op = Repeat(_lambda(lambda x: x + 3, "x", "x"), repeat=lambda x: x < 10)
    assert op.forward([0], {}) == [12]  # 3, 6, 9, 12
    assert op.forward([50], {}) == [53]  # runs once even when the condition is already false
    limited = Repeat(_lambda(lambda x: x + 3, "x", "x"), repeat=lambda x: x < 100, max_iter=4)
    assert limited.forward([0], {}) == [12]  # at most 4 runs in all
    assert Repeat(_lambda(lambda x: x + 3, "x", "x"), repeat=lambda x: True, max_iter=1).forward([0], {}) == [3]


def test_repeat_condition_keys_become_inputs() -> None:
    op = Repeat(_lambda(lambda y: y + 1, "y", "y"), repeat=lambda y, limit: y < limit)
    assert op.inputs == ["y", "limit"] and op.outputs == ["y"]
    data = {"y": 0, "limit": 4}
    forward_numpyop([op], data, {})
    assert data == {"y": 4, "limit": 4}
    made = Repeat(_lambda(lambda x: x * 2, "x", "z"), repeat=lambda z: False)  # z is written, not read
    assert made.inputs == ["x"] and made.forward([3], {}) == [6]


def test_repeat_a_random_op_draws_anew_each_run_from_the_same_generator() -> None:
    op = Repeat(Brightness("x", "x", limit=0.5), repeat=3)
    assert op.is_random and op.mode == set()
    image = np.full((2, 2), 100, np.uint8)
    out = op.forward([image], _state(4))[0]
    rng = np.random.default_rng(4)
    expected = image
    for _ in range(3):
        factor = 1.0 + rng.uniform(-0.5, 0.5)
        expected = np.clip(np.float32(factor) * expected.astype(np.float32), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(out, expected)


def test_repeat_as_a_pop_sees_the_batch() -> None:
    op = Repeat(_lambda(lambda x: x * 2, "x", "x"), repeat=lambda x: x.sum() < 50)
    data = {"x": np.array([1, 2])}
    forward_numpyop([op], data, {}, batched=True)
    assert data["x"].tolist() == [32, 64]  # sums 6, 12, 24, 48, 96


@pytest.mark.parametrize("kwargs, error, match", [
    ({"repeat": 0}, ValueError, "repeat must be >= 1"),
    ({"repeat": 2, "max_iter": 3}, ValueError, "only limits a function repeat"),
    ({"repeat": lambda x: True, "max_iter": 0}, ValueError, "max_iter must be an int >= 1"),
    ({"repeat": "twice"}, TypeError, "repeat must be an int"),
])
def test_repeat_errors(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Repeat(_lambda(abs, "x", "x"), **kwargs)
    with pytest.raises(TypeError, match="Repeat wraps NumpyOps"):
        Repeat(TensorLambdaOp(abs, inputs="x", outputs="x"))  # type: ignore[arg-type]


def test_repeat_state_and_rua_level() -> None:
    op = Repeat(_Counter(), repeat=3)
    assert op.forward([0], {}) == [3]
    assert op.state_dict() == {"ops": [{"count": 3}]}
    fresh = Repeat(_Counter())
    fresh.load_state_dict(op.state_dict())
    assert fresh.op.count == 3  # type: ignore[attr-defined]
    scaled = Repeat(Brightness("x", "x", limit=0.4), repeat=2)
    scaled.set_rua_level(0.25)
    assert scaled.op.limit == pytest.approx((-0.1, 0.1))  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="inside Repeat has no set_rua_level"):
        Repeat(_Counter()).set_rua_level(0.5)


def test_meta_ops_nest() -> None:
    nested = Repeat(Fuse([OneOf(_lambda(lambda x: x + 1, "x", "x"), _lambda(lambda x: x + 1, "x", "x")),
                          _lambda(lambda x: x * 2, "x", "x")]), repeat=2)
    assert nested.is_random
    assert nested.forward([1], _state(0)) == [10]  # ((1 + 1) * 2 + 1) * 2


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    return NumpyDataset({"x": np.random.default_rng(3).integers(0, 256, (N, 6, 6), dtype=np.uint8),
                         "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [Repeat(Fuse([Brightness("x", "x"), TranslateX("x", "x")]), repeat=lambda x: x.mean() > 60, max_iter=3),
            Fuse([_lambda(lambda x: x, "x", "x"), Brightness("x", "x")])]


def test_pipeline_fuse_and_repeat_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=9)


@pytest.mark.parametrize("wrap", [lambda op: Sometimes(op), lambda op: OneOf(op), lambda op: Repeat(op)],
                         ids=["Sometimes", "OneOf", "Repeat"])
def test_meta_ops_refuse_a_batch_op(wrap: Any) -> None:
    # FastEstimator's Sometimes and OneOf refuse it; the Pipeline would never see a nested Batch op.
    with pytest.raises(ValueError, match=r"cannot wrap a Batch op.*Put Batch\(...\) in Pipeline\(ops=\[...\]\)"):
        wrap(Batch(batch_size=2))
