"""Pipeline: batching, ops, shuffling, steps_per_epoch, schedulers, threads, inspection, resuming and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop.numpyop import LambdaOp, NumpyOp
from fe_ray.op.numpyop.univariate import ExpandDims, Minmax
from fe_ray.op.tensorop.tensorop import LambdaOp as TensorLambdaOp
from fe_ray.pipeline import Loader, Pipeline
from fe_ray.schedule import EpochScheduler, RepeatScheduler


def _ds(n: int = 10, offset: int = 0) -> NumpyDataset:
    return NumpyDataset({"x": np.arange(offset, offset + n, dtype=np.float32).reshape(n, 1),
                         "y": np.arange(offset, offset + n, dtype=np.int64)})


def _ids(loader: Any) -> list[list[int]]:
    return [batch["y"].tolist() for batch in loader]


def _epoch(pipeline: Pipeline, mode: str = "train", epoch: int = 1, **kwargs: Any) -> list[list[int]]:
    with pipeline(mode, epoch, **kwargs) as loader:
        return _ids(loader)


class _Counting(NumpyOp):
    """Adds 100 to y and counts the samples it has seen (to check skipped batches run no ops)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(inputs="y", outputs="y", **kwargs)
        self.calls = 0

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.calls += 1
        return data + 100


# ------------------------------------------------------------------ batching and ops
def test_batches_are_stacked_dicts_in_order_outside_train() -> None:
    pipeline = Pipeline(eval_data=_ds(10), batch_size=4)
    with pipeline("eval", 1) as loader:
        assert isinstance(loader, Loader) and len(loader) == 3
        batches = list(loader)
    assert [b["y"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0]["x"].shape == (4, 1) and batches[0]["x"].dtype == np.float32


def test_drop_last() -> None:
    pipeline = Pipeline(eval_data=_ds(10), batch_size=4, drop_last=True)
    assert _epoch(pipeline, "eval") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="leaves no batch"):
        Pipeline(eval_data=_ds(3), batch_size=4, drop_last=True)("eval", 1)


def test_ops_filtered_by_mode_and_ds_id() -> None:
    ops = [Minmax("x", "scaled", mode="train"), ExpandDims("x", "x"),
           LambdaOp(lambda y: y * 10, inputs="y", outputs="y", ds_id="b")]
    pipeline = Pipeline(train_data={"a": _ds(4), "b": _ds(4)}, eval_data=_ds(4), batch_size=4, ops=ops)
    a = pipeline.get_results("train", ds_id="a")
    b = pipeline.get_results("train", ds_id="b")
    ev = pipeline.get_results("eval")
    assert set(a) == {"x", "y", "scaled"} and a["x"].shape == (4, 1, 1)
    assert a["y"].tolist() == [0, 1, 2, 3] and b["y"].tolist() == [0, 10, 20, 30]
    assert set(ev) == {"x", "y"}
    assert pipeline.get_ds_ids(1, "train") == ["a", "b"] and pipeline.get_ds_ids(1, "eval") == [""]


def test_ops_receive_mode_epoch_ds_id_state() -> None:
    seen: list[dict[str, Any]] = []

    class Spy(NumpyOp):
        def forward(self, data: Any, state: dict[str, Any]) -> Any:
            seen.append(dict(state))
            return data

    Pipeline(train_data={"a": _ds(2)}, batch_size=2, ops=Spy("y", "y")).get_results("train", epoch=3, ds_id="a")
    assert seen[0] == {"mode": "train", "epoch": 3, "ds_id": "a"}


def test_ragged_samples_name_the_key() -> None:
    op = LambdaOp(lambda y: np.zeros(int(y) + 1), inputs="y", outputs="ragged")
    with pytest.raises(ValueError, match=r"Cannot batch key 'ragged'.*different shapes.*Pipeline\(pad_value=...\)"):
        Pipeline(train_data=_ds(4), batch_size=4, ops=op).get_results()


def test_pad_value_pads_ragged_samples_at_the_end_of_each_axis() -> None:
    op = LambdaOp(lambda y: np.ones((int(y) + 1, 3 - int(y)), np.float32), inputs="y", outputs="ragged")
    batch = Pipeline(train_data=_ds(3), batch_size=3, ops=op, pad_value=-1).get_results()
    assert batch["ragged"].shape == (3, 3, 3) and batch["ragged"].dtype == np.float32
    np.testing.assert_array_equal(batch["ragged"][0], [[1, 1, 1], [-1, -1, -1], [-1, -1, -1]])
    np.testing.assert_array_equal(batch["ragged"][2], [[1, -1, -1]] * 3)
    np.testing.assert_array_equal(batch["x"], [[0], [1], [2]])  # keys of one shape are untouched
    other_rank = LambdaOp(lambda y: np.zeros((1,) * (int(y) + 1)), inputs="y", outputs="rank")
    with pytest.raises(ValueError, match="number of axes"):
        Pipeline(train_data=_ds(2), batch_size=2, ops=other_rank, pad_value=0).get_results()


def test_collate_fn_makes_the_batches() -> None:
    seen: list[int] = []

    def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(len(samples))
        return {"y": np.array([s["y"] for s in samples]), "n": np.full(len(samples), len(samples))}

    pipeline = Pipeline(train_data=_ds(5), batch_size=2, collate_fn=collate)  # no ops: still per-sample loading
    batches = pipeline.get_results(num_steps=3)
    assert seen == [2, 2, 1] and [b["n"].tolist() for b in batches] == [[2, 2], [2, 2], [1]]
    assert [b["y"].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    with pytest.raises(TypeError, match="collate_fn returned a list"):
        Pipeline(train_data=_ds(2), batch_size=2, collate_fn=lambda samples: samples).get_results()


# ------------------------------------------------------------------ shuffling and steps_per_epoch
def test_shuffle_is_seeded_per_epoch_and_train_only_by_default() -> None:
    first = Pipeline(_ds(20), _ds(20), batch_size=5, shuffle_seed=7)
    second = Pipeline(_ds(20), _ds(20), batch_size=5, shuffle_seed=7)
    other = Pipeline(_ds(20), _ds(20), batch_size=5, shuffle_seed=8)
    epoch1 = _epoch(first)
    assert epoch1 == _epoch(second) != _epoch(other)
    assert sorted(sum(epoch1, [])) == list(range(20)) and sum(epoch1, []) != list(range(20))
    assert _epoch(first, epoch=2) != epoch1  # each epoch reshuffles
    assert sum(_epoch(first, "eval"), []) == list(range(20))
    assert sum(_epoch(first, "eval", shuffle=True), []) != list(range(20))
    assert sum(_epoch(first, "train", shuffle=False), []) == list(range(20))


def test_unseeded_pipeline_keeps_its_seed_in_state() -> None:
    pipeline = Pipeline(_ds(20), batch_size=5)
    restored = Pipeline(_ds(20), batch_size=5)
    restored.load_state_dict(pipeline.state_dict())
    assert _epoch(pipeline) == _epoch(restored)


def test_steps_per_epoch_cuts_and_extends_with_a_reshuffled_pass() -> None:
    pipeline = Pipeline(_ds(10), batch_size=4, shuffle_seed=0)
    full = _epoch(pipeline)
    assert _epoch(pipeline, steps_per_epoch=2) == full[:2]
    with pipeline("train", 1, steps_per_epoch=5) as loader:
        assert len(loader) == 5
        extended = _ids(loader)
    # FastEstimator's endless sampler: 20 samples in full batches, the third running on into the second pass
    assert [len(batch) for batch in extended] == [4] * 5
    stream = [sample for batch in extended for sample in batch]
    first_pass = [sample for batch in full for sample in batch]
    assert stream[:10] == first_pass and sorted(stream[10:]) == list(range(10))
    assert stream[10:] != first_pass  # the second pass has its own permutation
    with Pipeline(_ds(10), batch_size=4, shuffle_seed=0, drop_last=True)("train", 1, steps_per_epoch=4) as loader:
        assert [len(batch) for batch in _ids(loader)] == [4] * 4  # drop_last does not apply beyond a pass


# ------------------------------------------------------------------ schedulers
def test_scheduled_datasets_and_batch_sizes() -> None:
    data = EpochScheduler({1: _ds(8), 3: _ds(6, offset=100)})
    pipeline = Pipeline(train_data=data, eval_data=RepeatScheduler([_ds(4), None]),
                        batch_size=EpochScheduler({1: 2, 2: 4}), shuffle_seed=0)
    assert [len(b) for b in _epoch(pipeline, epoch=1)] == [2] * 4
    assert [len(b) for b in _epoch(pipeline, epoch=2)] == [4, 4]
    assert min(sum(_epoch(pipeline, epoch=3), [])) >= 100
    assert pipeline.get_modes(1) == {"train", "eval"} and pipeline.get_modes(2) == {"train"}
    assert pipeline.get_modes() == {"train", "eval"}
    assert pipeline.get_ds_ids(2, "eval") == []
    assert pipeline.get_epochs_with_data(4, "eval") == {1, 3}  # a set, as FastEstimator's
    assert data in pipeline.get_scheduled_items("train")
    with pytest.raises(ValueError, match="no data at epoch 2"):
        pipeline("eval", 2)


def test_batch_size_per_mode_and_scheduled_ops() -> None:
    op = EpochScheduler({1: None, 2: LambdaOp(lambda y: -y, inputs="y", outputs="y")})
    pipeline = Pipeline(_ds(6), _ds(6), batch_size={"train": 3, "eval": EpochScheduler({1: 6})}, ops=op)
    assert len(pipeline.get_results("train")["y"]) == 3
    assert len(pipeline.get_results("eval")["y"]) == 6
    assert pipeline.get_results("eval", epoch=2)["y"].max() == 0


# ------------------------------------------------------------------ worker threads
@pytest.mark.parametrize("with_ops", [False, True])
def test_num_process_gives_the_same_batches(with_ops: bool) -> None:
    ops = [Minmax("x", "scaled"), LambdaOp(lambda y: y * 2, inputs="y", outputs="y2")] if with_ops else None
    results = []
    for workers in (0, 3):
        pipeline = Pipeline(_ds(50), batch_size=4, ops=ops, num_process=workers, shuffle_seed=5)
        with pipeline("train", 2, steps_per_epoch=20) as loader:
            results.append(list(loader))
    assert len(results[0]) == len(results[1]) == 20
    for serial, threaded in zip(*results):
        assert serial.keys() == threaded.keys()
        for key in serial:
            np.testing.assert_array_equal(serial[key], threaded[key])


def test_threaded_loader_can_stop_early_and_propagates_errors() -> None:
    pipeline = Pipeline(_ds(40), batch_size=2, num_process=2, shuffle_seed=0)
    with pipeline("train", 1) as loader:
        first = next(iter(loader))
    assert len(first["y"]) == 2

    def boom(y: Any) -> Any:
        raise RuntimeError("bad sample")

    failing = Pipeline(_ds(8), batch_size=2, num_process=2, ops=LambdaOp(boom, inputs="y", outputs="y"))
    with pytest.raises(RuntimeError, match="bad sample"), failing("train", 1) as loader:
        list(loader)


# ------------------------------------------------------------------ inspection
def test_get_results_and_transform() -> None:
    pipeline = Pipeline(_ds(10), batch_size=4, ops=ExpandDims("x", "x", mode="infer"), shuffle_seed=0)
    batches = pipeline.get_results(num_steps=3)
    assert isinstance(batches, list) and [len(b["y"]) for b in batches] == [4, 4, 2]
    assert pipeline.get_results(shuffle=True)["y"].tolist() == _epoch(pipeline)[0]
    assert pipeline.state_dict()["positions"] == {}  # get_results never moves the position
    out = pipeline.transform({"x": np.ones(3, dtype=np.float32), "y": 1}, mode="infer")
    assert out["x"].shape == (1, 3, 1) and out["y"].shape == (1,)


def test_get_results_stops_at_the_end_of_the_epoch() -> None:
    """Asking for more batches than one pass holds returns that pass only (no batches of a second pass)."""
    pipeline = Pipeline(_ds(10), eval_data=_ds(6), batch_size=4)
    assert [b["y"].tolist() for b in pipeline.get_results(mode="eval", num_steps=5)] == [[0, 1, 2, 3], [4, 5]]
    assert pipeline.get_results(mode="eval", num_steps=2)[1]["y"].tolist() == [4, 5]


def test_loader_epoch_defaults_to_1_and_transform_makes_framework_tensors() -> None:
    """FastEstimator's ``pipeline(mode)`` opens epoch 1, and ``transform(..., target_type=...)`` picks the tensors."""
    import torch

    pipeline = Pipeline(_ds(10), eval_data=_ds(6), batch_size=4, shuffle_seed=0)
    with pipeline(mode="eval") as loader:
        assert _ids(loader) == [[0, 1, 2, 3], [4, 5]]
    out = pipeline.transform({"x": np.ones(3, dtype=np.float32), "y": 1}, mode="infer", target_type="torch")
    assert isinstance(out["x"], torch.Tensor) and tuple(out["x"].shape) == (1, 3)
    assert isinstance(pipeline.transform({"x": np.ones(3)}, mode="infer", target_type="np")["x"], np.ndarray)
    with pytest.raises(ValueError, match=r"target_type must be one of \['np', 'torch', 'tf'\], got 'numpy'"):
        pipeline.transform({"x": np.ones(3)}, mode="infer", target_type="numpy")


class _AddOneInPlace(NumpyOp):
    """Augmentation code that edits its input array in place."""

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        data += 1.0
        return data


@pytest.mark.parametrize("num_process", [0, 2])
def test_ops_editing_arrays_in_place_never_change_the_dataset(num_process: int) -> None:
    """Each sample is deep-copied before the ops run (as FastEstimator does), so every epoch sees the same data."""
    dataset = NumpyDataset({"x": np.zeros((4, 2), np.float32), "y": np.arange(4)})
    pipeline = Pipeline(dataset, batch_size=4, ops=_AddOneInPlace(inputs="x", outputs="x"), num_process=num_process)
    for epoch in (1, 2, 3):
        np.testing.assert_array_equal(pipeline.get_results(epoch=epoch)["x"], np.ones((4, 2)))
    np.testing.assert_array_equal(dataset.data["x"], np.zeros((4, 2)))
    sample = {"x": np.zeros(2, np.float32)}
    np.testing.assert_array_equal(pipeline.transform(sample, mode="train")["x"], [[1.0, 1.0]])
    np.testing.assert_array_equal(sample["x"], [0.0, 0.0])


def test_a_dataset_item_that_is_not_a_dict_is_named() -> None:
    class Arrays:
        def __len__(self) -> int:
            return 3

        def __getitem__(self, index: int) -> np.ndarray:
            return np.zeros(2)

    with pytest.raises(TypeError, match=r"Dataset item 0 is a ndarray, not a dict.*NumpyDataset"):
        Pipeline(Arrays(), batch_size=2).get_results()


# ------------------------------------------------------------------ resuming
def _stream(pipeline: Pipeline, epochs: int, steps: int | None = None) -> list[list[int]]:
    return [ids for epoch in range(1, epochs + 1) for ids in _epoch(pipeline, epoch=epoch, steps_per_epoch=steps)]


@pytest.mark.parametrize("consumed_epochs, k", [(0, 1), (0, 2), (1, 0), (1, 3)])
def test_resume_equals_uninterrupted_run(consumed_epochs: int, k: int) -> None:
    def make() -> Pipeline:
        return Pipeline(_ds(13), batch_size=3, ops=_Counting(), shuffle_seed=11)

    expected = _stream(make(), 3)  # 5 batches per epoch
    first = make()
    seen = _stream(first, consumed_epochs)
    epoch = consumed_epochs + 1
    with first("train", epoch) as loader:
        iterator = iter(loader)
        seen += [next(iterator)["y"].tolist() for _ in range(k)]
        state = first.state_dict()
    if k:
        assert state["positions"] == {"train": {"": {"epoch": epoch, "batches": k}}}

    restored = make()
    restored.load_state_dict(state)
    with restored("train", epoch) as loader:
        assert len(loader) == 5 and loader.start == k
        seen += _ids(loader)
    for later in range(epoch + 1, 4):
        seen += _epoch(restored, epoch=later)
    assert seen == expected


def test_resume_skips_batches_without_running_ops() -> None:
    state_source = Pipeline(_ds(12), batch_size=3, ops=_Counting(), shuffle_seed=1)
    with state_source("train", 1) as loader:
        iterator = iter(loader)
        next(iterator), next(iterator)
        state = state_source.state_dict()
    restored = Pipeline(_ds(12), batch_size=3, ops=_Counting(), shuffle_seed=1)
    restored.load_state_dict(state)
    with restored("train", 1) as loader:
        assert len(list(loader)) == 2
    assert restored.ops[0].calls == 6  # only the two remaining batches were loaded


def test_resume_with_steps_per_epoch_across_passes_and_threads() -> None:
    def make() -> Pipeline:
        return Pipeline(_ds(7), _ds(5), batch_size=2, num_process=2, shuffle_seed=4)

    expected = _stream(make(), 2, steps=9)
    first = make()
    with first("train", 1, steps_per_epoch=9) as loader:
        iterator = iter(loader)
        head = [next(iterator)["y"].tolist() for _ in range(6)]  # past the end of the first pass (4 batches)
        state = first.state_dict()
    restored = make()
    restored.load_state_dict(state)
    tail = _epoch(restored, epoch=1, steps_per_epoch=9) + _epoch(restored, epoch=2, steps_per_epoch=9)
    assert head + tail == expected



class _PythonNoise(NumpyOp):
    """A user's op drawing from Python's global generator."""

    def __init__(self) -> None:
        super().__init__(outputs="py_noise")

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        import random

        return np.float64(random.random())


def _global_noise_pipeline(**kwargs: Any) -> Pipeline:
    """A Pipeline whose user code draws from numpy's (a LambdaOp, and one inside Sometimes) and Python's global
    generators, as FastEstimator's DCGAN draws its noise."""
    from fe_ray.op.numpyop.meta import Sometimes

    return Pipeline(_ds(12), batch_size=3, shuffle_seed=5, **kwargs,
                    ops=[LambdaOp(fn=lambda: np.random.normal(size=2).astype(np.float32), outputs="z"),
                         Sometimes(LambdaOp(fn=lambda x: x + np.random.uniform(), inputs="x", outputs="x"), prob=1.0),
                         _PythonNoise()])


def _noise(batches: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(batch["z"].tolist(), batch["x"].tolist(), batch["py_noise"].tolist()) for batch in batches]


def test_user_code_draws_from_the_global_generators_are_seeded_by_the_batch_position() -> None:
    """A resumed epoch makes the batches the uninterrupted epoch made, however the global generators moved in
    between (a distributed Network makes the following batch before the checkpoint of the current one), and making
    batches leaves the caller's global generators where they were."""
    import random

    pipeline = _global_noise_pipeline()
    np.random.seed(0)
    random.seed(0)
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with pipeline("train", 1) as loader:
        expected = list(loader)
    assert len(expected) == 4 and len({tuple(batch["z"].ravel()) for batch in expected}) == 4
    after = np.random.get_state()
    assert after[0] == numpy_state[0] and np.array_equal(after[1], numpy_state[1]) and after[2:] == numpy_state[2:]
    assert random.getstate() == python_state
    restored = _global_noise_pipeline()
    restored.load_state_dict({**pipeline.state_dict(), "positions": {"train": {"": {"epoch": 1, "batches": 2}}}})
    np.random.seed(123)  # elsewhere in the program the generators moved on
    random.seed(123)
    with restored("train", 1) as loader:
        assert _noise(list(loader)) == _noise(expected[2:])
    with _global_noise_pipeline()("train", 2) as loader:  # another epoch draws anew
        assert _noise(list(loader)) != _noise(expected)
    # Worker threads share the global generators, so their draws are not seeded; the ops' outputs still arrive.
    with _global_noise_pipeline(num_process=2)("train", 1) as loader:
        assert [batch["y"].tolist() for batch in loader] == [batch["y"].tolist() for batch in expected]


def test_only_batches_of_user_code_seed_the_global_generators(monkeypatch: pytest.MonkeyPatch) -> None:
    from fe_ray.op.numpyop.meta import Sometimes
    from fe_ray.op.numpyop.univariate import GaussianNoise
    from fe_ray.pipeline import loader as loader_module

    seeded: list[int] = []
    real = loader_module.seeded_globals

    def spy(entropy: Any) -> Any:
        seeded.append(entropy[-1])
        return real(entropy)

    monkeypatch.setattr(loader_module, "seeded_globals", spy)
    own_ops = [Minmax(inputs="x", outputs="x"), Sometimes(GaussianNoise(inputs="x", outputs="x"))]
    for ops, collate_fn, expected in [(own_ops, None, []), ([], None, []), ([_Counting()], None, [0, 1]),
                                      ([Sometimes(_Counting())], None, [0, 1]),
                                      (own_ops, lambda samples: {"y": np.array([s["y"] for s in samples])}, [0, 1])]:
        seeded.clear()
        with Pipeline(_ds(6), batch_size=3, ops=ops, collate_fn=collate_fn)("train", 1) as loader:
            list(loader)
        assert seeded == expected, (ops, collate_fn)


def test_num_process_is_ignored_with_a_warning_where_an_op_keeps_state() -> None:
    """Worker threads would run a stateful op concurrently and ahead of the consumer; the batches are made in turn."""
    import threading

    from tests.helpers.ops import Warmup

    class Where(Warmup):
        def forward(self, data: Any, state: dict[str, Any]) -> Any:
            threads.add(threading.current_thread().name)
            return super().forward(data, state)

    threads: set[str] = set()
    serial = Pipeline(_ds(12), batch_size=3, ops=Where(ramp=8), shuffle_seed=2)
    with serial("train", 1) as loader:
        expected = [batch["x"].tolist() for batch in loader]
    threaded = Pipeline(_ds(12), batch_size=3, ops=Where(ramp=8), shuffle_seed=2, num_process=2)
    threads.clear()
    with pytest.warns(UserWarning, match="num_process is ignored where an op keeps state"):
        with threaded("train", 1) as loader:
            got = [batch["x"].tolist() for batch in loader]
    assert threads == {threading.current_thread().name}
    assert got == expected and threaded.ops[0].seen == 12

def test_no_batch_size_hands_out_single_samples_as_fastestimator_does() -> None:
    """No batch size anywhere: each sample comes alone, without a batch axis (FastEstimator's default); shuffled in
    train, resumable, and per epoch where a Scheduler gives None."""
    pipeline = Pipeline(train_data=_ds(5), eval_data=_ds(3), ops=[Minmax(inputs="x", outputs="x_01")],
                        shuffle_seed=0)
    assert pipeline.get_batch_size("train", 1) is None
    one = pipeline.get_results(mode="eval")
    assert one["x"].shape == (1,) and one["y"].shape == () and int(one["y"]) == 0 and one["x_01"].shape == (1,)
    with pipeline("eval", 1) as loader:
        assert len(loader) == 3 and _ids(loader) == [0, 1, 2]
    with pipeline("train", 1) as loader:
        iterator = iter(loader)
        first = [int(next(iterator)["y"]) for _ in range(2)]
    assert pipeline.state_dict()["positions"]["train"][""] == {"epoch": 1, "batches": 2}
    with pipeline("train", 1) as loader:  # resumes after the two samples handed out
        rest = [int(sample["y"]) for sample in loader]
    assert sorted(first + rest) == [0, 1, 2, 3, 4] and first + rest != [0, 1, 2, 3, 4]
    scheduled = Pipeline(eval_data=_ds(4), batch_size=EpochScheduler({1: 2, 2: None}))
    with scheduled("eval", 1) as loader:
        assert _ids(loader) == [[0, 1], [2, 3]]
    with scheduled("eval", 2) as loader:
        assert _ids(loader) == [0, 1, 2, 3]


def test_position_lifecycle() -> None:
    pipeline = Pipeline(_ds(6), _ds(6), batch_size=2, shuffle_seed=0)
    with pipeline("train", 1) as loader:
        iterator = iter(loader)
        next(iterator)
        assert pipeline.state_dict()["positions"]["train"][""] == {"epoch": 1, "batches": 1}
        list(iterator)
    assert pipeline.state_dict()["positions"] == {}  # a finished epoch leaves nothing to resume
    with pipeline("eval", 1) as loader:
        next(iter(loader))
    assert pipeline.state_dict()["positions"] == {"eval": {"": {"epoch": 1, "batches": 1}}}
    with pipeline("eval", 1, shuffle=False) as loader:  # an explicit shuffle=False look is not tracked
        assert loader.start == 0 and len(list(loader)) == 3
    # A loader for another epoch replaces a stale position and starts at 0.
    with pipeline("eval", 2) as loader:
        assert loader.start == 0
    assert pipeline.state_dict()["positions"]["eval"][""] == {"epoch": 2, "batches": 0}


def test_load_state_dict_errors() -> None:
    pipeline = Pipeline(_ds(6), batch_size=2, ops=_Counting())
    with pytest.raises(ValueError, match="lacks"):
        pipeline.load_state_dict({})
    with pytest.raises(ValueError, match="unknown mode 'bogus'"):
        pipeline.load_state_dict({"seed": 1, "positions": {"bogus": {}}, "ops": [{}]})
    with pytest.raises(ValueError, match="0 op state"):
        pipeline.load_state_dict({"seed": 1, "positions": {}, "ops": []})


# ------------------------------------------------------------------ errors
def test_unknown_mode_and_missing_data() -> None:
    pipeline = Pipeline(_ds(4), batch_size=2)
    with pytest.raises(ValueError, match=r"Unknown mode 'training'.*'train', 'eval', 'test', 'infer'"):
        pipeline("training", 1)
    with pytest.raises(ValueError, match="no eval data"):
        pipeline("eval", 1)
    with pytest.raises(ValueError, match=r"no ds_id 'a'.*available: \[''\]"):
        pipeline("train", 1, ds_id="a")
    with pytest.raises(ValueError, match="epoch must be an int >= 1"):
        pipeline("train", 0)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        pipeline("train", 1, steps_per_epoch=0)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"train_data": _ds(4), "eval_data": _ds(4), "batch_size": {"train": 2}}, ValueError, r"no entry for mode.*eval"),
    ({"train_data": _ds(4), "batch_size": 0}, ValueError, "positive int"),
    ({"train_data": _ds(4), "batch_size": {"training": 2}}, ValueError, "Unknown mode 'training'"),
    ({"train_data": NumpyDataset({"x": np.zeros((0, 2))}), "batch_size": 2}, ValueError, "empty dataset"),
    ({"train_data": EpochScheduler({1: NumpyDataset({"x": np.zeros(0)})}), "batch_size": 2}, ValueError, "empty"),
    ({"train_data": {"x": np.zeros(3)}, "batch_size": 2}, TypeError, "wrap it in fe_ray.dataset.NumpyDataset"),
    ({"train_data": 5, "batch_size": 2}, TypeError, "map-style dataset"),
    ({"train_data": {"!a": _ds(4)}, "batch_size": 2}, ValueError, "may not start with '!'"),
    ({"train_data": _ds(4), "batch_size": 2, "num_process": -1}, ValueError, "num_process"),
    ({"train_data": _ds(4), "batch_size": 2, "pad_value": "0"}, TypeError, "pad_value must be a number"),
    ({"train_data": _ds(4), "batch_size": 2, "collate_fn": "stack"}, TypeError, "collate_fn must be callable"),
    ({"train_data": _ds(4), "batch_size": 2, "ops": TensorLambdaOp(lambda x: x, inputs="x", outputs="x")},
     TypeError, "NumpyOps only"),
    ({"train_data": _ds(4), "batch_size": 2, "ops": EpochScheduler({2: TensorLambdaOp(lambda x: x, "x", "x")})},
     TypeError, "NumpyOps only"),
])
def test_constructor_errors(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Pipeline(**kwargs)


class _Curriculum(NumpyDataset):
    """A dataset that changes as training goes on (a difficulty level), with its own state."""

    def __init__(self, n: int) -> None:
        super().__init__(_ds(n).data)
        self.level = 0

    def state_dict(self) -> dict[str, Any]:
        return {"level": self.level}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.level = int(state["level"])


def test_dataset_states_are_saved_and_restored_with_the_pipeline() -> None:
    def make() -> tuple[Pipeline, _Curriculum, _Curriculum]:
        first, second = _Curriculum(4), _Curriculum(4)
        pipeline = Pipeline(train_data=EpochScheduler({1: first, 3: second}), eval_data={"a": _ds(4), "b": _ds(2)},
                            batch_size=2, shuffle_seed=0)
        return pipeline, first, second

    pipeline, first, second = make()
    first.level, second.level = 2, 5
    state = pipeline.state_dict()
    assert state["datasets"] == {"train": {"": [{"level": 2}, {"level": 5}]}, "eval": {"a": [{}], "b": [{}]}}
    first.level = 3  # the saved state is a copy
    restored, new_first, new_second = make()
    restored.load_state_dict(state)
    assert (new_first.level, new_second.level) == (2, 5)

    other = Pipeline(train_data=_Curriculum(4), eval_data={"a": _ds(4)}, batch_size=2, shuffle_seed=0)
    with pytest.raises(ValueError, match=r"2 dataset state\(s\) for mode 'train', ds_id '', but this Pipeline has 1"):
        other.load_state_dict(state)
    state["datasets"]["train"] = {"": [{"level": 1}]}
    with pytest.raises(ValueError, match=r"mode 'eval', ds_id 'b', which this Pipeline has no data for"):
        other.load_state_dict(state)
    assert other.data["train"][""].level == 0  # nothing restored from a state that does not fit


def test_the_default_shuffle_follows_enable_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    # FastEstimator's shuffle draws from the generators enable_deterministic seeds; a seeded run must repeat its
    # batch order without also passing shuffle_seed (two seeded runs used to differ by their shuffles).
    from fe_ray.backend import determinism

    monkeypatch.setattr(determinism, "_last_seed", None)
    unseeded = {Pipeline(_ds(8), batch_size=2).shuffle_seed for _ in range(3)}
    assert len(unseeded) == 3  # without a seed: drawn afresh
    monkeypatch.setattr(determinism, "_last_seed", 5)
    first, second = Pipeline(_ds(8), batch_size=2), Pipeline(_ds(8), batch_size=2)
    assert first.shuffle_seed == second.shuffle_seed == 5
    assert _epoch(first) == _epoch(second)
    assert Pipeline(_ds(8), batch_size=2, shuffle_seed=11).shuffle_seed == 11  # an explicit seed still wins


def test_a_none_dataset_in_a_ds_id_dict_is_left_out_as_fastestimator_does() -> None:
    from fe_ray.dataset import NumpyDataset

    data = NumpyDataset({"x": np.arange(4)})
    pipeline = Pipeline(train_data={"a": data, "b": None}, batch_size=2)
    assert pipeline.get_ds_ids(1, "train") == ["a"]
    with pytest.raises(ValueError, match="train_data holds no dataset: every value"):
        Pipeline(train_data={"a": None}, batch_size=2)
