"""TensorBoard trace: tiny in-process fits with torch and TF models, their event files read back with TensorFlow and
compared with the Estimator's history, the models' weights and the dataset's images."""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.trace import RestoreWizard  # noqa: E402
from fe_ray.trace.io import TensorBoard  # noqa: E402
from fe_ray.trace.io.tensorboard import Freq, parse_freq, scalar_value  # noqa: E402
from fe_ray.trace.io.tensorboard_writer import histogram_buckets, to_image_batch, weight_to_image  # noqa: E402
from tests.estimator_helpers import (  # noqa: E402
    AtTrainStep,
    ToyPipeline,
    classifier_network,
    digits_arrays,
    tf_mlp,
    torch_mlp,
)

FRAMEWORKS = ("torch", "tf")


def _fit(framework: str, log_dir: str, epochs: int = 2, log_steps: int | None = 2, test: bool = False,
         extra_traces: tuple[Any, ...] = (), **tb_kwargs: Any) -> tuple[Any, Any, Any]:
    """A 4-steps-per-epoch fit (32 train / 16 eval digits, batch 8) with a TensorBoard trace."""
    train, evaluation = digits_arrays(framework, n_train=32, n_eval=16)
    model = torch_mlp() if framework == "torch" else tf_mlp()
    pipeline = ToyPipeline(train, evaluation, batch_size=8, test=evaluation if test else None)
    traces = [TensorBoard(log_dir=log_dir, **tb_kwargs), *extra_traces]
    estimator = fe.Estimator(pipeline, classifier_network(model), epochs=epochs, traces=traces, log_steps=log_steps)
    estimator.fit()
    return estimator, model, train


def _events(folder: str) -> list[tuple[int, str, str, Any]]:
    """(step, tag, plugin, value) of every summary in ``folder``'s event files, in file order; a graph event is
    (step, "<graph>", "", graph bytes)."""
    import tensorflow as tf

    found = []
    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            if event.graph_def:
                found.append((event.step, "<graph>", "", event.graph_def))
            for value in event.summary.value:
                found.append((event.step, value.tag, value.metadata.plugin_data.plugin_name,
                              tf.make_ndarray(value.tensor)))
    return found


def _run_folder(log_dir: str) -> str:
    runs = os.listdir(log_dir)
    assert len(runs) == 1, runs
    return os.path.join(log_dir, runs[0])


def _scalars(events: list[tuple[int, str, str, Any]], tag: str) -> dict[int, float]:
    return {step: float(value) for step, name, plugin, value in events if name == tag and plugin == "scalars"}


def _as_float32(values: dict[int, Any]) -> dict[int, float]:
    return {step: float(np.float32(value)) for step, value in values.items()}


# ------------------------------------------------------------------------------------------------- whole fits
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_scalars_and_graph(framework: str, tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    log_dir = str(tmp_path / "logs")
    estimator, _, _ = _fit(framework, log_dir, test=True, update_freq=2)
    estimator.test()
    history = estimator.system.summary.history
    run = _run_folder(log_dir)
    assert os.path.basename(run) == estimator.system.experiment_time
    assert sorted(os.listdir(run)) == ["eval", "test", "train"]  # test() writes into fit()'s folder
    train = _events(os.path.join(run, "train"))
    # Every 2nd step the batch's loss (also between the Logger's steps: history has step 1 as well).
    assert _scalars(train, "ce") == {step: value for step, value in _as_float32(history["train"]["ce"]).items()
                                     if step % 2 == 0}
    assert _scalars(train, "epoch_time(sec)") == _as_float32(history["train"]["epoch_time(sec)"])
    assert sorted(_scalars(train, "epoch_time(sec)")) == [4, 8]
    for mode in ("eval", "test"):
        written = _scalars(_events(os.path.join(run, mode)), "ce")
        assert written == _as_float32(history[mode]["ce"]) and written, mode
    graphs = [(step, tag, value) for step, tag, plugin, value in train if plugin == "graph_keras_model"]
    op_graphs = [value for _, tag, _, value in train if tag == "<graph>"]
    if framework == "tf":
        assert [(step, tag) for step, tag, _ in graphs] == [(1, "mlp")]
        assert json.loads(graphs[0][2].item())["class_name"] == "Sequential"
        assert len(op_graphs) == 1 and len(op_graphs[0]) > 0
    else:
        assert graphs == [] and op_graphs == []
        assert "no graph written for ['mlp']" in capsys.readouterr().out


def test_epoch_update_freq_writes_only_every_nth_epoch(tmp_path: Any) -> None:
    log_dir = str(tmp_path / "logs")
    estimator, _, _ = _fit("torch", log_dir, epochs=2, update_freq="2e", write_graph=False)
    history = estimator.system.summary.history
    run = _run_folder(log_dir)
    train = _events(os.path.join(run, "train"))
    assert {step for step, *_ in train} == {8}  # nothing per step, nothing after epoch 1
    assert _scalars(train, "epoch_time(sec)") == {8: float(np.float32(history["train"]["epoch_time(sec)"][8]))}
    assert _scalars(_events(os.path.join(run, "eval")), "ce") == {8: float(np.float32(history["eval"]["ce"][8]))}


def _expected_weights(framework: str, model: Any) -> dict[str, np.ndarray]:
    if framework == "torch":
        return {f"mlp_{name.replace('.', '/')}": param.detach().numpy() for name, param in model.named_parameters()}
    return {f"mlp_{layer.name}/{weight.name}": weight.numpy() for layer in model.layers for weight in layer.weights}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_weight_histograms_and_paintings(framework: str, tmp_path: Any) -> None:
    log_dir = str(tmp_path / "logs")
    _, model, _ = _fit(framework, log_dir, epochs=2, log_steps=None, update_freq=None, write_graph=False,
                       weight_histogram_freq="2e", paint_weights=True)
    events = _events(os.path.join(_run_folder(log_dir), "train"))
    expected = _expected_weights(framework, model)  # the final weights: the histograms are of the last epoch
    histograms = {tag: (step, value) for step, tag, plugin, value in events if plugin == "histograms"}
    assert sorted(histograms) == sorted(expected)
    for tag, weights in expected.items():
        step, buckets = histograms[tag]
        assert step == 8 and buckets.shape == (30, 3)
        assert buckets[:, 2].sum() == weights.size
        assert buckets[0, 0] == pytest.approx(weights.min()) and buckets[-1, 1] == pytest.approx(weights.max())
        np.testing.assert_allclose(buckets[:, 2], np.histogram(weights.astype(np.float64), bins=30)[0])
    paintings = {tag: value for _, tag, plugin, value in events if plugin == "images"}
    assert sorted(paintings) == sorted(f"{tag}/image" for tag in expected)
    for tag, weights in expected.items():
        # [width, height, png]: a dense kernel is one image of its own shape, a bias one column
        rows, cols = (weights.shape if weights.ndim == 2 else (weights.shape[0], 1))
        assert paintings[f"{tag}/image"][:2].tolist() == [str(cols).encode(), str(rows).encode()]
        assert len(paintings[f"{tag}/image"]) == 3


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_images_are_the_batch(framework: str, tmp_path: Any) -> None:
    import tensorflow as tf

    log_dir = str(tmp_path / "logs")
    _, _, train = _fit(framework, log_dir, epochs=1, log_steps=None, update_freq=4, write_graph=False,
                       write_images="x")
    events = _events(os.path.join(_run_folder(log_dir), "train"))
    images = [(step, value) for step, tag, plugin, value in events if tag == "x" and plugin == "images"]
    assert [step for step, _ in images] == [4]
    value = images[0][1]
    assert value[:2].tolist() == [b"8", b"8"] and len(value) == 2 + 8  # width, height, then the 8 of the batch
    dataset = {np.round(np.asarray(x).reshape(8, 8) * 255).astype(np.uint8).tobytes() for x in train["x"]}
    for png in value[2:]:
        pixels = tf.io.decode_png(png).numpy()
        assert pixels.shape == (8, 8, 1)
        assert pixels.reshape(8, 8).tobytes() in dataset


class Interrupted(RuntimeError):
    pass


class Interrupt(AtTrainStep):
    def act(self, data: Any) -> None:
        raise Interrupted(f"before step {self.step}")


def test_resumed_run_appends_to_the_interrupted_runs_folder(tmp_path: Any) -> None:
    log_dir, checkpoints = str(tmp_path / "logs"), str(tmp_path / "ckpt")
    fe.enable_deterministic(3)
    with pytest.raises(Interrupted):  # before step 8, after the checkpoint of step 6
        _fit("torch", log_dir, log_steps=None, update_freq=1, write_graph=False,
             extra_traces=(Interrupt(8), RestoreWizard(checkpoints, steps=3)))
    first = _run_folder(log_dir)
    assert _scalars(_events(os.path.join(first, "train")), "ce").keys() == set(range(1, 8))
    time.sleep(1.1)  # a new run would get a new experiment time (seconds)
    estimator, _, _ = _fit("torch", log_dir, log_steps=None, update_freq=1, write_graph=False,
                           extra_traces=(Interrupt(None), RestoreWizard(checkpoints, steps=3)))
    assert _run_folder(log_dir) == first
    assert len(glob.glob(os.path.join(first, "train", "events.out.tfevents.*"))) == 2
    steps = [step for step, tag, *_ in _events(os.path.join(first, "train")) if tag == "ce"]
    assert steps == [1, 2, 3, 4, 5, 6, 7, 7, 8]  # step 7 again: it came after the checkpoint
    assert estimator.system.global_step == 8


# ------------------------------------------------------------------------------------------------------ helpers
def test_parse_freq() -> None:
    assert parse_freq(None) == Freq(False, 0)
    assert parse_freq(100) == Freq(True, 100)
    assert parse_freq("step") == parse_freq("s") == Freq(True, 1)
    assert parse_freq("epoch") == parse_freq("e") == Freq(False, 1)
    assert parse_freq("15s") == Freq(True, 15) and parse_freq("3e") == Freq(False, 3)
    for bad in (0, -2, "0e", "5x", "batch", "e5"):
        with pytest.raises(ValueError, match="TensorBoard update_freq"):
            parse_freq(bad)
    for bad in (2.5, True, [1]):
        with pytest.raises(TypeError, match="TensorBoard update_freq"):
            parse_freq(bad)  # type: ignore[arg-type]
    assert parse_freq(4).at_step(8) and not parse_freq(4).at_step(6) and not parse_freq(4).at_epoch(4)
    assert parse_freq("2e").at_epoch(4) and not parse_freq("2e").at_epoch(3) and not parse_freq(None).at_step(5)


def test_scalar_value() -> None:
    import torch

    assert scalar_value(3) == 3.0 and scalar_value(True) == 1.0 and scalar_value(np.float32(0.5)) == 0.5
    assert scalar_value(np.array([[2.0]])) == 2.0 and scalar_value(torch.tensor(1.5)) == 1.5
    for not_scalar in (None, "3.5", b"1", np.zeros(3), torch.zeros(2, 2), np.array("a"), {"a": 1}):
        assert scalar_value(not_scalar) is None


def test_histogram_buckets() -> None:
    values = np.array([0.0, 1.0, 1.0, 3.0, np.nan, np.inf])
    buckets = histogram_buckets(values, bucket_count=3)
    np.testing.assert_allclose(buckets, [[0, 1, 1], [1, 2, 2], [2, 3, 1]])
    np.testing.assert_allclose(histogram_buckets(np.full(4, 2.0), bucket_count=1), [[1.5, 2.5, 4]])
    assert histogram_buckets(np.array([np.nan])).shape == (0, 3)


def test_to_image_batch_layouts_and_values() -> None:
    rng = np.random.default_rng(0)
    nhwc = rng.integers(0, 256, size=(2, 5, 6, 3)).astype(np.uint8)
    nchw = np.transpose(nhwc, (0, 3, 1, 2))
    np.testing.assert_array_equal(to_image_batch(nhwc, channels_first=False), nhwc)
    np.testing.assert_array_equal(to_image_batch(nchw, channels_first=True), nhwc)
    np.testing.assert_array_equal(to_image_batch(nchw, channels_first=False), nhwc)  # only NCHW fits: taken
    np.testing.assert_array_equal(to_image_batch(nhwc, channels_first=True), nhwc)  # only NHWC fits: taken
    np.testing.assert_array_equal(to_image_batch(nhwc[0], channels_first=False), nhwc[:1])  # one HWC image
    np.testing.assert_array_equal(to_image_batch(nchw[0], channels_first=True), nhwc[:1])  # one CHW image
    np.testing.assert_array_equal(to_image_batch(nhwc[0, :, :, 0], channels_first=True), nhwc[:1, :, :, :1])
    floats = np.array([[0.0, 0.5, 1.0, 2.0, -1.0, np.nan]])
    assert to_image_batch(floats, channels_first=False).reshape(-1).tolist() == [0, 128, 255, 255, 0, 0]
    assert to_image_batch(np.array([[True, False]]), False).reshape(-1).tolist() == [255, 0]
    assert to_image_batch(np.array([[300, -5, 7]], dtype=np.int16), False).reshape(-1).tolist() == [255, 0, 7]
    with pytest.raises(ValueError, match="'img' of shape \\(4, 28, 28\\)"):
        to_image_batch(np.zeros((4, 28, 28)), channels_first=False, key="img")  # a grey batch without channel axis
    with pytest.raises(ValueError, match="dimensions"):
        to_image_batch(np.zeros((1, 2, 3, 4, 1)), channels_first=False)
    with pytest.raises(TypeError, match="not numbers"):
        to_image_batch(np.array([["a"]]), channels_first=False)


def test_weight_to_image() -> None:
    rng = np.random.default_rng(1)
    tf_kernel = rng.normal(size=(3, 3, 2, 4))  # [H, W, in, out]
    torch_kernel = np.transpose(tf_kernel, (3, 2, 0, 1))  # [out, in, H, W]
    image = weight_to_image(tf_kernel, channels_last=True)
    assert image.shape == (4, 3, 3, 1)
    np.testing.assert_array_equal(image, weight_to_image(torch_kernel, channels_last=False))
    summed = np.abs(torch_kernel).sum(axis=1)[1]  # output channel 1, summed over the input channels
    want = np.round((summed - summed.min()) / (summed.max() - summed.min()) * 255)
    np.testing.assert_array_equal(image[1, :, :, 0], want)
    assert weight_to_image(np.arange(5.0), channels_last=False).shape == (1, 5, 1, 1)
    assert weight_to_image(np.ones((4, 6)), channels_last=False).reshape(-1).tolist() == [0] * 24  # flat: black
    assert weight_to_image(np.ones((2, 2, 2, 2, 2)), channels_last=True) is None


def test_argument_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("write_embeddings", "embedding_labels", "embedding_images"):
        with pytest.raises(ValueError, match=f"{name} \\(embeddings\\) are not supported"):
            TensorBoard(**{name: "x"})
    with pytest.raises(ValueError, match="weight_histogram_freq"):
        TensorBoard(weight_histogram_freq="3x")
    assert TensorBoard(paint_weights=True).histogram_freq == Freq(False, 1)  # painting implies histograms
    assert TensorBoard(write_images=["a", "b"]).inputs == ["*", "a", "b"]
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if TensorFlow were not installed
    with pytest.raises(ImportError, match="pip install tensorflow-cpu"):
        TensorBoard()
