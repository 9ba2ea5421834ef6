"""fe.util's image displays (ImageDisplay, BatchDisplay, GridDisplay) drawn with matplotlib: FastEstimator's image
range and layout rules, overlays found in the rendered pixels, PNG files read back with Pillow, and bad arguments."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

pytest.importorskip("matplotlib")
torch = pytest.importorskip("torch")
from PIL import Image  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.util.img_data import BatchDisplay, GridDisplay, ImageDisplay, image_to_rgb  # noqa: E402


def _pixels(fig: Any) -> np.ndarray:
    """The figure drawn at 100 dpi as an (H, W, 3) uint8 array."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _pixel_at(fig: Any, pixels: np.ndarray, ax: Any, x: float, y: float) -> np.ndarray:
    """The rendered colour at data point (x, y) of ``ax`` (display coordinates start at the bottom)."""
    col, row = ax.transData.transform((x, y))
    return pixels[pixels.shape[0] - 1 - int(row), int(col)]


def _png_size(path: Any) -> tuple[int, int]:
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


# ---------------------------------------------------------------------------------------------- image ranges
def test_image_ranges_follow_fastestimators_rules() -> None:
    assert image_to_rgb(np.array([[0.0, 0.5, 1.0]] * 2)[..., None].repeat(3, -1))[0, :, 0].tolist() == [0, 128, 255]
    assert image_to_rgb(np.array([[[-1.0, 0.0, 1.0]]]).transpose(0, 2, 1).repeat(3, -1))[0, :, 0].tolist() == [
        0, 128, 255]
    assert image_to_rgb(np.array([[[-0.5, 0.0, 0.5]]]).transpose(0, 2, 1).repeat(3, -1))[0, :, 0].tolist() == [
        0, 128, 255]
    # Outside the known ranges (a Normalize op's output): each channel from its minimum to its maximum.
    image = np.stack([np.array([[-3.0, 0.0, 5.0]]), np.array([[10.0, 20.0, 30.0]]), np.zeros((1, 3))], axis=-1)
    assert image_to_rgb(image)[0].tolist() == [[0, 0, 0], [96, 128, 0], [255, 255, 0]]
    # Integers are pixel values, clipped; grey images go through the colour map ('gray': equal channels).
    assert image_to_rgb(np.array([[[-5, 7, 300]]]))[0, 0].tolist() == [0, 7, 255]
    grey = image_to_rgb(np.array([[0.0, 1.0]]), "gray")
    assert grey.shape == (1, 2, 3) and grey.tolist() == [[[0, 0, 0], [255, 255, 255]]]


def test_torch_images_are_channel_first_by_fastestimators_rule() -> None:
    assert ImageDisplay(image=torch.rand(3, 8, 10)).image.shape == (8, 10, 3)
    assert ImageDisplay(image=torch.rand(1, 8, 10)).image.shape == (8, 10)
    assert ImageDisplay(image=torch.rand(8, 10, 3)).image.shape == (8, 10, 3)  # already channel-last
    assert ImageDisplay(image=np.random.rand(8, 10, 1)).image.shape == (8, 10)
    tf = pytest.importorskip("tensorflow")
    assert ImageDisplay(image=tf.zeros((8, 10, 3))).image.shape == (8, 10, 3)
    with pytest.raises(ValueError, match=r"1 or 3 channels, got shape \(3, 8, 10\)"):
        ImageDisplay(image=np.zeros((3, 8, 10)))  # numpy is channel-last: 10 channels
    with pytest.raises(ValueError, match=r"got shape \(2, 3, 4, 5\)"):
        ImageDisplay(image=np.zeros((2, 3, 4, 5)))


def test_text_values() -> None:
    assert ImageDisplay(text="cat").text == "cat"
    assert ImageDisplay(text=b"dog").text == "dog"
    assert ImageDisplay(text=torch.tensor(3)).text == "3"
    assert ImageDisplay(text=np.array([0.5])).text == "0.5"
    assert ImageDisplay(text=np.array([b"bird"])).text == "bird"
    with pytest.raises(ValueError, match=r"one value .* got shape \(2,\)"):
        ImageDisplay(text=np.array([1, 2]))


# ---------------------------------------------------------------------------------------------- masks
def test_masks_shapes_labels_and_threshold() -> None:
    image = np.zeros((6, 8))
    one = ImageDisplay(image=image, masks=np.ones((6, 8)))
    assert len(one.masks) == 1 and one.masks[0].shape == (6, 8) and one.mask_labels == [""]
    # torch masks (N, H, W) are recognised as channel-first by the image's size.
    two = ImageDisplay(image=image, masks=(torch.zeros(2, 6, 8), ["a", "b"]))
    assert len(two.masks) == 2 and two.mask_labels == ["a", "b"]
    # Continuous masks are merged into their maximum; a threshold binarises them instead.
    soft = np.stack([np.full((6, 8), 0.2), np.full((6, 8), 0.7)], -1)
    soft[0, 0, 0] = 0.9
    merged = ImageDisplay(image=image, masks=soft)
    assert len(merged.masks) == 1 and merged.masks[0][0, 0] == 0.9 and merged.masks[0][1, 1] == 0.7
    binary = ImageDisplay(image=image, masks=(soft, ["x", "y"]), mask_threshold=0.5)
    assert [m.sum() for m in binary.masks] == [1, 48]
    with pytest.raises(ValueError, match=r"mask labels \['x', 'y'\] need binary masks"):
        ImageDisplay(image=image, masks=(soft, ["x", "y"]))
    with pytest.raises(ValueError, match=r"got 1 mask labels \['a'\] for 2 masks"):
        ImageDisplay(image=image, masks=(np.zeros((6, 8, 2)), "a"))
    with pytest.raises(ValueError, match=r"\(5, 8\) do not match the image's \(6, 8\)"):
        ImageDisplay(image=image, masks=np.zeros((5, 8)))
    with pytest.raises(ValueError, match=r"got shape \(1, 2, 6, 8\)"):
        ImageDisplay(image=image, masks=np.zeros((1, 2, 6, 8)))


def test_mask_overlay_colours_only_the_masked_pixels() -> None:
    image = np.zeros((20, 20), dtype=np.uint8)  # black
    mask = np.zeros((20, 20))
    mask[:, :10] = 1  # the left half
    fig = ImageDisplay(image=image, masks=mask).prepare()
    ax = fig.axes[0]
    pixels = _pixels(fig)
    assert _pixel_at(fig, pixels, ax, 14, 10).tolist() == [0, 0, 0]
    tinted = _pixel_at(fig, pixels, ax, 4, 10)
    assert tinted.max() > 20  # the mask colour at 30 % over black


# ---------------------------------------------------------------------------------------------- boxes and points
def test_bboxes_and_keypoints_are_drawn_and_labelled() -> None:
    image = np.zeros((32, 32, 3))
    display = ImageDisplay(image=image, bboxes=[(2, 3, 10, 8, "car"), (5, 5, 0, 4), np.array([[1, 1, 4, 4]])],
                           keypoints=(np.array([[3.0, 4.0], [-1.0, 2.0], [np.nan, 1.0]]), ["nose", "eye", "ear"]))
    fig = display.prepare()
    ax = fig.axes[0]
    assert len(ax.patches) == 2  # the zero-width box is skipped
    assert (ax.patches[0].get_x(), ax.patches[0].get_y(), ax.patches[0].get_width()) == (2, 3, 10)
    assert len(ax.collections) == 1  # the undetected keypoints (negative, NaN) are skipped
    assert [text.get_text() for text in ax.texts] == ["car"]
    assert [text.get_text() for text in fig.legends[0].get_texts()] == ["car", "nose"]
    # One box as a plain tuple.
    assert len(ImageDisplay(image=image, bboxes=(1, 2, 3, 4)).prepare().axes[0].patches) == 1
    with pytest.raises(ValueError, match=r"got shape \(2, 3\)"):
        ImageDisplay(bboxes=np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"4 or 5 elements .* got \[1, 2\]"):
        ImageDisplay(bboxes=[[1, 2]])
    with pytest.raises(ValueError, match=r"keypoints must have shape .* got shape \(4, 3\)"):
        ImageDisplay(keypoints=np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"got 1 keypoint labels \['a'\] for 2 keypoints"):
        ImageDisplay(keypoints=(np.zeros((2, 2)), ["a"]))


def test_keypoints_without_an_image_use_image_coordinates() -> None:
    ax = ImageDisplay(keypoints=np.array([[2.0, 8.0]])).prepare().axes[0]
    assert ax.yaxis_inverted()  # y grows downwards, as over an image


# ---------------------------------------------------------------------------------------------- files
def test_show_writes_a_png_of_the_layout_size(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    display = ImageDisplay(image=np.random.rand(16, 16, 3), text="hi", title="sample")
    path = display.show(save_path=str(tmp_path / "out" / "sample.png"))
    assert path == str(tmp_path / "out" / "sample.png") and "Saving to" in capsys.readouterr().out
    assert _png_size(path) == (280, 380)  # col_width x (col_width + title and legend margins)
    # scale multiplies the pixels; a path without an extension gets '.png'.
    path = display.show(save_path=str(tmp_path / "scaled"), verbose=False, scale=2)
    assert path.endswith("scaled.png") and _png_size(path) == (560, 760)
    assert _png_size(display.save(str(tmp_path / "d.png"), dpi=150)) == (420, 570)
    with pytest.raises(ValueError, match=r"'\.?[^']*sample\.xyz'.*matplotlib writes"):
        display.show(save_path=str(tmp_path / "sample.xyz"))
    with pytest.raises(ValueError, match=r"scale must be a positive number .*, got 0\."):
        display.show(save_path=str(tmp_path / "x.png"), scale=0)


def test_show_without_a_path_writes_a_temporary_png_outside_notebooks(capsys: pytest.CaptureFixture) -> None:
    path = ImageDisplay(image=np.zeros((4, 4)), title="a title").show()
    try:
        assert "no window to show 'a title'" in capsys.readouterr().out and os.path.basename(path).startswith("a_title")
        assert _png_size(path) == (280, 380)
    finally:
        os.remove(path)


# ---------------------------------------------------------------------------------------------- batch and grid
def test_batch_display_has_one_panel_per_element(tmp_path: Any) -> None:
    batch = BatchDisplay(image=torch.rand(3, 1, 8, 8), text=["a", "b", "c"], masks=np.zeros((3, 8, 8)),
                         bboxes=np.tile(np.array([[[1, 1, 3, 3]]], dtype=float), (3, 1, 1)), title="batch")
    assert batch.batch_size == 3 and all(elem.image.shape == (8, 8) for elem in batch.batch)
    assert [elem.text for elem in batch.batch] == ["a", "b", "c"]
    fig = batch.prepare()
    assert len(fig.axes) == 3 and fig.axes[0].get_title() == "batch"
    assert [len(ax.patches) for ax in fig.axes] == [1, 1, 1]
    assert _png_size(batch.show(save_path=str(tmp_path / "b.png"), verbose=False)) == (400, 1200)
    # One string is written on every panel; text alone makes panels too; TF batches work.
    assert [e.text for e in BatchDisplay(image=np.zeros((2, 4, 4)), text="same").batch] == ["same", "same"]
    assert BatchDisplay(text=torch.arange(4)).batch_size == 4
    tf = pytest.importorskip("tensorflow")
    assert [e.image.shape for e in BatchDisplay(image=tf.zeros((2, 5, 6, 3))).batch] == [(5, 6, 3), (5, 6, 3)]
    with pytest.raises(ValueError, match=r"same batch size, got \{'image': 3, 'text': 2\}"):
        BatchDisplay(image=np.zeros((3, 4, 4)), text=["a", "b"])
    with pytest.raises(TypeError, match="image must be a batch: .* got int"):
        BatchDisplay(image=5)


def test_grid_display_lays_out_columns_by_batch(tmp_path: Any) -> None:
    columns = [BatchDisplay(image=np.random.rand(3, 8, 8, 3), title="x"),
               BatchDisplay(image=np.random.rand(3, 8, 8), masks=(np.ones((3, 8, 8)), "fg"), title="y"),
               BatchDisplay(text=["0", "1", "2"], title="label")]
    grid = GridDisplay(columns)
    fig = grid.prepare()
    assert len(fig.axes) == 9 and [ax.get_title() for ax in fig.axes[:3]] == ["x", "y", "label"]
    assert [text.get_text() for text in fig.legends[0].get_texts()] == ["fg"]
    # FastEstimator's size: min(1500, 280 * columns) wide, width * max(batch / columns, 0.65) high.
    assert _png_size(grid.show(save_path=str(tmp_path / "g.png"), verbose=False)) == (840, 840)
    singles = GridDisplay([ImageDisplay(image=np.zeros((4, 4)), title="a"), ImageDisplay(text="b")])
    assert len(singles.prepare().axes) == 2
    assert _png_size(singles.show(save_path=str(tmp_path / "s.png"), verbose=False)) == (560, 364)
    with pytest.raises(ValueError, match=r"one batch size .* got \[3, 1\]"):
        GridDisplay([columns[0], ImageDisplay(text="b")])
    with pytest.raises(TypeError, match=r"got \['ndarray'\]"):
        GridDisplay([np.zeros((3, 4))])
    with pytest.raises(ValueError, match="at least one column"):
        GridDisplay([])


# ---------------------------------------------------------------------------------------------- misc
def test_namespace_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fe.util.ImageDisplay is ImageDisplay and fe.util.BatchDisplay is BatchDisplay
    assert fe.util.GridDisplay is GridDisplay
    assert ImageDisplay(image=np.zeros((2, 2)), color_map="Inferno").img_color_map == "Inferno"
    with pytest.raises(ValueError, match="color_map 'nope' is not a matplotlib colour map"):
        ImageDisplay(color_map=("gray", "nope"))
    with pytest.raises(TypeError, match="image must hold numbers, got dtype"):
        ImageDisplay(image=np.array([["a", "b"], ["c", "d"]]))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "matplotlib" else real(name, *args))
    with pytest.raises(ImportError, match="pip install matplotlib"):
        ImageDisplay(image=np.zeros((2, 2)))
