"""Pipeline fed by a torch DataLoader or a tf.data.Dataset (FastEstimator 1.7 style): batches, epochs, refusals,
resuming mid-epoch and the Estimator (in-process and on 2 Ray replicas)."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.dataset import NumpyDataset  # noqa: E402
from fe_ray.op.numpyop.numpyop import LambdaOp  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.pipeline import Pipeline  # noqa: E402
from fe_ray.schedule import EpochScheduler  # noqa: E402
from fe_ray.trace import Trace  # noqa: E402
from tests.estimator_helpers import digits_arrays, model_weights, tf_mlp, torch_mlp  # noqa: E402

torch = pytest.importorskip("torch")
tf = pytest.importorskip("tensorflow")

N = 10
X = np.arange(2 * N, dtype=np.float32).reshape(N, 2)
Y = np.arange(N, dtype=np.int64)


class _Samples(torch.utils.data.Dataset):
    """A map-style torch dataset of dict samples."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values())))

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {key: value[index] for key, value in self.arrays.items()}


def _loader(batch_size: int = 4, shuffle: bool = False, seed: int | None = None,
            arrays: dict[str, np.ndarray] | None = None) -> Any:
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    return torch.utils.data.DataLoader(_Samples(arrays or {"x": X, "y": Y}), batch_size=batch_size, shuffle=shuffle,
                                       generator=generator)


def _tf_data(batch_size: int = 3) -> Any:
    return tf.data.Dataset.from_tensor_slices({"x": X, "y": Y}).batch(batch_size)


def _ys(pipeline: Pipeline, epoch: int = 1, **kwargs: Any) -> list[list[int]]:
    with pipeline("train", epoch, **kwargs) as loader:
        return [batch["y"].tolist() for batch in loader]


def _expected(batch_size: int, order: np.ndarray = Y) -> list[list[int]]:
    return [order[start:start + batch_size].tolist() for start in range(0, N, batch_size)]


# ---------------------------------------------------------------------------------------------- batches
def test_dataloader_batches_become_numpy_dicts() -> None:
    pipeline = Pipeline(train_data=_loader(batch_size=4))
    batches = pipeline.get_results(num_steps=5)  # only 3 batches in the pass
    assert len(batches) == 3
    for batch, start in zip(batches, (0, 4, 8)):
        assert isinstance(batch["x"], np.ndarray) and isinstance(batch["y"], np.ndarray)
        np.testing.assert_array_equal(batch["x"], X[start:start + 4])
        np.testing.assert_array_equal(batch["y"], Y[start:start + 4])
    # shuffle does not apply to a DataLoader: it keeps its own (sequential) order in train mode too
    assert _ys(pipeline) == _expected(4)


def test_dataloader_strings_become_an_array_like_map_style_batches() -> None:
    names = np.array([f"s{i}" for i in range(N)])
    loader = torch.utils.data.DataLoader(_Samples({"name": names, "y": Y}), batch_size=4)
    batch = Pipeline(train_data=loader).get_results()
    assert isinstance(batch["name"], np.ndarray) and batch["name"].tolist() == ["s0", "s1", "s2", "s3"]


def test_tf_data_batches_in_a_dict_and_a_scheduler() -> None:
    pipeline = Pipeline(train_data=EpochScheduler({1: _tf_data(3), 2: None, 3: _loader(5)}),
                        eval_data={"a": _tf_data(4), "b": _loader(2)})
    first = pipeline.get_results(num_steps=2)
    np.testing.assert_array_equal(first[1]["x"], X[3:6])
    assert first[1]["x"].dtype == np.float32
    assert _ys(pipeline, 1) == _expected(3)
    assert pipeline.get_modes(2) == {"eval"}
    assert _ys(pipeline, 3) == _expected(5)
    assert pipeline.get_results("eval", ds_id="a", num_steps=1)["y"].tolist() == [0, 1, 2, 3]
    assert pipeline.get_results("eval", ds_id="b", num_steps=1)["y"].tolist() == [0, 1]


def test_mixed_with_map_style_data_uses_batch_size_for_it_only() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batch_size is needed by the NumpyDataset: no warning
        pipeline = Pipeline(train_data=_loader(4), eval_data=NumpyDataset({"x": X, "y": Y}), batch_size=2)
    assert _ys(pipeline) == _expected(4)
    assert len(pipeline.get_results("eval", num_steps=1)["y"]) == 2


def test_benchmark_of_a_dataloader(capsys: pytest.CaptureFixture[str]) -> None:
    Pipeline(train_data=_loader(1)).benchmark(num_steps=6, log_interval=3)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FastEstimator-Benchmark")]
    assert [line.split("Step: ")[1].split(",")[0] for line in lines] == ["3", "6"]


# ---------------------------------------------------------------------------------------------- epochs
def test_steps_per_epoch_cuts_short_and_each_epoch_is_a_new_pass() -> None:
    pipeline = Pipeline(train_data=_tf_data(3))
    with pipeline("train", 1, steps_per_epoch=2) as loader:
        assert len(loader) == 2
        assert [batch["y"].tolist() for batch in loader] == _expected(3)[:2]
    # more steps than the pass holds: the epoch ends with the pass (FastEstimator does not restart it)
    with pipeline("train", 2, steps_per_epoch=10) as loader:
        assert len(loader) == 4
        assert [batch["y"].tolist() for batch in loader] == _expected(3)
    assert _ys(pipeline, 3) == _expected(3)  # a fresh pass, from the start


def test_endless_tf_data_needs_steps_per_epoch() -> None:
    pipeline = Pipeline(train_data=_tf_data(4).repeat())
    # batches of 4, 4, 2, then the repeat starts over
    assert [batch["y"].tolist() for batch in pipeline.get_results(num_steps=4)][2:] == [[8, 9], [0, 1, 2, 3]]
    assert _ys(pipeline, steps_per_epoch=5)[4] == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="train_steps_per_epoch"):
        pipeline("train", 1)


def test_length_unknown_without_steps() -> None:
    unknown = _tf_data(4).filter(lambda batch: tf.reduce_sum(batch["y"]) >= 0)
    with Pipeline(train_data=unknown)("train", 1) as loader:
        with pytest.raises(TypeError, match="does not know its length"):
            len(loader)
        assert [batch["y"].tolist() for batch in loader] == _expected(4)


# ---------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("kwargs", [{"batch_size": 4}, {"ops": LambdaOp(fn=lambda y: y, inputs="y", outputs="y")},
                                    {"num_process": 2}, {"pad_value": 0}, {"collate_fn": list}, {"drop_last": True}])
def test_batching_options_refused_for_framework_data_only(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=f"Pipeline got \\['{next(iter(kwargs))}'\\].*batch themselves"):
        Pipeline(train_data=_loader(), eval_data=_tf_data(), **kwargs)


def test_ops_selecting_framework_data_warn() -> None:
    op = LambdaOp(fn=lambda y: y, inputs="y", outputs="y")
    with pytest.warns(UserWarning, match=r"\['train'\].*only run on map-style"):
        Pipeline(train_data=_loader(), eval_data=NumpyDataset({"x": X, "y": Y}), batch_size=2, ops=op)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an op limited to eval leaves the DataLoader alone
        Pipeline(train_data=_loader(), eval_data=NumpyDataset({"x": X, "y": Y}), batch_size=2,
                 ops=LambdaOp(fn=lambda y: y, inputs="y", outputs="y", mode="eval"))


def test_non_dict_batches_and_unknown_data_are_type_errors() -> None:
    tuples = tf.data.Dataset.from_tensor_slices((X, Y)).batch(2)
    with pytest.raises(TypeError, match="must yield dict batches"), Pipeline(train_data=tuples)("train") as loader:
        next(iter(loader))
    with pytest.raises(TypeError, match="DataLoader or tf.data.Dataset"):
        Pipeline(train_data=iter([{"x": X}]))


def test_get_results_shows_non_dict_batches_as_numpy() -> None:
    # FastEstimator's tutorial 4 inspects a plain tf.data.Dataset / TensorDataset DataLoader with get_results.
    plain = Pipeline(tf.data.Dataset.from_tensor_slices(X).batch(4)).get_results(num_steps=2)
    assert isinstance(plain, list) and len(plain) == 2
    np.testing.assert_array_equal(plain[1], X[4:8])
    tensors = torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(Y))
    first = Pipeline(torch.utils.data.DataLoader(tensors, batch_size=4)).get_results()
    assert isinstance(first, list) and isinstance(first[0], np.ndarray)
    np.testing.assert_array_equal(first[1], Y[:4])


# ---------------------------------------------------------------------------------------------- resuming
def _row(batch: dict[str, Any]) -> list[int]:
    return batch["y"].tolist()


def _interrupted(make: Any, epochs: int, stop_epoch: int, taken: int) -> tuple[list[list[int]], dict[str, Any]]:
    """Batches of ``make()`` up to ``taken`` into ``stop_epoch``, then of a fresh ``make()`` restored from there."""
    first = make()
    seen = [row for epoch in range(1, stop_epoch) for row in _ys(first, epoch)]
    with first("train", stop_epoch) as loader:
        iterator = iter(loader)
        seen += [_row(next(iterator)) for _ in range(taken)]
        state = first.state_dict()
    restored = make()
    restored.load_state_dict(state)
    return seen + [row for epoch in range(stop_epoch, epochs + 1) for row in _ys(restored, epoch)], state


@pytest.mark.parametrize("make, shuffled", [
    (lambda: Pipeline(train_data=_loader(3, shuffle=True, seed=7)), True),
    (lambda: Pipeline(train_data=_tf_data(3).map(lambda b: {**b, "y": b["y"] * 2})), False)],
    ids=["seeded_dataloader", "deterministic_tf_data"])
def test_resume_mid_epoch_is_exact_for_repeatable_sources(make: Any, shuffled: bool) -> None:
    whole = make()
    uninterrupted = [row for epoch in range(1, 4) for row in _ys(whole, epoch)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact resume does not warn
        resumed, state = _interrupted(make, epochs=3, stop_epoch=2, taken=2)
    position = state["positions"]["train"][""]
    assert (position["epoch"], position["batches"], position["exact"]) == (2, 2, True)
    assert resumed == uninterrupted
    # Shuffled epochs differ from one another: restoring the generators' states is what made the runs equal.
    assert (uninterrupted[:4] != uninterrupted[4:8]) == shuffled


def test_resume_of_an_unseeded_shuffle_warns_and_skips() -> None:
    def make() -> Pipeline:
        return Pipeline(train_data=_loader(3, shuffle=True))  # shuffled from torch's global RNG

    first = make()
    with first("train", 1) as loader:
        iterator = iter(loader)
        handed_out = [_row(next(iterator)) for _ in range(3)]
        state = first.state_dict()
    assert state["positions"]["train"][""]["exact"] is False
    restored = make()
    with pytest.warns(UserWarning, match="cannot resume.*mode 'train' exactly.*skipping the 3 batch"):
        restored.load_state_dict(state)
    rest = _ys(restored, 1)
    assert len(handed_out) == 3 and len(rest) == 1 and len(rest[0]) == 1  # the last, partial batch of 4 only
    assert "train" not in restored.state_dict()["positions"]  # the epoch is over


def test_tf_data_determinism_inspection() -> None:
    from fe_ray.pipeline.framework_data import exact_resume

    assert exact_resume(_tf_data())
    assert exact_resume(_tf_data().map(lambda b: {**b, "x": b["x"] + 1.0}))
    assert not exact_resume(_tf_data().shuffle(4, seed=1))
    assert not exact_resume(_tf_data().map(lambda b: {**b, "x": b["x"] + tf.random.uniform([])}))
    py = tf.data.Dataset.from_generator(lambda: iter([{"y": Y}]), output_signature={"y": tf.TensorSpec([N], tf.int64)})
    assert not exact_resume(py)
    assert exact_resume(_tf_data().map(lambda b: {**b, "x": b["x"] + tf.random.stateless_uniform([], seed=(1, 2))}))
    assert not exact_resume(_tf_data().map(lambda b: b, num_parallel_calls=2, deterministic=False))
    assert not exact_resume(tf.data.Dataset.sample_from_datasets([_tf_data(), _tf_data()]))
    assert not exact_resume(_tf_data().interleave(lambda b: tf.data.Dataset.from_tensors(b).shuffle(2)))  # nested
    assert exact_resume(_loader()) and exact_resume(_loader(shuffle=True, seed=0))
    assert not exact_resume(_loader(shuffle=True))


# ---------------------------------------------------------------------------------------------- Estimator
class _Recorder(Trace):
    """Records the labels of every training batch the network gets."""

    def __init__(self) -> None:
        super().__init__(inputs="y", mode="train")
        self.seen: list[list[int]] = []

    def on_batch_begin(self, data: Any) -> None:
        self.seen.append(np.asarray(data["y"]).tolist())


def _fit(framework: str, data: Any, eval_data: Any, steps: int | None = None, **network_kwargs: Any) -> Any:
    model = torch_mlp(seed=0) if framework == "torch" else tf_mlp(seed=0)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")], **network_kwargs)
    recorder = _Recorder()
    estimator = fe.Estimator(Pipeline(train_data=data, eval_data=eval_data), network, epochs=2, log_steps=None,
                             train_steps_per_epoch=steps, traces=[recorder])
    try:
        before = model_weights(model)
        history = estimator.fit().history
    finally:
        if network_kwargs:
            network.shutdown()
    return recorder.seen, before, model_weights(model), history


def test_estimator_fits_a_torch_model_from_a_dataloader() -> None:
    train, evaluation = digits_arrays("torch", n_train=48, n_eval=16)
    seen, before, after, history = _fit("torch", _loader(16, arrays=train), _loader(8, arrays=evaluation))
    assert seen == [train["y"][start:start + 16].tolist() for start in (0, 16, 32)] * 2
    assert any(not np.allclose(a, b) for a, b in zip(before, after))
    assert len(history["eval"]["ce"]) == 2


def test_estimator_fits_a_tf_model_from_endless_tf_data() -> None:
    train, evaluation = digits_arrays("tf", n_train=48, n_eval=16)
    data = tf.data.Dataset.from_tensor_slices(train).batch(12).repeat()
    evaluation_data = tf.data.Dataset.from_tensor_slices(evaluation).batch(8)
    seen, before, after, history = _fit("tf", data, evaluation_data, steps=3)
    labels = train["y"].tolist()
    # the endless dataset restarts each epoch: both epochs see its first 3 batches
    assert seen == [labels[0:12], labels[12:24], labels[24:36]] * 2
    assert any(not np.allclose(a, b) for a, b in zip(before, after))
    assert len(history["eval"]["ce"]) == 2


@pytest.mark.timeout(300)
def test_dataloader_feeds_two_ray_replicas_like_in_process(ray_session: None) -> None:
    train, evaluation = digits_arrays("torch", n_train=32, n_eval=16)
    expected = _fit("torch", _loader(16, arrays=train), _loader(8, arrays=evaluation))
    got = _fit("torch", _loader(16, arrays=train), _loader(8, arrays=evaluation), num_replicas=2)
    assert got[0] == expected[0]  # the driver read the same batches
    for mine, theirs in zip(got[2], expected[2]):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


class _Interrupted(RuntimeError):
    pass


class _Interrupt(Trace):
    """Raises before training step ``step`` (None: never), as a crash would."""

    def __init__(self, step: int | None) -> None:
        super().__init__(mode="train")
        self.step = step

    def on_batch_begin(self, data: Any) -> None:
        if self.system.global_step == self.step:
            raise _Interrupted(f"before step {self.step}")


def _resumable_fit(directory: str, interrupt: int | None = None) -> tuple[list[list[int]], list[np.ndarray]]:
    from fe_ray.trace import RestoreWizard

    train, _ = digits_arrays("torch", n_train=40, n_eval=8)
    model = torch_mlp(seed=0)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")])
    recorder = _Recorder()
    pipeline = Pipeline(train_data=_loader(8, shuffle=True, seed=3, arrays=train))  # 5 steps per epoch
    traces = [recorder, _Interrupt(interrupt), RestoreWizard(directory, steps=3)]
    fe.Estimator(pipeline, network, epochs=3, traces=traces, log_steps=None).fit()
    return recorder.seen, model_weights(model)


@pytest.mark.parametrize("interrupt", [10, 11], ids=["mid_epoch", "epoch_end"])
def test_estimator_resumes_a_seeded_dataloader_exactly(tmp_path: Any, interrupt: int) -> None:
    reference, reference_weights = _resumable_fit(str(tmp_path / "reference"))
    # Checkpoints follow steps 3, 5 (epoch end), 6, 9 and 10 (epoch end); 5 steps per epoch. Interrupted before step
    # 10, the run resumes after step 9, 4 batches into epoch 2; before step 11, after epoch 2.
    with pytest.raises(_Interrupted):
        _resumable_fit(str(tmp_path / "run"), interrupt=interrupt)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a seeded DataLoader resumes exactly: no warning
        resumed, weights = _resumable_fit(str(tmp_path / "run"))
    assert resumed == reference[interrupt - 1:]
    assert reference[:5] != reference[5:10]  # the epochs are shuffled differently
    for mine, theirs in zip(weights, reference_weights):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)
