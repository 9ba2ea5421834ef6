"""The Batch op in a Pipeline: per-sample ops before it, batched ops after it, and its batching settings."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import BatchDataset, ExtendDataset, InterleaveDataset, NumpyDataset
from fe_ray.op.numpyop import Batch, Delete, LambdaOp, NumpyOp
from fe_ray.op.numpyop.randomness import get_rng, op_generator
from fe_ray.pipeline import Pipeline
from fe_ray.pipeline.batching import batch_entropy
from fe_ray.schedule import EpochScheduler, RepeatScheduler
from tests.dataset.resume_helpers import batches, interrupted_run


def _ds(n: int = 10, offset: int = 0) -> NumpyDataset:
    return NumpyDataset({"x": np.arange(offset, offset + n, dtype=np.float64).reshape(n, 1),
                         "y": np.arange(offset, offset + n, dtype=np.int64)})


def _ys(pipeline: Pipeline, mode: str = "train", epoch: int = 1, ds_id: str = "", **kwargs: Any) -> list[list[int]]:
    with pipeline(mode, epoch, ds_id, **kwargs) as loader:
        return [batch["y"].tolist() for batch in loader]


class _SampleOnly(NumpyOp):
    """Asserts it sees one sample (x of shape (1,)), as ops before the Batch op must."""

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        assert data.shape == (1,), data.shape
        return data

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        raise AssertionError("a per-sample op ran on a batch")


class _BatchMean(NumpyOp):
    """Asserts its input has a batch axis and writes the batch mean of x to every sample (a whole-batch statistic)."""

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="mean")
        self.states: list[dict[str, Any]] = []

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        raise AssertionError("a batched op ran on a single sample")

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        assert data.ndim == 2 and data.shape[1] == 1, data.shape
        self.states.append(dict(state))
        return np.full(len(data), data.mean())


class _BatchNoise(NumpyOp):
    """A random batched op: adds one draw per sample from its generator, in a single call on the batch."""

    is_random = True

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        assert data.ndim == 2
        return data + get_rng(state).random(data.shape)


class _SampleJitter(NumpyOp):
    """A random per-sample op, before the Batch op."""

    is_random = True

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data + 1000 * float(get_rng(state).random())


def _tagging_collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {"x": np.stack([s["x"] for s in samples]), "y": np.array([s["y"] for s in samples]),
            "tag": np.ones(len(samples))}


# ------------------------------------------------------------------ the op itself
def test_batch_op_signature_and_export_match_fastestimator() -> None:
    assert fe.op.numpyop.Batch is Batch
    params = inspect.signature(Batch).parameters
    assert list(params) == ["batch_size", "drop_last", "pad_value", "collate_fn", "mode", "ds_id"]
    assert [params[name].default for name in params] == [None, False, None, None, None, None]
    op = Batch()
    assert (op.batch_size, op.drop_last, op.pad_value, op.collate_fn) == (None, False, None, None)
    assert op.inputs == [] and op.outputs == []


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"batch_size": 0}, ValueError, "positive int"),
    ({"batch_size": 2.5}, ValueError, "positive int"),
    ({"batch_size": True}, ValueError, "positive int"),
    ({"drop_last": "yes"}, TypeError, "drop_last must be a bool"),
    ({"pad_value": "0"}, TypeError, "pad_value must be a number"),
    ({"collate_fn": 3}, TypeError, "collate_fn must be callable"),
    ({"pad_value": 0, "collate_fn": list}, ValueError, "both pad_value"),
])
def test_batch_op_rejects_bad_arguments(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        Batch(**kwargs)


# ------------------------------------------------------------------ batch size
def test_batch_size_overrides_the_pipeline_per_mode() -> None:
    pipeline = Pipeline(train_data=_ds(10), eval_data=_ds(10), batch_size=2, ops=[Batch(batch_size=4, mode="train")])
    assert _ys(pipeline, shuffle=False) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert _ys(pipeline, "eval") == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert sorted(sum(_ys(pipeline), [])) == list(range(10))  # shuffled train batches hold every sample once


def test_batch_size_overrides_the_pipeline_per_ds_id() -> None:
    pipeline = Pipeline(eval_data={"a": _ds(6), "b": _ds(6, offset=10)}, batch_size=2,
                        ops=[Batch(batch_size=4, ds_id="a")])
    assert _ys(pipeline, "eval", ds_id="a") == [[0, 1, 2, 3], [4, 5]]
    assert _ys(pipeline, "eval", ds_id="b") == [[10, 11], [12, 13], [14, 15]]


def test_batch_op_size_stands_in_for_a_missing_pipeline_batch_size() -> None:
    pipeline = Pipeline(eval_data=_ds(7), ops=[Batch(batch_size=3)])
    assert _ys(pipeline, "eval") == [[0, 1, 2], [3, 4, 5], [6]]
    # A Batch op without a size, or one that never runs in the mode, does not count: the samples come one at a time,
    # without a batch axis, as with no batch size anywhere (FastEstimator's rule).
    assert _ys(Pipeline(eval_data=_ds(3), ops=[Batch(drop_last=True)]), "eval") == [0, 1, 2]
    assert _ys(Pipeline(eval_data=_ds(3), ops=[Batch(batch_size=3, mode="train")]), "eval") == [0, 1, 2]
    with pytest.raises(ValueError, match="no entry for mode"):
        Pipeline(train_data=_ds(7), eval_data=_ds(7), batch_size={"train": 2}, ops=[Batch(batch_size=3, mode="test")])
    # Sized for one ds_id only: the other's samples come one at a time.
    pipeline = Pipeline(eval_data={"a": _ds(4), "b": _ds(2)}, ops=[Batch(batch_size=3, ds_id="a")])
    assert _ys(pipeline, "eval", ds_id="a") == [[0, 1, 2], [3]]
    assert _ys(pipeline, "eval", ds_id="b") == [0, 1]


def test_scheduled_batch_ops_change_with_the_epoch() -> None:
    ops = [EpochScheduler({1: Batch(batch_size=2), 3: Batch(batch_size=5), 4: None})]
    pipeline = Pipeline(eval_data=_ds(10), batch_size=3, ops=ops)
    assert [len(b) for b in _ys(pipeline, "eval", epoch=1)] == [2] * 5
    assert [len(b) for b in _ys(pipeline, "eval", epoch=3)] == [5, 5]
    assert [len(b) for b in _ys(pipeline, "eval", epoch=4)] == [3, 3, 3, 1]  # no Batch op: the Pipeline's size
    assert ops[0] in pipeline.get_scheduled_items("eval")  # the Estimator's warmup sees each configuration
    repeat = Pipeline(eval_data=_ds(6), batch_size=6, ops=[RepeatScheduler([Batch(batch_size=2), Batch(3)])])
    assert [len(_ys(repeat, "eval", epoch=epoch)) for epoch in (1, 2, 3)] == [3, 2, 3]


# ------------------------------------------------------------------ drop_last, pad_value, collate_fn
def test_drop_last_from_the_op() -> None:
    pipeline = Pipeline(eval_data=_ds(10), test_data=_ds(10), batch_size=4, ops=[Batch(drop_last=True, mode="eval")])
    assert _ys(pipeline, "eval") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert _ys(pipeline, "test") == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # The op's default (False) leaves the Pipeline's drop_last on.
    keep = Pipeline(eval_data=_ds(10), batch_size=4, drop_last=True, ops=[Batch(batch_size=3)])
    assert _ys(keep, "eval") == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def _ragged() -> LambdaOp:
    return LambdaOp(lambda y: np.arange(int(y) % 3 + 1), inputs="y", outputs="r")


def test_pad_value_from_the_op() -> None:
    pipeline = Pipeline(eval_data=_ds(3), batch_size=3, ops=[_ragged(), Batch(pad_value=-1)])
    assert pipeline.get_results("eval")["r"].tolist() == [[0, -1, -1], [0, 1, -1], [0, 1, 2]]
    # Without padding the same ops cannot be batched.
    with pytest.raises(ValueError, match="different shapes"):
        Pipeline(eval_data=_ds(3), batch_size=3, ops=[_ragged()]).get_results("eval")
    # The op's pad_value replaces the Pipeline's pad_value and collate_fn; an op without one keeps the Pipeline's.
    pipeline = Pipeline(eval_data=_ds(3), batch_size=3, pad_value=7, collate_fn=lambda s: {"n": np.array(len(s))},
                        ops=[_ragged(), Batch(pad_value=-1, mode="eval"), Batch(mode="test")])
    assert pipeline.get_results("eval")["r"][0].tolist() == [0, -1, -1]
    plain = Pipeline(eval_data=_ds(3), batch_size=3, pad_value=7, ops=[_ragged(), Batch(batch_size=3)])
    assert plain.get_results("eval")["r"][0].tolist() == [0, 7, 7]


def test_collate_fn_from_the_op() -> None:
    seen: list[int] = []

    def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(len(samples))
        return {"y": np.array([s["y"] for s in samples]) * 10, "x": np.stack([s["x"] for s in samples])}

    pipeline = Pipeline(eval_data=_ds(5), batch_size=2, pad_value=0, ops=[Batch(batch_size=3, collate_fn=collate)])
    assert _ys(pipeline, "eval") == [[0, 10, 20], [30, 40]] and seen == [3, 2]
    bad = Pipeline(eval_data=_ds(5), batch_size=2, ops=[Batch(collate_fn=lambda samples: [1, 2])])
    with pytest.raises(TypeError, match="collate_fn returned a list"):
        bad.get_results("eval")


# ------------------------------------------------------------------ ops before and after the Batch op
@pytest.mark.parametrize("num_process", [0, 2])
def test_ops_after_batch_see_whole_batches(num_process: int) -> None:
    mean = _BatchMean()
    ops = [_SampleOnly(), Batch(batch_size=4), mean, LambdaOp(lambda x: x * 2, inputs="x", outputs="x2"),
           Delete("y")]
    pipeline = Pipeline(eval_data=_ds(10), batch_size=2, ops=ops, num_process=num_process)
    with pipeline("eval", 2) as loader:
        got = list(loader)
    assert [b["mean"].tolist() for b in got] == [[1.5] * 4, [5.5] * 4, [8.5] * 2]
    assert got[0]["x2"].tolist() == [[0.0], [2.0], [4.0], [6.0]]  # a per-sample op after Batch runs per row
    assert all("y" not in b for b in got)
    assert mean.states[0] == {"mode": "eval", "epoch": 2, "ds_id": ""}


def test_batched_ops_without_per_sample_ops_edit_copies_of_the_data() -> None:
    class AddInPlace(NumpyOp):
        def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
            data += 100  # in place, on the batch the dataset's fast path handed over
            return data

    dataset = _ds(6)
    pipeline = Pipeline(eval_data=dataset, ops=[Batch(batch_size=4), _BatchMean(), AddInPlace("y", "y")])
    for _ in range(2):  # a second epoch sees the same values: the dataset's arrays were not changed
        with pipeline("eval", 1) as loader:
            got = list(loader)
        assert [b["y"].tolist() for b in got] == [[100, 101, 102, 103], [104, 105]]
        assert got[1]["mean"].tolist() == [4.5, 4.5]
    assert dataset.data["y"].tolist() == list(range(6))


def _noise_pipeline(num_process: int = 0, seed: int = 11) -> Pipeline:
    return Pipeline(train_data=_ds(10), batch_size=4, ops=[_SampleJitter(), Batch(), _BatchNoise()],
                    num_process=num_process, shuffle_seed=seed)


def _assert_noise_seeded_by_batch_index(data: Any, seed: int, **kwargs: Any) -> None:
    """Each batch equals the batch without the random batched op plus that op's draws from the generator of the
    batch's index in the epoch."""
    with_noise = Pipeline(train_data=data, ops=[_SampleJitter(), Batch(), _BatchNoise()], shuffle_seed=seed, **kwargs)
    without = Pipeline(train_data=data, ops=[_SampleJitter(), Batch()], shuffle_seed=seed, **kwargs)
    got, plain = batches(with_noise, range(1, 2)), batches(without, range(1, 2))
    assert len(got) == len(plain) > 1
    for index, (noisy, clean) in enumerate(zip(got, plain)):
        assert noisy["y"] == clean["y"]
        x = np.asarray(clean["x"])
        expected = x + op_generator(batch_entropy(seed, "train", "", 1, index), 0).random(x.shape)
        np.testing.assert_allclose(noisy["x"], expected)


def test_random_batched_ops_are_seeded_by_the_batch_position() -> None:
    serial, threaded = batches(_noise_pipeline(), range(1, 3)), batches(_noise_pipeline(num_process=2), range(1, 3))
    assert serial == threaded
    assert batches(_noise_pipeline(seed=12), range(1, 2)) != serial[:3]
    assert np.asarray(serial[0]["x"]).tolist() != np.asarray(serial[3]["x"]).tolist()  # epoch 2 draws anew
    _assert_noise_seeded_by_batch_index(_ds(10), 11, batch_size=4)
    _assert_noise_seeded_by_batch_index(_ds(10), 11, batch_size=4, num_process=2)
    _assert_noise_seeded_by_batch_index(ExtendDataset(_ds(5), spoof_length=9), 11, batch_size=2)
    _assert_noise_seeded_by_batch_index(InterleaveDataset([_ds(8), _ds(8, offset=100)]), 11, batch_size=2)
    _assert_noise_seeded_by_batch_index(BatchDataset([_ds(6), _ds(9, offset=100)], num_samples=[2, 3]), 11)


def test_random_batched_ops_resume_exactly() -> None:
    uninterrupted = batches(_noise_pipeline(), range(1, 3))
    assert interrupted_run(_noise_pipeline, epochs=2, stop_epoch=1, taken=1) == uninterrupted
    assert interrupted_run(_noise_pipeline, epochs=2, stop_epoch=2, taken=2) == uninterrupted

    def threaded() -> Pipeline:
        return _noise_pipeline(num_process=2)

    assert interrupted_run(threaded, epochs=2, stop_epoch=2, taken=1) == uninterrupted


# ------------------------------------------------------------------ more than one Batch op
def test_two_batch_ops_in_one_context_raise_naming_them() -> None:
    with pytest.raises(ValueError, match=r"2 Batch ops active in mode 'train', epoch 1.*Batch\(batch_size=4.*"
                                         r"Batch\(batch_size=8"):
        Pipeline(train_data=_ds(), batch_size=2, ops=[Batch(batch_size=4), LambdaOp(abs, "x", "x"), Batch(8)])
    # Apart by mode, ds_id or epoch they are fine.
    Pipeline(train_data=_ds(), eval_data=_ds(), batch_size=2, ops=[Batch(4, mode="train"), Batch(8, mode="eval")])
    Pipeline(train_data={"a": _ds(), "b": _ds()}, batch_size=2, ops=[Batch(4, ds_id="a"), Batch(8, ds_id="b")])
    Pipeline(train_data=_ds(), batch_size=2, ops=[EpochScheduler({1: Batch(4), 3: None}),
                                                   EpochScheduler({3: Batch(8)})])
    # A scheduled clash is found at construction, naming the epoch.
    with pytest.raises(ValueError, match="mode 'train', epoch 3"):
        Pipeline(train_data=_ds(), batch_size=2, ops=[Batch(4), EpochScheduler({3: Batch(8)})])
    # Infer is checked too, as in FastEstimator, though it has no data.
    with pytest.raises(ValueError, match="mode 'infer'"):
        Pipeline(ops=[Batch(4, mode="infer"), Batch(8, mode="!train")])


def test_a_clash_only_inside_an_interleave_dataset_raises_when_the_loader_opens() -> None:
    dataset = InterleaveDataset({"a": _ds(8), "b": _ds(8, offset=100)})
    pipeline = Pipeline(train_data=dataset, batch_size=2, ops=[Batch(4, ds_id="a"), Batch(3, ds_id="!b")])
    with pytest.raises(ValueError, match="ds_id 'a'"):
        pipeline("train", 1)


# ------------------------------------------------------------------ datasets that batch themselves or interleave
def test_batch_dataset_ignores_the_op_batch_size() -> None:
    dataset = BatchDataset([_ds(10), _ds(20, offset=100)], num_samples=[2, 3])
    mean = _BatchMean()
    pipeline = Pipeline(train_data=dataset, ops=[_SampleOnly(), Batch(batch_size=7, drop_last=True), mean],
                        shuffle_seed=3)
    got = batches(pipeline, range(1, 2))
    assert len(got) == len(dataset) == 7 and all(len(b["y"]) == 5 for b in got)
    assert all(np.allclose(b["mean"], np.mean(b["x"])) for b in got)

    def make() -> Pipeline:
        return Pipeline(train_data=dataset, ops=[Batch(7), _BatchNoise()], shuffle_seed=3)

    assert interrupted_run(make, epochs=1, stop_epoch=1, taken=3) == batches(make(), range(1, 2))


def test_interleave_dataset_takes_batch_ops_per_dataset_name() -> None:
    dataset = InterleaveDataset({"a": _ds(12), "b": _ds(12, offset=100)})
    mean = _BatchMean()
    ops = [Batch(batch_size=3, ds_id="a"), Batch(batch_size=2, ds_id="b", collate_fn=_tagging_collate), mean]
    pipeline = Pipeline(eval_data=dataset, batch_size=5, ops=ops)
    got = pipeline.get_results("eval", num_steps=4)
    assert [b["y"].tolist() for b in got] == [[0, 1, 2], [100, 101], [3, 4, 5], [102, 103]]
    assert ["tag" in b for b in got] == [False, True, False, True]
    assert [b["mean"][0] for b in got] == [1.0, 100.5, 4.0, 102.5]
    assert [state["ds_id"] for state in mean.states] == ["a", "b", "a", "b"]
    # The op's size beats the sizes the dataset was given.
    dataset.set_batch_sizes([1, 4])
    sized = Pipeline(eval_data=dataset, ops=[Batch(batch_size=2, ds_id="a")])
    assert [b["y"].tolist() for b in sized.get_results("eval", num_steps=2)] == [[0, 1], [100, 101, 102, 103]]


def test_interleave_with_random_batched_ops_resumes_exactly() -> None:
    def make() -> Pipeline:
        dataset = InterleaveDataset({"a": _ds(12), "b": _ds(12, offset=100)}, pattern=["a", "b", "b"])
        return Pipeline(train_data=dataset, batch_size=2, ops=[Batch(3, ds_id="a"), _BatchNoise()],
                        shuffle_seed=4, num_process=2)

    assert interrupted_run(make, epochs=2, stop_epoch=2, taken=2) == batches(make(), range(1, 3))


def test_extend_dataset_with_a_batch_op() -> None:
    pipeline = Pipeline(eval_data=ExtendDataset(_ds(5), spoof_length=8), batch_size=2, ops=[Batch(batch_size=3)])
    assert _ys(pipeline, "eval") == [[0, 1, 2], [3, 4, 0], [1, 2]]


# ------------------------------------------------------------------ inspection
def test_get_results_and_transform_run_the_batched_ops() -> None:
    pipeline = Pipeline(train_data=_ds(10), batch_size=2, ops=[_SampleOnly(), Batch(batch_size=4), _BatchMean()])
    result = pipeline.get_results("train")
    assert result["y"].tolist() == [0, 1, 2, 3] and result["mean"].tolist() == [1.5] * 4
    assert pipeline.state_dict()["positions"] == {}
    out = pipeline.transform({"x": np.array([3.0]), "y": np.int64(3)}, "infer")
    assert out["x"].shape == (1, 1) and out["mean"].tolist() == [3.0]
    # The Batch op's collate_fn makes the batch of 1; torch tensors come back when asked for.
    collating = Pipeline(ops=[Batch(collate_fn=_tagging_collate), _BatchMean()])
    out = collating.transform({"x": np.array([2.0]), "y": np.int64(1)}, "infer", target_type="torch")
    assert out["tag"].tolist() == [1.0] and out["mean"].tolist() == [2.0]


def test_benchmark_lists_batched_ops_after_the_collation(capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = Pipeline(train_data=_ds(8), batch_size=2, ops=[_SampleOnly(), Batch(batch_size=4), _BatchMean()])
    pipeline.benchmark(num_steps=4, log_interval=2)
    rows = [line.split(" : ")[0].strip() for line in capsys.readouterr().out.splitlines() if " : " in line]
    assert rows == ["Op", "_SampleOnly", "<Collating Batch>", "_BatchMean"]
    assert pipeline.state_dict()["positions"] == {}


def test_loader_finish_without_an_index_draws_anew() -> None:
    pipeline = Pipeline(eval_data=_ds(4), batch_size=4, ops=[Batch(), _BatchNoise()])
    with pipeline("eval", 1) as loader:
        stage = loader.stage(0)
        first = loader.finish({"x": np.zeros((2, 1))}, stage, "", None)["x"]
        second = loader.finish({"x": np.zeros((2, 1))}, stage, "", None)["x"]
        seeded = loader.finish({"x": np.zeros((2, 1))}, stage, "", 0)["x"]
    assert first.shape == (2, 1) and np.all((first > 0) & (first < 1)) and not np.array_equal(first, second)
    np.testing.assert_array_equal(seeded, op_generator(batch_entropy(loader.seed, "eval", "", 1, 0), 0)
                                  .random((2, 1)))


def test_a_batch_op_among_the_network_pops_is_refused() -> None:
    from fe_ray.op.tensorop import LambdaOp

    with pytest.raises(TypeError, match="Network pops got a Batch op.*Pipeline\\(ops=...\\)"):
        fe.Network(ops=[LambdaOp(fn=lambda x: x, inputs="x", outputs="y")], pops=[Batch(batch_size=2)])


def test_a_lambda_op_after_batch_sees_the_whole_batch() -> None:
    # FastEstimator's LambdaOp.forward_batch calls its function once on the batch, input-less ones included.
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    ops = [Batch(batch_size=4), LambdaOp(lambda v: v / v.max(), inputs="x", outputs="x"),
           LambdaOp(lambda: np.ones((4, 3), dtype=np.float32), outputs="noise")]
    first = Pipeline(train_data=NumpyDataset({"x": x}), ops=ops).get_results()
    np.testing.assert_allclose(first["x"], x[:4] / 7.0)  # the batch's maximum, not each row's
    assert first["noise"].shape == (4, 3)
