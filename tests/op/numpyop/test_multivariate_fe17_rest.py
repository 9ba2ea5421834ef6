"""CropAndPad, CropNonEmptyMaskIfExists, MaskDropout, RandomCropFromBorders and ReadMat: hand-computed crops and
pads, masks moving exactly with the image, the guarantees each op makes (mask pixels kept, exact objects dropped,
limits respected), .mat reading, FastEstimator's signatures, argument errors, and draws that are a pure function of
the sample's position in a Pipeline."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp, forward_numpyop
from fe_ray.op.numpyop.multivariate import Resize
from fe_ray.op.numpyop.multivariate.crop_and_pad import CropAndPad
from fe_ray.op.numpyop.multivariate.crop_from_borders import RandomCropFromBorders
from fe_ray.op.numpyop.multivariate.mask_crop import CropNonEmptyMaskIfExists
from fe_ray.op.numpyop.multivariate.mask_dropout import MaskDropout, label_objects
from fe_ray.op.numpyop.multivariate.read_mat import ReadMat
from tests.op.numpyop.pipeline_checks import assert_position_seeded

RAMP = np.arange(20).reshape(4, 5)  # pixel (r, c) holds 5 * r + c


def _rng(seed: int) -> dict[str, Any]:
    return {"rng": np.random.default_rng(seed)}


def _label_map(height: int, width: int) -> np.ndarray:
    """Every pixel a distinct positive value (r * width + c + 1), so a moved map says where each pixel came from."""
    return np.arange(1, height * width + 1, dtype=np.int64).reshape(height, width)


def _locate(window: np.ndarray, width: int) -> tuple[int, int]:
    """The (top, left) in a ``_label_map`` of width ``width`` that a cropped window of it starts at."""
    first = int(window[0, 0]) - 1
    return first // width, first % width


# ------------------------------------------------------------------ CropAndPad by hand
def test_crop_and_pad_pads_and_crops_by_pixels() -> None:
    padded = CropAndPad(px=1, keep_size=False, pad_cval=9, image_in="x").forward(RAMP, {})
    assert padded.shape == (6, 7)
    np.testing.assert_array_equal(padded[1:-1, 1:-1], RAMP)
    assert set(np.unique(np.concatenate([padded[0], padded[-1], padded[:, 0], padded[:, -1]]))) == {9}
    np.testing.assert_array_equal(CropAndPad(px=-1, keep_size=False, image_in="x").forward(RAMP, {}), RAMP[1:3, 1:4])


def test_crop_and_pad_sides_are_top_right_bottom_left() -> None:
    """px=(-1, 1, 0, 2): crop 1 row at the top, pad 1 column right, nothing at the bottom, pad 2 columns left."""
    out = CropAndPad(px=(-1, 1, 0, 2), pad_cval=0, keep_size=False, image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(out, [[0, 0, 5, 6, 7, 8, 9, 0], [0, 0, 10, 11, 12, 13, 14, 0],
                                        [0, 0, 15, 16, 17, 18, 19, 0]])
    mirrored = CropAndPad(px=(-1, 1, 0, 2), pad_mode="reflect", keep_size=False, image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(mirrored[0], [7, 6, 5, 6, 7, 8, 9, 8])  # mirrored around the edge pixels
    replicated = CropAndPad(px=(0, 0, 0, 2), pad_mode=1, keep_size=False, image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(replicated[0], [0, 0, 0, 1, 2, 3, 4])  # cv2.BORDER_REPLICATE, FE's "reflect"


def test_crop_and_pad_percent_truncates_toward_zero() -> None:
    """-0.25 of 4 rows is 1 row, of 5 columns 1.25 -> 1 column; 0.5 pads 2 rows and 2 (of 2.5) columns."""
    np.testing.assert_array_equal(CropAndPad(percent=-0.25, keep_size=False, image_in="x").forward(RAMP, {}),
                                  RAMP[1:3, 1:4])
    assert CropAndPad(percent=0.5, keep_size=False, image_in="x").forward(RAMP, {}).shape == (8, 9)
    assert CropAndPad(percent=(0.0, -0.15, 0.0, 0.0), keep_size=False, image_in="x").forward(
        np.zeros((10, 10)), {}).shape == (10, 9)


def test_crop_and_pad_keep_size_resizes_back() -> None:
    """The 2x3 centre of RAMP blown up to 4x5 by cv2's nearest rule (rows 0,0,1,1; columns 0,0,1,1,2)."""
    out = CropAndPad(percent=-0.25, interpolation="nearest_neighbor", image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(out, [[6, 6, 7, 7, 8], [6, 6, 7, 7, 8], [11, 11, 12, 12, 13],
                                        [11, 11, 12, 12, 13]])
    image = np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    padded = CropAndPad(px=(-2, 3, 1, -1), image_in="x").forward(image, {})
    assert padded.shape == image.shape and padded.dtype == np.uint8
    same = CropAndPad(px=0, image_in="x").forward(image, {})  # nothing to crop or pad: an unchanged copy
    np.testing.assert_array_equal(same, image)
    assert same is not image


def test_crop_and_pad_never_leaves_an_empty_side() -> None:
    """Opposite crops of 6 + 6 rows of 10 are reduced as albumentations does: 0 at the top, 1 at the bottom."""
    image = _label_map(10, 10)
    np.testing.assert_array_equal(CropAndPad(px=-6, keep_size=False, image_in="x").forward(image, {}),
                                  image[:9, :9])
    tiny = CropAndPad(px=-50, keep_size=False, image_in="x").forward(image, {})
    assert tiny.shape[0] >= 1 and tiny.shape[1] >= 1


def test_crop_and_pad_fill_values() -> None:
    ops = {"same": CropAndPad(px=1, pad_cval=7, keep_size=False, image_in="x", mask_in="m"),
           "zero": CropAndPad(px=1, pad_cval=7, pad_cval_mask=0, keep_size=False, image_in="x", mask_in="m")}
    image, mask = ops["same"].forward([RAMP, RAMP], {})
    assert image[0, 0] == 7 and mask[0, 0] == 7  # None: the masks take pad_cval
    image, mask = ops["zero"].forward([RAMP, RAMP], {})
    assert image[0, 0] == 7 and mask[0, 0] == 0  # an explicit 0 stays 0
    rounded = CropAndPad(px=1, pad_cval=2.6, keep_size=False, image_in="x").forward(RAMP.astype(np.uint8), {})
    assert rounded[0, 0] == 3  # rounded as OpenCV's saturating cast does, not truncated
    drawn = {int(CropAndPad(px=1, pad_cval=(3, 5), keep_size=False, image_in="x").forward(RAMP, _rng(s))[0, 0])
             for s in range(60)}
    assert drawn == {3, 4, 5}  # int bounds: whole numbers, both ends
    chosen = {int(CropAndPad(px=1, pad_cval=[10, 20], keep_size=False, image_in="x").forward(RAMP, _rng(s))[0, 0])
              for s in range(40)}
    assert chosen == {10, 20}


def test_crop_and_pad_ranges_are_drawn_per_side_with_both_ends() -> None:
    shapes = {CropAndPad(px=(0, 1), keep_size=False, image_in="x").forward(RAMP, _rng(s)).shape for s in range(60)}
    assert shapes == {(h, w) for h in (4, 5, 6) for w in (5, 6, 7)}  # each side 0 or 1, independently
    for seed in range(20):
        out = CropAndPad(percent=(-0.25, 0.25), keep_size=False, image_in="x").forward(_label_map(8, 8), _rng(seed))
        assert 4 <= out.shape[0] <= 12 and 4 <= out.shape[1] <= 12


@pytest.mark.parametrize("keep_size", [True, False])
def test_crop_and_pad_moves_masks_with_the_image(keep_size: bool) -> None:
    """A label map as image (nearest) and as mask and masks gives identical outputs: masks move exactly like it."""
    labels = _label_map(9, 12)
    op = CropAndPad(px=(-3, 3), pad_mode="reflect", keep_size=keep_size, interpolation="nearest_neighbor",
                    image_in="x", mask_in="m", masks_in="ms")
    for seed in range(10):
        image, mask, masks = op.forward([labels, labels, [labels, labels * 2]], _rng(seed))
        np.testing.assert_array_equal(mask, image)
        np.testing.assert_array_equal(masks[1], image * 2)
        if keep_size:
            assert image.shape == labels.shape


def test_crop_and_pad_masks_are_resized_with_nearest_neighbour() -> None:
    mask = np.zeros((8, 8), np.uint8)
    mask[2:6, 2:6] = 7
    _, out = CropAndPad(px=-1, image_in="x", mask_in="m").forward([mask.astype(np.float32), mask], {})
    assert set(np.unique(out)) == {0, 7}  # bilinear would blend 0 and 7 at the edges


@pytest.mark.parametrize("kwargs, match", [
    ({}, "exactly one of px"), ({"px": 1, "percent": 0.1}, "exactly one of px"),
    ({"px": 1.5}, "px must be .* got 1.5"), ({"px": (3, 1)}, r"got \(3, 1\)"),
    ({"px": (1, 2, 3)}, r"got \(1, 2, 3\)"), ({"percent": -1.0}, "got -1.0. Fractions must be above -1"),
    ({"px": 1, "pad_mode": "wrap"}, "pad_mode must be .* got 'wrap'"),
    ({"px": 1, "pad_mode": 7}, "pad_mode must be .* got 7"),
    ({"px": 1, "interpolation": "bicubic"}, "interpolation='bicubic' is not implemented"),
    ({"px": 1, "interpolation": "area"}, "got 'area'"), ({"px": 1, "keep_size": "yes"}, "got 'yes'"),
    ({"px": 1, "pad_cval": "x"}, "pad_cval must be .* got 'x'"),
    ({"px": 1, "pad_cval_mask": (5, 1)}, r"pad_cval_mask must be .* got \(5, 1\)"),
])
def test_crop_and_pad_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CropAndPad(image_in="x", **kwargs)


# ------------------------------------------------------------------ CropNonEmptyMaskIfExists
def test_crop_non_empty_always_holds_the_mask_pixel() -> None:
    labels = _label_map(12, 15)
    for row, col in [(0, 0), (11, 14), (5, 7), (0, 14), (11, 0)]:
        mask = np.zeros((12, 15), np.uint8)
        mask[row, col] = 1
        op = CropNonEmptyMaskIfExists(4, 6, image_in="x", mask_in="m")
        for seed in range(15):
            image, cropped = op.forward([labels, mask], _rng(seed))
            assert image.shape == (4, 6) and cropped.sum() == 1
            top, left = _locate(image, 15)
            np.testing.assert_array_equal(cropped, mask[top:top + 4, left:left + 6])  # aligned with the image


def test_crop_non_empty_ignores_values_and_channels() -> None:
    background = np.full((10, 10), 5, np.int32)
    background[8, 1] = 1
    for seed in range(15):
        out = CropNonEmptyMaskIfExists(3, 3, ignore_values=[5], mask_in="m").forward(background, _rng(seed))
        assert 1 in out
    reached = {int(CropNonEmptyMaskIfExists(3, 3, mask_in="m").forward(background, _rng(s)).sum()) for s in range(30)}
    assert len(reached) > 1  # without ignore_values the 5s count: windows elsewhere
    layered = np.zeros((10, 10, 2), np.uint8)
    layered[..., 0] = 1
    layered[2, 9, 1] = 1
    for seed in range(15):
        out = CropNonEmptyMaskIfExists(3, 3, ignore_channels=[0], mask_in="m").forward(layered, _rng(seed))
        assert out[..., 1].sum() == 1


def test_crop_non_empty_uses_all_masks_and_falls_back_to_random() -> None:
    empty, marked = np.zeros((10, 10)), np.zeros((10, 10))
    marked[9, 9] = 3.5  # a float mask works too
    for seed in range(10):
        image, masks = CropNonEmptyMaskIfExists(2, 2, image_in="x", masks_in="ms").forward(
            [_label_map(10, 10), [empty, marked]], _rng(seed))
        np.testing.assert_array_equal(image, [[89, 90], [99, 100]])
        assert masks[1][1, 1] == 3.5
    corners = {_locate(CropNonEmptyMaskIfExists(8, 8, image_in="x", mask_in="m").forward(
        [_label_map(10, 10), empty], _rng(s))[0], 10) for s in range(60)}
    assert corners == {(r, c) for r in range(3) for c in range(3)}  # empty mask: every position


def test_crop_non_empty_errors() -> None:
    with pytest.raises(ValueError, match="needs mask_in or masks_in"):
        CropNonEmptyMaskIfExists(2, 2, image_in="x")
    with pytest.raises(ValueError, match="ignore_values must be .* got 5"):
        CropNonEmptyMaskIfExists(2, 2, ignore_values=5, mask_in="m")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ignore_channels must be .* got \[-1\]"):
        CropNonEmptyMaskIfExists(2, 2, ignore_channels=[-1], mask_in="m")
    with pytest.raises(ValueError, match="height must be a positive int, got 0"):
        CropNonEmptyMaskIfExists(0, 2, mask_in="m")
    with pytest.raises(ValueError, match="moves bounding boxes given bbox_in, bbox_params and image_in"):
        CropNonEmptyMaskIfExists(2, 2, mask_in="m", bbox_in="b")
    with pytest.raises(ValueError, match="does not fit the 3x3 input"):
        CropNonEmptyMaskIfExists(4, 2, mask_in="m").forward(np.ones((3, 3)), {})


# ------------------------------------------------------------------ MaskDropout
def _objects() -> np.ndarray:
    """Three objects: a diagonal pair of 1s (8-connected: one object), a 2x2 block of 2s and, touching it, a 3."""
    mask = np.zeros((6, 7), np.uint8)
    mask[0, 0] = mask[1, 1] = 1
    mask[3:5, 3:5] = 2
    mask[3, 5] = 3
    return mask


def test_label_objects_finds_eight_connected_regions_of_one_value() -> None:
    labels, count = label_objects(_objects())
    assert count == 3
    assert labels[0, 0] == labels[1, 1] != 0 and labels[3, 3] != labels[3, 5]
    assert label_objects(np.zeros((3, 3)))[1] == 0


@pytest.mark.parametrize("max_objects, dropped", [(1, 1), ((2, 2), 2), (5, 3), ((0, 0), 0)])
def test_mask_dropout_zeroes_exactly_the_chosen_objects(max_objects: Any, dropped: int) -> None:
    mask = _objects()
    labels, _ = label_objects(mask)
    image = np.random.default_rng(1).integers(1, 256, (6, 7, 3), dtype=np.uint8)  # no zero pixel to start with
    op = MaskDropout(max_objects=max_objects, image_in="x", mask_in="m", masks_in="ms")
    for seed in range(10):
        out_image, out_mask, out_masks = op.forward([image, mask, [mask * 10]], _rng(seed))
        gone = (mask != 0) & (out_mask == 0)
        objects = set(np.unique(labels[gone]))
        assert len(objects) == dropped
        np.testing.assert_array_equal(gone, np.isin(labels, list(objects)))  # whole objects, nothing else
        np.testing.assert_array_equal(out_mask[~gone], mask[~gone])
        np.testing.assert_array_equal(np.all(out_image == 0, axis=-1), gone)  # image blanked at the same pixels
        np.testing.assert_array_equal(out_masks[0] == 0, (mask * 10 == 0) | gone)


def test_mask_dropout_fill_values_and_channel_mask() -> None:
    mask = np.zeros((4, 4, 1), np.int32)
    mask[1:3, 1:3] = 4
    image, out = MaskDropout(image_fill_value=9, mask_fill_value=-1, image_in="x", mask_in="m").forward(
        [np.ones((4, 4), np.float32), mask], {})
    assert np.all(image[1:3, 1:3] == 9) and image.sum() == 12 + 36
    assert np.all(out[1:3, 1:3] == -1) and out.shape == (4, 4, 1)
    same = MaskDropout(image_in="x", mask_in="m").forward([np.ones((4, 4)), np.zeros((4, 4))], {})
    np.testing.assert_array_equal(same[0], np.ones((4, 4)))  # no object: nothing changes


def test_mask_dropout_errors() -> None:
    with pytest.raises(ValueError, match="needs mask_in"):
        MaskDropout(image_in="x", masks_in="ms")
    with pytest.raises(ValueError, match="max_objects must be .* got -1"):
        MaskDropout(max_objects=-1, mask_in="m")
    with pytest.raises(ValueError, match=r"got \(3, 1\)"):
        MaskDropout(max_objects=(3, 1), mask_in="m")
    with pytest.raises(ValueError, match="'inpaint'"):
        MaskDropout(image_fill_value="inpaint", mask_in="m")
    with pytest.raises(ValueError, match="mask_fill_value must be a number, got 'a'"):
        MaskDropout(mask_fill_value="a", mask_in="m")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"one-channel mask 'm' .* got shape \(4, 4, 2\)"):
        MaskDropout(mask_in="m").forward(np.ones((4, 4, 2)), {})


# ------------------------------------------------------------------ RandomCropFromBorders
def test_random_crop_from_borders_stays_inside_the_limits() -> None:
    labels = _label_map(20, 30)
    op = RandomCropFromBorders(crop_left=0.2, crop_right=0.1, crop_top=0.3, crop_bottom=0.25, image_in="x",
                               mask_in="m")
    seen_full = False
    for seed in range(50):
        image, mask = op.forward([labels, labels.astype(np.int32)], _rng(seed))
        top, left = _locate(image, 30)
        bottom, right = top + image.shape[0], left + image.shape[1]
        assert 0 <= left <= 6 and right >= 27 and 0 <= top <= 6 and bottom >= 15
        np.testing.assert_array_equal(image, labels[top:bottom, left:right])
        np.testing.assert_array_equal(mask, image)
        seen_full |= right == 30 and bottom == 20
    assert seen_full  # the last row and column can be kept


def test_random_crop_from_borders_zero_is_identity_and_full_keeps_a_pixel() -> None:
    np.testing.assert_array_equal(RandomCropFromBorders(0, 0, 0, 0, image_in="x").forward(RAMP, {}), RAMP)
    for seed in range(20):
        out = RandomCropFromBorders(1.0, 0.0, 1.0, 0.0, image_in="x").forward(RAMP, _rng(seed))
        assert out.shape[0] >= 1 and out.shape[1] >= 1


@pytest.mark.parametrize("kwargs, match", [
    ({"crop_left": 1.5}, "crop_left must be a fraction in \\[0, 1\\], got 1.5"),
    ({"crop_top": -0.1}, "crop_top must .* got -0.1"), ({"crop_bottom": "a"}, "got 'a'"),
    ({"crop_left": 0.6, "crop_right": 0.5}, "crop_left \\+ crop_right must be at most 1 .* got 0.6 \\+ 0.5"),
    ({"keypoints_in": "k"}, "keypoints_in='k'.*fe_ray moves keypoints only in CenterCrop, Crop, CropNonEmpty"),
])
def test_random_crop_from_borders_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RandomCropFromBorders(image_in="x", **kwargs)


# ------------------------------------------------------------------ ReadMat
def test_read_mat_reads_variables(tmp_path: Path) -> None:
    from scipy.io import savemat

    savemat(tmp_path / "a.mat", {"img": np.arange(6.0).reshape(2, 3), "label": 7})
    data = {"path": "a.mat"}
    forward_numpyop([ReadMat("path", ["img", "label"], parent_path=str(tmp_path))], data, {})
    np.testing.assert_array_equal(data["img"], np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(data["label"], [[7]])  # scipy keeps MATLAB's 2-D scalars
    renamed = ReadMat("path", "y", mat_keys="label", parent_path=str(tmp_path)).forward("a.mat", {})
    assert isinstance(renamed, list) and renamed[0][0, 0] == 7
    savemat(tmp_path / "b.mat", {"img": np.ones((2, 3)), "label": 8})
    batch = {"path": np.array(["a.mat", "b.mat"])}
    forward_numpyop([ReadMat("path", "img", parent_path=str(tmp_path))], batch, {}, batched=True)
    assert batch["img"].shape == (2, 2, 3) and batch["img"][1].sum() == 6


def test_read_mat_errors(tmp_path: Path) -> None:
    from scipy.io import savemat

    savemat(tmp_path / "a.mat", {"img": np.zeros(2)})
    with pytest.raises(KeyError, match=r"no variable\(s\) \['mask'\]; it holds \['img'\]"):
        ReadMat("p", "mask").forward(str(tmp_path / "a.mat"), {})
    with pytest.raises(FileNotFoundError, match="missing.mat"):
        ReadMat("p", "img", parent_path=str(tmp_path)).forward("missing.mat", {})
    with pytest.raises(ValueError, match=r"2 mat_keys \['a', 'b'\] and 1 outputs \['x'\]"):
        ReadMat("p", "x", mat_keys=["a", "b"])
    with pytest.raises(ValueError, match=r"inputs must be one key .* got \['p', 'q'\]"):
        ReadMat(["p", "q"], "x")  # type: ignore[arg-type]


# ------------------------------------------------------------------ FastEstimator 1.7's signatures
_KEYS = ["mode", "ds_id", "image_in", "mask_in", "masks_in"]
_BBOX = ["bbox_in", "keypoints_in", "image_out", "mask_out", "masks_out", "bbox_out", "keypoints_out", "bbox_params",
         "keypoint_params"]


@pytest.mark.parametrize("cls, names, defaults", [
    (CropAndPad, ["px", "percent", "pad_mode", "pad_cval", "pad_cval_mask", "keep_size", "interpolation", *_KEYS,
                  "image_out", "mask_out", "masks_out"],
     {"px": None, "percent": None, "pad_mode": "constant", "pad_cval": 0, "pad_cval_mask": None, "keep_size": True,
      "interpolation": "bilinear"}),
    (CropNonEmptyMaskIfExists, ["height", "width", "ignore_values", "ignore_channels", *_KEYS, *_BBOX],
     {"ignore_values": None, "ignore_channels": None}),
    (MaskDropout, ["max_objects", "image_fill_value", "mask_fill_value", *_KEYS, "image_out", "mask_out",
                   "masks_out"], {"max_objects": 1, "image_fill_value": 0, "mask_fill_value": 0}),
    (RandomCropFromBorders, ["crop_left", "crop_right", "crop_top", "crop_bottom", *_KEYS, *_BBOX],
     {"crop_left": 0.1, "crop_right": 0.1, "crop_top": 0.1, "crop_bottom": 0.1}),
    (ReadMat, ["inputs", "outputs", "mat_keys", "mode", "ds_id", "parent_path"], {"mat_keys": None,
                                                                                  "parent_path": ""}),
], ids=lambda value: getattr(value, "__name__", ""))
def test_signatures_match_fastestimator(cls: type, names: list[str], defaults: dict[str, Any]) -> None:
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in parameters] == names
    for p in parameters:
        assert p.default == defaults.get(p.name, None if p.name not in ("height", "width", "inputs", "outputs")
                                         else inspect.Parameter.empty)


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    # Label-like images: a few values with background, so MaskDropout and CropNonEmptyMaskIfExists have objects.
    x = np.random.default_rng(3).integers(0, 4, (N, 12, 12)).astype(np.uint8) * 60
    return NumpyDataset({"x": x, "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [MaskDropout(max_objects=(1, 3), image_fill_value=255, mask_in="x"),
            CropAndPad(px=(-2, 2), pad_cval=(0, 255), image_in="x"),
            CropAndPad(percent=[(-0.2, 0.2), -0.1, [0.0, 0.1], 0.05], pad_mode="reflect", image_in="x"),
            RandomCropFromBorders(crop_left=0.3, crop_right=0.3, crop_top=0.3, crop_bottom=0.3, image_in="x"),
            Resize(12, 12, interpolation=0, image_in="x"),
            CropNonEmptyMaskIfExists(6, 6, mask_in="x")]


def test_pipeline_draws_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=5)
