"""fe.trace.xai (Saliency, GradCAM, EigenCAM, LabelTracker, InstanceTracker): each inside an in-process fe.Estimator
fit of a tiny torch CNN on synthetic 8x8 images, their displays' panels and pixels against hand-computed values and
SaliencyNet, the trackers' histories against the epoch's recorded per-sample losses, checkpoint round trips, and
argument checks."""

from __future__ import annotations

import os
import statistics
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

pytest.importorskip("matplotlib")
torch = pytest.importorskip("torch")

import fe_ray as fe  # noqa: E402
from fe_ray.dataset import NumpyDataset  # noqa: E402
from fe_ray.op.tensorop.gather import Gather  # noqa: E402
from fe_ray.op.tensorop.gradient import GradientOp  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.summary.summary import ValWithError  # noqa: E402
from fe_ray.trace import Data, Trace  # noqa: E402
from fe_ray.trace.io import ImageSaver  # noqa: E402
from fe_ray.trace.xai import EigenCAM, GradCAM, InstanceTracker, LabelTracker, Saliency  # noqa: E402
from fe_ray.trace.xai._common import colour  # noqa: E402
from fe_ray.trace.xai.eigen_cam import principal_maps  # noqa: E402
from fe_ray.trace.xai.grad_cam import gradcam_maps  # noqa: E402
from fe_ray.util.img_data import GridDisplay  # noqa: E402
from fe_ray.xai import SaliencyNet  # noqa: E402

N_CLASSES, CHANNELS = 3, 4


class TinyCNN(torch.nn.Module):
    """conv (1 -> 4 channels, 8x8 kept) -> ReLU -> flatten -> linear -> softmax (or the logits)."""

    def __init__(self, softmax: bool = True) -> None:
        super().__init__()
        self.softmax = softmax
        self.conv = torch.nn.Conv2d(1, CHANNELS, 3, padding=1)
        self.relu = torch.nn.ReLU()
        self.fc = torch.nn.Linear(CHANNELS * 64, N_CLASSES)

    def forward(self, x: Any) -> Any:
        logits = self.fc(torch.flatten(self.relu(self.conv(x)), 1))
        return torch.softmax(logits, dim=-1) if self.softmax else logits


def _model(seed: int = 0, softmax: bool = True) -> Any:
    torch.manual_seed(seed)
    return fe.build(lambda: TinyCNN(softmax), optimizer_fn=lambda p: torch.optim.SGD(p, lr=0.1), model_name="cnn")


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.random((24, 1, 8, 8), dtype=np.float32), "y": rng.integers(0, N_CLASSES, 24),
            "idx": np.arange(24)}


def _network(model: Any) -> Any:
    """Training, per-sample losses, and (outside training) the last conv layer's output and the gradient of each
    sample's true-class score w.r.t. it, as the GradCAM / EigenCAM docstrings wire them."""
    return fe.Network(ops=[
        ModelOp(model=model, inputs="x", outputs=["y_pred", "conv"], intermediate_layers="conv"),
        CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
        CrossEntropy(inputs=("y_pred", "y"), outputs="sample_ce", average_loss=False),
        Gather(inputs="y_pred", indices="y", outputs="y_score", mode="!train"),
        GradientOp(finals="y_score", inputs="conv", outputs="grads", mode="!train"),
        UpdateOp(model=model, loss_name="ce")])


def _estimator(model: Any, traces: list[Any], epochs: int = 2) -> Any:
    data = _arrays()
    pipeline = fe.Pipeline(train_data=NumpyDataset({k: v[:16] for k, v in data.items()}),
                           eval_data=NumpyDataset({k: v[16:] for k, v in data.items()}), batch_size=4)
    return fe.Estimator(pipeline, _network(model), epochs=epochs, traces=traces, log_steps=None)


class Probe(Trace):
    """Keeps what ``key`` holds at each epoch end (and at the end) and, per eval epoch, the batches' labels,
    indices and per-sample losses."""

    def __init__(self, key: str | None = None) -> None:
        super().__init__(inputs=[k for k in (key, "y", "idx", "sample_ce") if k], mode="eval")
        self.key = key
        self.values: list[Any] = []
        self.epochs: list[list[tuple[np.ndarray, ...]]] = []

    def on_epoch_begin(self, data: Data) -> None:
        self.epochs.append([])

    def on_batch_end(self, data: Data) -> None:
        self.epochs[-1].append(tuple(np.asarray(fe.backend.to_number(data[k])) for k in ("y", "idx", "sample_ce")))

    def on_epoch_end(self, data: Data) -> None:
        if self.key:
            self.values.append(data.get(self.key))

    def on_end(self, data: Data) -> None:
        if self.key:
            self.values.append(data.get(self.key))


def _titles(grid: GridDisplay) -> list[str]:
    return [column.title for column in grid.columns]


def _column(grid: GridDisplay, title: str) -> np.ndarray:
    column = next(col for col in grid.columns if col.title == title)
    return np.stack([element.image for element in column.batch])


# --------------------------------------------------------------------------------------------------------- GradCAM
def test_gradcam_in_a_fit_writes_a_display_that_image_saver_saves(tmp_path: Any) -> None:
    probe = Probe("gradcam")
    saver = ImageSaver(inputs="gradcam", save_dir=str(tmp_path), dpi=20)
    cam = GradCAM(images="x", grads="grads", n_samples=6, labels="y", preds="y_pred")
    _estimator(_model(), [cam, probe, saver]).fit()
    grids = probe.values[:2]  # eval epochs 1 and 2 (nothing at the end: GradCAM writes at epoch ends)
    assert all(isinstance(grid, GridDisplay) for grid in grids) and probe.values[2] is None
    grid = grids[-1]
    assert _titles(grid) == ["y", "y_pred", "x", "grads"] and grid.batch_size == 6  # 6 samples over 2 batches
    assert len(grid.prepare().axes) == 6 * 4
    assert [str(t) for t in (e.text for e in grid.columns[0].batch)] == [str(v) for v in _arrays()["y"][16:22]]
    overlay = _column(grid, "grads")
    assert overlay.shape == (6, 8, 8, 3) and overlay.min() >= 0 and overlay.max() == pytest.approx(1.0)
    assert sorted(os.listdir(tmp_path)) == ["gradcam_eval_epoch_1.png", "gradcam_eval_epoch_2.png"]
    assert cam.n_found == 0 and cam.collected == {"x": [], "grads": [], "y": [], "y_pred": []}  # reset per epoch


def test_gradcam_heat_map_of_a_known_gradient() -> None:
    """With the classifier's weights set so that the gradient of class k's logit w.r.t. the last conv block's output
    (after its ReLU) is a left-to-right ramp from -1 to 1 (times k + 1) in every channel, the heat map is that ramp
    with negatives cut to 0, divided by its maximum: 0 on the left half, 1 in the last column."""
    model = _model(softmax=False)
    ramp = np.linspace(-1.0, 1.0, 8)[None, :].repeat(8, axis=0)  # (h, w)
    with torch.no_grad():
        weights = np.stack([np.stack([ramp * (k + 1)] * CHANNELS) for k in range(N_CLASSES)])  # (K, C, h, w)
        model.fc.weight.copy_(torch.tensor(weights.reshape(N_CLASSES, -1), dtype=torch.float32))
    network = fe.Network(ops=[
        ModelOp(model=model, inputs="x", outputs=["logits", "conv"], intermediate_layers="relu", mode="eval"),
        Gather(inputs="logits", indices="y", outputs="score", mode="eval"),
        GradientOp(finals="score", inputs="conv", outputs="grads", mode="eval")])
    x = np.random.default_rng(1).random((2, 1, 8, 8), dtype=np.float32)
    batch = network.transform({"x": x, "y": np.array([0, 2])}, mode="eval")
    grads = np.asarray(fe.backend.to_number(batch["grads"]))
    np.testing.assert_allclose(grads, weights[[0, 2]], rtol=1e-6)  # the logit is linear in that output
    expected = np.maximum(ramp, 0) / ramp.max()
    maps = gradcam_maps(np.moveaxis(grads, 1, -1), 8, 8)
    np.testing.assert_allclose(maps, np.stack([expected, expected]), atol=1e-6)
    # Through the trace: image + jet(map), divided by the batch's maximum.
    cam = GradCAM(images="x", grads="grads", n_samples=None, mode="eval")
    cam.system = SimpleNamespace(mode="eval")
    cam.on_batch_end(Data(batch))
    data = Data()
    cam.on_epoch_end(data)
    overlay = _column(data["gradcam"], "grads")
    summed = np.moveaxis(x, 1, -1) + colour(np.stack([expected, expected]))
    np.testing.assert_allclose(overlay, summed / summed.max(), atol=1e-5)
    assert overlay.shape == (2, 8, 8, 3) and 0 <= overlay.min() and overlay.max() == pytest.approx(1.0)
    np.testing.assert_allclose(colour(np.array([0.0, 1.0])), [[0, 0, 0.5], [0.5, 0, 0]], atol=0.01)  # jet


def test_gradcam_resizes_small_maps_and_keeps_flat_ones_at_zero() -> None:
    grads = np.zeros((2, 2, 2, 3))
    grads[0, 1, 1] = 1.0  # bottom right cell of a 2x2 map
    maps = gradcam_maps(grads, 4, 4)
    assert maps.shape == (2, 4, 4) and maps[0, 3, 3] == 1.0 and maps[0, 0, 0] == 0.0
    assert np.all(np.diff(maps[0, 3]) >= 0)  # bilinear: rising towards the hot cell
    assert not maps[1].any()  # no positive gradient: no heat (FastEstimator would divide by 0)


def test_cam_traces_checkpoint_their_samples() -> None:
    rng = np.random.default_rng(2)
    batches = [{"x": torch.tensor(rng.random((2, 1, 8, 8), dtype=np.float32)),
                "grads": torch.tensor(rng.normal(size=(2, 4, 4, 4)).astype(np.float32))} for _ in range(2)]
    first, resumed = (GradCAM(images="x", grads="grads", n_samples=3, mode="eval") for _ in range(2))
    first.system = resumed.system = SimpleNamespace(mode="eval")
    first.on_batch_end(Data(batches[0]))
    resumed.load_state_dict(first.state_dict())
    assert resumed.n_found == 2 and resumed.channel_first == {"x": True, "grads": True}
    outputs = []
    for trace in (first, resumed):
        trace.on_batch_end(Data(batches[1]))
        data = Data()
        trace.on_epoch_end(data)
        outputs.append(_column(data["gradcam"], "grads"))
    assert outputs[0].shape == (3, 8, 8, 3)
    np.testing.assert_array_equal(outputs[0], outputs[1])
    with pytest.raises(ValueError, match="not its inputs"):
        resumed.load_state_dict({"collected": {"other": np.zeros(1)}})


# -------------------------------------------------------------------------------------------------------- EigenCAM
def test_eigencam_in_a_fit_draws_one_column_per_component() -> None:
    probe = Probe("eigencam")
    cam = EigenCAM(images="x", activations="conv", n_components=2, n_samples=4, preds="y_pred",
                   label_mapping={"a": 0, "b": 1, "c": 2})
    _estimator(_model(), [cam, probe], epochs=1).fit()
    grid = probe.values[0]
    assert _titles(grid) == ["y_pred", "x", "Component 0", "Component 1"] and grid.batch_size == 4
    assert len(grid.prepare().axes) == 4 * 4
    assert {element.text for element in grid.columns[0].batch} <= {"a", "b", "c"}
    for title in ("Component 0", "Component 1"):
        panels = _column(grid, title)
        assert panels.shape == (4, 8, 8, 3) and panels.min() >= 0
        np.testing.assert_allclose(panels.reshape(4, -1).max(axis=1), 1.0, rtol=1e-6)  # each divided by its max


def test_principal_maps_of_a_rank_one_activation() -> None:
    """Activations a[h, w] * v[c]: one principal direction (v), whose projection is (a - mean a) * |v| up to the
    sign the decomposition picks; negatives are cut to 0."""
    a = np.arange(12.0).reshape(3, 4)
    v = np.array([1.0, 2.0, 2.0])  # |v| = 3
    maps = principal_maps(a[..., None] * v, n_components=3)
    centred = (a - a.mean()) * 3.0
    assert len(maps) == 3 and maps[0].shape == (3, 4)
    assert any(np.allclose(maps[0], np.maximum(sign * centred, 0)) for sign in (1, -1))
    assert np.allclose(maps[1], 0, atol=1e-9) and np.allclose(maps[2], 0, atol=1e-9)  # no other variance
    assert len(principal_maps(a[..., None] * v, n_components=0.9)) == 1  # one component explains it all
    assert len(principal_maps(a[..., None] * v, n_components=10)) == 3  # at most C directions
    small = principal_maps(np.ones((16, 8, 2)) * np.arange(16.0)[:, None, None], 1, downsize=4)
    assert small[0].shape == (4, 2)  # the longer side shrunk to 4, height and width kept in order


# -------------------------------------------------------------------------------------------------------- Saliency
def test_saliency_masks_equal_saliencynets_on_the_kept_samples() -> None:
    model = _model()
    probe = Probe("saliency")
    saliency = Saliency(model=model, model_inputs="x", model_outputs="y_pred", class_key="y", samples=3,
                        smoothing=0, integrating=0, mode="eval")
    _estimator(model, [saliency, probe]).fit()
    x_eval = _arrays()["x"][16:19]
    np.testing.assert_array_equal(saliency.samples["eval"]["x"], x_eval)  # the first 3 eval samples, kept
    grid = probe.values[1]
    assert _titles(grid) == ["y", "y_pred", "x", "x saliency", "saliency"] and grid.batch_size == 3
    assert len(grid.prepare().axes) == 3 * 5
    expected = SaliencyNet(model=model, model_inputs="x", model_outputs="y_pred").get_masks({"x": torch.tensor(x_eval)})
    masks = np.asarray(fe.backend.to_number(expected["saliency"]))[:, 0]  # (3, 8, 8)
    np.testing.assert_allclose(_column(grid, "saliency"), masks, rtol=1e-5, atol=1e-6)
    preds = np.asarray(fe.backend.to_number(expected["y_pred"]))
    assert [e.text for e in grid.columns[1].batch] == [str(p) for p in preds]
    # The blend: 0.3 (m (x - lo) + lo) + 0.3 x + 0.4 m (hi - lo) + lo, lo / hi over the samples.
    x = np.moveaxis(x_eval, 1, -1).astype(np.float64)
    m = masks[..., None]
    lo, hi = x.min(), x.max()
    blend = 0.3 * (m * (x - lo) + lo) + 0.3 * x + 0.4 * m * (hi - lo) + lo
    np.testing.assert_allclose(_column(grid, "x saliency"), blend[..., 0], rtol=1e-5, atol=1e-6)


def test_saliency_smoothing_integration_columns_given_samples_and_checkpoint() -> None:
    model = _model()
    x = _arrays()["x"][:2]
    saliency = Saliency(model=model, model_inputs="x", model_outputs="y_pred", label_mapping={"a": 0, "b": 1, "c": 2},
                        samples={"x": x}, smoothing=2, integrating=(2, 1))
    saliency.system = SimpleNamespace(mode="eval", sync_models=lambda: None)
    data = Data()
    saliency.on_epoch_end(data)  # given samples: drawn without any batch
    grid = data["saliency"]
    assert _titles(grid) == ["y_pred", "x", "x saliency", "saliency", "Smoothed saliency", "Integrated saliency",
                             "SmInt saliency"]
    assert len(grid.prepare().axes) == 2 * 7 and {e.text for e in grid.columns[0].batch} <= {"a", "b", "c"}
    for title in _titles(grid)[3:]:
        masks = _column(grid, title)
        assert masks.shape == (2, 8, 8) and masks.min() >= 0 and masks.max() <= 1
    # Collected samples survive a checkpoint, also mid-epoch.
    first = Saliency(model=model, model_inputs="x", model_outputs="y_pred", samples=3, smoothing=0, integrating=0)
    first.system = SimpleNamespace(mode="eval", sync_models=lambda: None)
    first.on_batch_end(Data({"x": torch.tensor(x)}))
    resumed = Saliency(model=model, model_inputs="x", model_outputs="y_pred", samples=3, smoothing=0, integrating=0)
    resumed.system = first.system
    resumed.load_state_dict(first.state_dict())
    assert resumed.n_found == {"eval": 2}
    for trace in (first, resumed):
        trace.on_batch_end(Data({"x": torch.tensor(_arrays()["x"][5:7])}))
        trace.on_epoch_end(Data())
    np.testing.assert_array_equal(resumed.samples["eval"]["x"], first.samples["eval"]["x"])
    assert resumed.samples["eval"]["x"].shape == (3, 1, 8, 8)
    again = Saliency(model=model, model_inputs="x", model_outputs="y_pred", samples=3, smoothing=0, integrating=0)
    again.load_state_dict(first.state_dict())
    np.testing.assert_array_equal(again.samples["eval"]["x"], first.samples["eval"]["x"])


# -------------------------------------------------------------------------------------------------------- trackers
def test_label_tracker_records_each_classs_epoch_statistics() -> None:
    probe = Probe()
    tracker = LabelTracker(label="y", metric="sample_ce", label_mapping={"zero": 0, "two": 2},
                           bounds=["std", "range", None])
    estimator = _estimator(_model(), [tracker, probe])
    estimator.fit()
    assert sorted(s.name for s in tracker.label_summaries.values()) == ["two", "zero"]  # class 1 not followed
    steps = sorted(tracker.label_summaries["zero"].history["eval"]["sample_ce"])
    assert steps == [4, 8]  # 16 training samples / batch 4: global steps at the two eval epochs
    for epoch, step in zip(probe.epochs, steps):
        labels = np.concatenate([b[0] for b in epoch])
        losses = np.concatenate([b[2] for b in epoch])
        for name, value in (("zero", 0), ("two", 2)):
            values = losses[labels == value].tolist()
            history = tracker.label_summaries[name].history["eval"]
            mean = statistics.mean(values)
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            assert history["sample_ce"][step] == pytest.approx(mean)
            band = history["sample_ce ($\\mu \\pm \\sigma$)"][step].as_tuple()
            assert band == pytest.approx((mean - std, mean, mean + std))
            spread = history["sample_ce ($min, \\mu, max$)"][step].as_tuple()
            assert spread == pytest.approx((min(values), mean, max(values)))
            assert isinstance(history["sample_ce ($min, \\mu, max$)"][step], ValWithError)
    graphs = estimator.system.custom_graphs["sample_ce_by_y"]
    assert [g.name for g in graphs] == [s.name for s in tracker.label_summaries.values()]
    resumed = LabelTracker(label="y", metric="sample_ce")
    resumed.load_state_dict(tracker.state_dict())
    assert {k: v.state_dict() for k, v in resumed.label_summaries.items()} == {
        k: v.state_dict() for k, v in tracker.label_summaries.items()}


def test_label_tracker_resumes_mid_epoch() -> None:
    system = SimpleNamespace(mode="eval", global_step=7)
    first, resumed = LabelTracker(label="y", metric="m"), LabelTracker(label="y", metric="m")
    first.system = resumed.system = system
    first.on_batch_end(Data({"y": torch.tensor([0, 1]), "m": torch.tensor([1.0, 2.0])}))
    resumed.load_state_dict(first.state_dict())
    for trace in (first, resumed):
        trace.on_batch_end(Data({"y": np.array([[0], [0]]), "m": np.array([3.0, 5.0])}))
        trace.on_epoch_end(Data())
    key = "m ($\\mu \\pm \\sigma$)"
    band = resumed.label_summaries[0].history["eval"][key][7].as_tuple()
    assert band == pytest.approx((1.0, 3.0, 5.0))  # mean 3, std 2
    assert resumed.label_summaries[1].history["eval"][key][7].as_tuple() == (2.0, 2.0, 2.0)  # one sample: std 0
    assert {step: value.as_tuple() for step, value in first.label_summaries[0].history["eval"][key].items()} == \
        {step: value.as_tuple() for step, value in resumed.label_summaries[0].history["eval"][key].items()}
    with pytest.raises(ValueError, match="one value per sample under 'm'"):
        first.on_batch_end(Data({"y": np.array([0, 1]), "m": np.float32(0.5)}))


def test_instance_tracker_keeps_the_extremes_and_listed_samples() -> None:
    probe = Probe("sample_ce_by_idx")
    tracker = InstanceTracker(index="idx", metric="sample_ce", n_max_to_keep=2, n_min_to_keep=1, list_to_keep=[20])
    estimator = _estimator(_model(), [tracker, probe])
    estimator.fit()
    per_epoch = [dict(zip(np.concatenate([b[1] for b in e]).tolist(), np.concatenate([b[2] for b in e]).tolist()))
                 for e in probe.epochs]
    final = sorted(per_epoch[-1], key=per_epoch[-1].get)
    chosen = {final[0], final[-1], final[-2], 20}
    summaries = probe.values[-1]  # written at the end
    assert {s.name for s in summaries} == chosen
    for summary in summaries:
        assert summary.history["eval"]["sample_ce"] == pytest.approx(
            {4: per_epoch[0][summary.name], 8: per_epoch[1][summary.name]})
    assert estimator.system.custom_graphs["sample_ce_by_idx"] == summaries
    resumed = InstanceTracker(index="idx", metric="sample_ce", n_max_to_keep=2, n_min_to_keep=1, list_to_keep=[20])
    resumed.load_state_dict(tracker.state_dict())
    assert resumed.index_history == tracker.index_history and len(resumed.index_history["eval"]) == 8


def test_instance_tracker_only_listed_and_epoch_frequency() -> None:
    tracker = InstanceTracker(index="i", metric="m", n_max_to_keep=0, n_min_to_keep=0, list_to_keep=[1],
                              epoch_frequency=2)
    graphs: dict[str, Any] = {}
    tracker.system = SimpleNamespace(mode="eval", global_step=3, epoch_idx=1,
                                     add_graph=lambda name, graph: graphs.update({name: graph}))
    for epoch, step in ((1, 3), (2, 6), (3, 9), (4, 12)):
        tracker.system.epoch_idx, tracker.system.global_step = epoch, step
        tracker.on_batch_end(Data({"i": np.array([0, 1]), "m": np.array([epoch, 10.0 * epoch])}))
        if epoch == 3:  # a mid-epoch checkpoint
            restored = InstanceTracker(index="i", metric="m", n_max_to_keep=0, n_min_to_keep=0, list_to_keep=[1],
                                       epoch_frequency=2)
            restored.load_state_dict(tracker.state_dict())
            restored.system = tracker.system
            tracker = restored
        tracker.on_epoch_end(Data())
    assert tracker.index_history == {"eval": {1: [(6, 20.0), (12, 40.0)]}}  # even epochs, listed index only
    data = Data()
    tracker.on_end(data)
    (summary,) = data["m_by_i"]
    assert summary.name == 1 and summary.history["eval"]["m"] == {6: 20.0, 12: 40.0} and graphs["m_by_i"] == [summary]
    # Asking for more extremes than there are samples reports them all; 0 highest and 1 lowest: the lowest only.
    for n_max, n_min, names in ((5, 0, {0, 1, 2}), (0, 1, {2}), (1, 0, {1})):
        ranked = InstanceTracker(index="i", metric="m", n_max_to_keep=n_max, n_min_to_keep=n_min)
        ranked.system = SimpleNamespace(mode="eval", global_step=1, epoch_idx=1, add_graph=lambda name, graph: None)
        ranked.on_batch_end(Data({"i": np.array([0, 1, 2]), "m": np.array([0.5, 0.9, 0.1])}))
        ranked.on_epoch_end(Data())
        data = Data()
        ranked.on_end(data)
        assert {s.name for s in data["m_by_i"]} == names


# ---------------------------------------------------------------------------------------------------- arguments
def test_bad_arguments_raise_value_error() -> None:
    model = _model()
    cases = [
        (lambda: GradCAM(images="x", grads="g", n_samples=0), "GradCAM n_samples must be an int >= 1"),
        (lambda: GradCAM(images="x", grads=None), "GradCAM grads must be a key"),
        (lambda: GradCAM(images="x", grads="g", labels=3), "GradCAM labels must be a key"),
        (lambda: GradCAM(images="x", grads="g", label_mapping=["a"]), "label_mapping must be a dict"),
        (lambda: GradCAM(images="x", grads="g", n_components=0), "n_components must be an int >= 1"),
        (lambda: EigenCAM(images="x", activations="a", n_components=1.5), r"fraction of the variance in \(0, 1\]"),
        (lambda: EigenCAM(images="x", activations="a", n_components=True), "n_components must be an int"),
        (lambda: EigenCAM(images="x", activations="a", downsize=0), "downsize must be an int >= 1"),
        (lambda: Saliency(model, "x", "y_pred", samples=0), "samples .* must be an int >= 1"),
        (lambda: Saliency(model, "x", "y_pred", samples={"other": 1}), r"lack \['x'\]"),
        (lambda: Saliency(model, "x", "y_pred", smoothing=-1), "smoothing must be an int >= 0"),
        (lambda: Saliency(model, "x", "y_pred", integrating=(1, 2, 3)), "integrating must be an int >= 0 or a tuple"),
        (lambda: Saliency(model, "x", "y_pred", class_key=""), "class_key must be a key"),
        (lambda: LabelTracker("y", "m", bounds="var"), r"bounds must be None, 'std', 'range'.*\['var'\]"),
        (lambda: LabelTracker("y", "m", label_mapping={"a": [0]}), "must be hashable"),
        (lambda: InstanceTracker("i", "m", n_max_to_keep=-1), "n_max_to_keep must be an int >= 0"),
        (lambda: InstanceTracker("i", "m", n_min_to_keep=1.5), "n_min_to_keep must be an int >= 0"),
        (lambda: InstanceTracker("i", "m", epoch_frequency=0), "epoch_frequency must be an int >= 1"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()
    with pytest.raises(ValueError, match="one 2-D feature map per channel and image under 'g'"):
        cam = GradCAM(images="x", grads="g", mode="eval")
        cam.system = SimpleNamespace(mode="eval")
        cam.on_batch_end(Data({"x": np.zeros((2, 8, 8, 1)), "g": np.zeros((2, 5))}))
        cam.on_epoch_end(Data())


def test_fastestimator_signatures_and_defaults() -> None:
    cam = GradCAM("x", "g")
    assert (cam.n_components, cam.n_samples, cam.outputs) == (3, 5, ["gradcam"]) and "train" not in cam.mode
    eigen = EigenCAM("x", "a")
    assert (eigen.n_components, eigen.n_samples, eigen.downsize, eigen.outputs) == (3, 5, None, ["eigencam"])
    assert eigen.inputs == ["x", "a"] and eigen.activation_key == "a" and cam.grad_key == "g"
    saliency = Saliency(_model(), "x", "y_pred")
    assert (saliency.smoothing, saliency.integrating, saliency.outputs, saliency.mode) == (
        25, (100, 6), ["saliency"], {"eval", "test"})
    label = LabelTracker("y", "ce")
    assert (label.outputs, label.bounds, label.mode, label.inputs) == (["ce_by_y"], {"std"}, {"eval"}, ["y", "ce"])
    instance = InstanceTracker("idx", "ce")
    assert (instance.outputs, instance.n_max_to_keep, instance.n_min_to_keep, instance.epoch_frequency) == (
        ["ce_by_idx"], 5, 5, 1)


# ------------------------------------------------------------------------------------------------------ TensorFlow
def test_tensorflow_models_channel_last() -> None:
    """The same traces on a Keras CNN (channel-last images and layer outputs, the layer picked by name)."""
    keras = pytest.importorskip("keras")

    def make() -> Any:
        return keras.Sequential([keras.Input((8, 8, 1)),
                                 keras.layers.Conv2D(CHANNELS, 3, padding="same", activation="relu", name="conv"),
                                 keras.layers.Flatten(), keras.layers.Dense(N_CLASSES, activation="softmax")])

    keras.utils.set_random_seed(0)
    model = fe.build(make, optimizer_fn=lambda: keras.optimizers.SGD(0.1), model_name="cnn")
    data = _arrays()
    data["x"] = np.moveaxis(data["x"], 1, -1)
    pipeline = fe.Pipeline(train_data=NumpyDataset({k: v[:16] for k, v in data.items()}),
                           eval_data=NumpyDataset({k: v[16:] for k, v in data.items()}), batch_size=4)
    probes = [Probe(key) for key in ("gradcam", "eigencam", "saliency")]
    traces = [GradCAM("x", "grads", labels="y"), EigenCAM("x", "conv", n_components=2, n_samples=3),
              Saliency(model, "x", "y_pred", samples=3, smoothing=0, integrating=0, mode="eval"), *probes]
    fe.Estimator(pipeline, _network(model), epochs=1, traces=traces, log_steps=None).fit()
    gradcam, eigencam, saliency = (probe.values[0] for probe in probes)
    assert _titles(gradcam) == ["y", "x", "grads"] and len(gradcam.prepare().axes) == 5 * 3
    assert _column(gradcam, "grads").shape == (5, 8, 8, 3)
    assert _titles(eigencam) == ["x", "Component 0", "Component 1"] and _column(eigencam, "x").shape == (3, 8, 8)
    expected = SaliencyNet(model=model, model_inputs="x", model_outputs="y_pred").get_masks({"x": data["x"][16:19]})
    np.testing.assert_allclose(_column(saliency, "saliency"), np.asarray(expected["saliency"])[..., 0], rtol=1e-5,
                               atol=1e-6)


def test_image_saver_draws_the_trackers_summaries(tmp_path: Any) -> None:
    from PIL import Image

    tracker = LabelTracker(label="y", metric="sample_ce", label_mapping={"zero": 0, "two": 2})
    saver = ImageSaver(inputs="sample_ce_by_y", save_dir=str(tmp_path), mode="eval", dpi=50)
    _estimator(_model(), [tracker, saver]).fit()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 1 and files[0].startswith("sample_ce_by_y_") and files[0].endswith(".png")
    with Image.open(tmp_path / files[0]) as image:
        assert image.size[0] > 50 and image.size[1] > 50
