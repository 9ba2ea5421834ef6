"""ImageSaver and ImageViewer: files per epoch from an in-process fe.Estimator fit and test (fe.Pipeline over a tiny
NumpyDataset, a torch model), their names and pixel sizes read back with Pillow, and the traces' refusals."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

pytest.importorskip("matplotlib")
torch = pytest.importorskip("torch")
from PIL import Image  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.dataset import NumpyDataset  # noqa: E402
from fe_ray.trace import Data, Trace  # noqa: E402
from fe_ray.trace.io import ImageSaver, ImageViewer  # noqa: E402
from fe_ray.util.img_data import BatchDisplay, GridDisplay, ImageDisplay  # noqa: E402
from tests.estimator_helpers import classifier_network, torch_mlp  # noqa: E402


class MakeImages(Trace):
    """At each epoch end writes a two-column GridDisplay of the epoch's first two images ('grid') and the raw batch
    of those images ('raw'), as a user's visualisation trace would."""

    def __init__(self, mode: Any = None) -> None:
        super().__init__(inputs=["x", "y_pred"], outputs=["grid", "raw"], mode=mode)
        self.images: list[np.ndarray] = []

    def on_epoch_begin(self, data: Data) -> None:
        self.images = []

    def on_batch_end(self, data: Data) -> None:
        if not self.images:
            self.images = [np.asarray(fe.backend.to_number(data["x"]))[:2]]
            self.preds = np.asarray(fe.backend.to_number(data["y_pred"]))[:2].argmax(-1)

    def on_epoch_end(self, data: Data) -> None:
        images = torch.tensor(self.images[0])  # (2, 1, 8, 8): channel-first torch images
        grid = GridDisplay([BatchDisplay(image=images, title="x"), BatchDisplay(text=self.preds, title="pred")])
        data.write_without_log("grid", grid)
        data.write_without_log("raw", images)


def _estimator(traces: list[Any], epochs: int = 2) -> Any:
    rng = np.random.default_rng(0)
    x = rng.random((16, 1, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 16)
    pipeline = fe.Pipeline(train_data=NumpyDataset({"x": x, "y": y}), eval_data=NumpyDataset({"x": x[:8], "y": y[:8]}),
                           test_data=NumpyDataset({"x": x[8:], "y": y[8:]}), batch_size=4)
    return fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=epochs, traces=traces, log_steps=None)


def _png_size(path: Any) -> tuple[int, int]:
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


def test_image_saver_writes_each_eval_epoch_and_the_test(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    saver = ImageSaver(inputs=["grid", "raw"], save_dir=str(tmp_path / "images"), dpi=50)
    estimator = _estimator([MakeImages(), saver])
    estimator.fit()
    names = sorted(os.listdir(tmp_path / "images"))
    # Default modes eval and test: nothing from training epochs; one file per display, one per raw batch element.
    assert names == sorted(f"{stem}_eval_epoch_{epoch}{suffix}.png" for epoch in (1, 2)
                           for stem, suffix in (("grid", ""), ("raw", "_elem_0"), ("raw", "_elem_1")))
    # A 2 x 2 grid is 560 x int(560 * max(2 / 2, 0.65)) layout pixels, halved by dpi 50; a raw image is an
    # ImageDisplay (280 x 380).
    assert _png_size(tmp_path / "images" / "grid_eval_epoch_2.png") == (280, 280)
    assert _png_size(tmp_path / "images" / "raw_eval_epoch_1_elem_0.png") == (140, 190)
    out = capsys.readouterr().out
    assert f"FastEstimator-ImageSaver: saved image to {tmp_path / 'images' / 'grid_eval_epoch_1.png'}" in out
    estimator.test()
    assert "grid_test_epoch_2.png" in os.listdir(tmp_path / "images")


def test_image_saver_modes_and_ds_id(tmp_path: Any) -> None:
    saver = ImageSaver(inputs="grid", save_dir=str(tmp_path), dpi=20, mode="train", ds_id="!other")
    assert saver.mode == {"train"} and saver.ds_id is not None and saver.checkpointed is False
    _estimator([MakeImages(), saver], epochs=1).fit()
    assert os.listdir(tmp_path) == ["grid_train_epoch_1.png"]


def test_image_viewer_writes_and_reports_files_outside_notebooks(capsys: pytest.CaptureFixture) -> None:
    viewer = ImageViewer(inputs=["grid", "raw"])
    _estimator([MakeImages(), viewer], epochs=1).fit()
    out = capsys.readouterr().out
    try:
        names = sorted(os.listdir(viewer.viewer_dir))
        assert names == ["grid_eval_epoch_1.png", "raw_eval_epoch_1_elem_0.png", "raw_eval_epoch_1_elem_1.png"]
        assert "FastEstimator-ImageViewer: no window to show 'x | pred'" in out and "'raw_1'" in out
        assert _png_size(os.path.join(viewer.viewer_dir, "grid_eval_epoch_1.png")) == (560, 560)
    finally:
        for name in os.listdir(viewer.viewer_dir):
            os.remove(os.path.join(viewer.viewer_dir, name))
        os.rmdir(viewer.viewer_dir)


def test_traces_draw_displays_and_batches_directly(tmp_path: Any) -> None:
    saver = ImageSaver(inputs=["one", "batch", "bad"], save_dir=str(tmp_path), dpi=100)
    saver.system = SimpleNamespace(mode="test", epoch_idx=3)
    data = Data({"one": ImageDisplay(image=np.zeros((4, 4)), title="t"), "batch": [np.zeros((4, 4, 3))]})
    written = saver._save_images(data)
    assert [os.path.basename(p) for p in written] == ["one_test_epoch_3.png", "batch_test_epoch_3_elem_0.png"]
    assert _png_size(written[0]) == (280, 380)
    data.write_without_log("bad", 0.5)
    with pytest.raises(TypeError, match="ImageSaver found float under 'bad'"):
        saver._save_images(data)


def test_trace_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="dpi must be a positive number, got 0"):
        ImageSaver(inputs="x", dpi=0)
    with pytest.raises(ValueError, match="needs the key"):
        ImageSaver(inputs=[])
    with pytest.raises(ValueError, match="interactive must be True, False or 'auto', got 'yes'"):
        ImageViewer(inputs="x", interactive="yes")
    assert ImageViewer(inputs="x", interactive=False).mode == {"eval", "test"}
    assert fe.trace.io.ImageSaver is ImageSaver


def test_positional_arguments_follow_fastestimator() -> None:
    saver = ImageSaver("x", "/tmp/out", "train")  # FastEstimator's (inputs, save_dir, mode)
    assert (saver.save_dir, saver.mode, saver.dpi, saver.ds_id) == ("/tmp/out", {"train"}, 300, set())
    extra = ImageSaver("x", "/tmp/out", "train", 72, "ds1")
    assert (extra.dpi, extra.ds_id) == (72, {"ds1"})
    viewer = ImageViewer("x", "test", False)  # FastEstimator's (inputs, mode, interactive)
    assert (viewer.mode, viewer.interactive, viewer.ds_id) == ({"test"}, False, set())
    assert ImageViewer("x", "test", True, "!ds2").ds_id == {"!ds2"}


def test_image_viewer_shows_pngs_inline_in_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    shown: list[bytes] = []
    fake = types.ModuleType("IPython.display")
    fake.Image = lambda data: data  # type: ignore[attr-defined]
    fake.display = shown.append  # type: ignore[attr-defined]
    if "IPython" not in sys.modules:  # a stand-in parent package, so the test needs no IPython install
        monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", fake)
    monkeypatch.setattr("fe_ray.util.img_data.in_notebook", lambda: True)
    monkeypatch.setattr("fe_ray.trace.io.image_viewer.in_notebook", lambda: True)
    viewer = ImageViewer(inputs=["one", "batch"], mode=None)
    viewer.system = SimpleNamespace(mode="eval", epoch_idx=1)
    data = Data({"one": ImageDisplay(image=np.zeros((4, 4))), "batch": np.zeros((2, 4, 4, 3))})
    assert viewer._display_images(data) == [None, None, None]
    assert viewer.viewer_dir is None and len(shown) == 3  # no files: three PNGs displayed
    assert all(png.startswith(b"\x89PNG") for png in shown)
