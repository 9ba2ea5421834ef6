"""HorizontalFlip, VerticalFlip, PadIfNeeded, CenterCrop and RandomCrop on images with masks: hand-computed values,
alignment of image and masks, and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.op.numpyop import forward_numpyop
from fe_ray.op.numpyop.multivariate import CenterCrop, HorizontalFlip, PadIfNeeded, RandomCrop, VerticalFlip

IMAGE = np.array([[1, 2, 3], [4, 5, 6]])


def test_flips_move_image_mask_and_masks_together() -> None:
    data = {"x": IMAGE, "m": IMAGE * 10, "ms": [IMAGE, -IMAGE]}
    forward_numpyop([HorizontalFlip(image_in="x", mask_in="m", masks_in="ms", image_out="flipped")], data, {})
    np.testing.assert_array_equal(data["flipped"], [[3, 2, 1], [6, 5, 4]])
    np.testing.assert_array_equal(data["x"], IMAGE)  # image_out given: the input key is kept
    np.testing.assert_array_equal(data["m"], [[30, 20, 10], [60, 50, 40]])
    assert isinstance(data["ms"], list)
    np.testing.assert_array_equal(data["ms"][1], [[-3, -2, -1], [-6, -5, -4]])
    assert data["flipped"].flags["C_CONTIGUOUS"]  # torch.from_numpy rejects negative strides
    image, = VerticalFlip(image_in="x").forward([IMAGE], {})
    np.testing.assert_array_equal(image, [[4, 5, 6], [1, 2, 3]])
    np.testing.assert_array_equal(VerticalFlip(image_in="x").forward(IMAGE, {}), image)  # bare array in, bare out


def test_flip_keeps_channels_and_works_as_a_pop() -> None:
    rgb = np.arange(12).reshape(2, 2, 3)
    out, = HorizontalFlip(image_in="x").forward([rgb], {})
    np.testing.assert_array_equal(out[0, 0], [3, 4, 5])  # pixel (0, 1) moved to (0, 0), channels intact
    data = {"x": np.stack([IMAGE, IMAGE + 6])}
    forward_numpyop([HorizontalFlip(image_in="x")], data, {}, batched=True)
    np.testing.assert_array_equal(data["x"][1], [[9, 8, 7], [12, 11, 10]])


@pytest.mark.parametrize("border_mode, expected", [(0, [0, 1, 2, 3, 0, 0]), (1, [1, 1, 2, 3, 3, 3]),
                                                   (2, [1, 1, 2, 3, 3, 2]), (3, [3, 1, 2, 3, 1, 2]),
                                                   (4, [2, 1, 2, 3, 2, 1])])
def test_pad_if_needed_border_modes(border_mode: int, expected: list[int]) -> None:
    """A 1x3 row padded to width 6: one pixel on the left, two on the right, with cv2's border semantics."""
    op = PadIfNeeded(min_height=1, min_width=6, border_mode=border_mode, image_in="x")
    out, = op.forward([np.array([[1, 2, 3]])], {})
    np.testing.assert_array_equal(out, [expected])


def test_pad_if_needed_default_reflects_in_both_directions() -> None:
    square = np.array([[1, 2], [3, 4]])
    out, = PadIfNeeded(min_height=4, min_width=5, image_in="x").forward([square], {})
    np.testing.assert_array_equal(out, [[4, 3, 4, 3, 4], [2, 1, 2, 1, 2], [4, 3, 4, 3, 4], [2, 1, 2, 1, 2]])


def test_pad_if_needed_constant_values_for_image_and_mask() -> None:
    op = PadIfNeeded(min_height=4, min_width=4, border_mode=0, value=9, mask_value=0, image_in="x", mask_in="m")
    image, mask = op.forward([np.array([[1, 2], [3, 4]]), np.ones((2, 2), np.uint8)], {})
    np.testing.assert_array_equal(image, [[9, 9, 9, 9], [9, 1, 2, 9], [9, 3, 4, 9], [9, 9, 9, 9]])
    np.testing.assert_array_equal(mask, [[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]])
    assert mask.dtype == np.uint8
    rgb, = PadIfNeeded(min_height=1, min_width=2, border_mode=0, value=[7, 8], image_in="x").forward(
        [np.array([[[1, 2]]])], {})
    np.testing.assert_array_equal(rgb, [[[1, 2], [7, 8]]])  # one fill value per channel
    big = np.arange(30).reshape(5, 6)
    np.testing.assert_array_equal(PadIfNeeded(4, 4, image_in="x").forward([big], {})[0], big)  # large enough


def test_center_crop_values_and_too_large_crops() -> None:
    grid = np.arange(20).reshape(4, 5)
    image, mask = CenterCrop(2, 2, image_in="x", mask_in="m").forward([grid, grid * 2], {})
    np.testing.assert_array_equal(image, [[6, 7], [11, 12]])  # rows 1-2, columns 1-2
    np.testing.assert_array_equal(mask, [[12, 14], [22, 24]])
    with pytest.raises(ValueError, match=r"CenterCrop of 5x2 does not fit the 4x5 input.*PadIfNeeded\(min_height=5"):
        CenterCrop(5, 2, image_in="x").forward([grid], {})


def test_random_crop_keeps_image_and_mask_aligned_and_reaches_every_window() -> None:
    grid = np.arange(9).reshape(3, 3)
    windows = {(0, 0): [[0, 1], [3, 4]], (0, 1): [[1, 2], [4, 5]], (1, 0): [[3, 4], [6, 7]], (1, 1): [[4, 5], [7, 8]]}
    op = RandomCrop(2, 2, image_in="x", mask_in="m")
    seen = set()
    for seed in range(40):
        image, mask = op.forward([grid, grid * 10], {"rng": np.random.default_rng(seed)})
        np.testing.assert_array_equal(mask, image * 10)
        corner = (int(image[0, 0]) // 3, int(image[0, 0]) % 3)
        np.testing.assert_array_equal(image, windows[corner])
        seen.add(corner)
    assert seen == set(windows)
    again = [op.forward([grid, grid], {"rng": np.random.default_rng(7)})[0] for _ in range(2)]
    np.testing.assert_array_equal(again[0], again[1])  # the same generator state gives the same crop


@pytest.mark.parametrize("kwargs, error, match", [
    ({"image_in": "x", "bbox_in": "boxes"}, ValueError, r"moves bounding boxes given bbox_in, bbox_params and .*None"),
    ({"image_in": "x", "keypoint_params": "xy"}, ValueError, "keypoint_params='xy'"),
    ({}, ValueError, "needs at least one of image_in, mask_in or masks_in"),
])
def test_multivariate_argument_errors(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        HorizontalFlip(**kwargs)


def test_multivariate_input_errors() -> None:
    with pytest.raises(ValueError, match=r"must share height and width; got 'x': \(2, 3\), 'm': \(3, 2\)"):
        HorizontalFlip(image_in="x", mask_in="m").forward([IMAGE, IMAGE.T], {})
    with pytest.raises(ValueError, match=r"needs image 'x' of shape \(height, width\).*got \(3,\)"):
        HorizontalFlip(image_in="x").forward([np.zeros(3)], {})
    for name, kwargs in (("PadIfNeeded min_height", {"min_height": 0}),
                         ("PadIfNeeded border_mode", {"border_mode": 5})):
        with pytest.raises(ValueError, match=name):
            PadIfNeeded(image_in="x", **kwargs)
    with pytest.raises(ValueError, match=r"4 \(cv2.BORDER_REFLECT_101\)"):
        PadIfNeeded(image_in="x", border_mode="reflect")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="RandomCrop height must be a positive int"):
        RandomCrop(0, 2, image_in="x")
