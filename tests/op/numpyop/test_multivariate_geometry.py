"""Resize, LongestMaxSize, SmallestMaxSize, RandomScale, Crop, RandomSizedCrop, RandomResizedCrop, Flip,
RandomRotate90 and Transpose: hand-computed outputs on a 4x6 ramp, cv2.resize's pixel mapping, masks moving (and
staying labels) with the image, dtypes, draws from the sample's generator, and argument errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from fe_ray.op.numpyop.multivariate import (
    Affine,
    Crop,
    Flip,
    GridDistortion,
    LongestMaxSize,
    RandomResizedCrop,
    RandomRotate90,
    RandomScale,
    RandomSizedCrop,
    Resize,
    Rotate,
    ShiftScaleRotate,
    SmallestMaxSize,
    Transpose,
)

RAMP = np.arange(24, dtype=np.float32).reshape(4, 6)  # pixel (r, c) holds 6 * r + c
# A 2x linear downscale averages each 2x2 block (cv2 samples at (2i + 0.5, 2j + 0.5)).
RAMP_HALF = np.array([[3.5, 5.5, 7.5], [15.5, 17.5, 19.5]])
# cv2's nearest downscale reads pixel floor(i * in / out): rows 0, 2 and columns 0, 2, 4.
RAMP_HALF_NEAREST = np.array([[0, 2, 4], [12, 14, 16]])
IMAGE = np.array([[1, 2, 3], [4, 5, 6]])


def _rng(seed: int) -> dict[str, Any]:
    return {"rng": np.random.default_rng(seed)}


def test_resize_linear_and_nearest_follow_cv2() -> None:
    np.testing.assert_array_equal(Resize(2, 3, image_in="x").forward(RAMP, {}), RAMP_HALF)
    np.testing.assert_array_equal(Resize(2, 3, interpolation=0, image_in="x").forward(RAMP, {}), RAMP_HALF_NEAREST)
    # Upscaling 1x2 -> 1x4 samples at x = -0.25, 0.25, 0.75, 1.25: the ends repeat the edge pixels.
    row = np.array([[0.0, 10.0]])
    np.testing.assert_array_equal(Resize(1, 4, image_in="x").forward(row, {}), [[0, 2.5, 7.5, 10]])
    np.testing.assert_array_equal(Resize(1, 4, interpolation=0, image_in="x").forward(row, {}), [[0, 0, 10, 10]])
    # 6 -> 4 nearest reads floor(i * 1.5): 0, 1, 3, 4.
    np.testing.assert_array_equal(Resize(1, 4, interpolation=0, image_in="x").forward(RAMP[:1], {}), [[0, 1, 3, 4]])


def test_resize_keeps_dtype_and_channels_and_rounds_integers_half_up() -> None:
    out = Resize(1, 4, image_in="x").forward(np.array([[0, 10]], np.uint8), {})
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [[0, 3, 8, 10]])  # 2.5 -> 3 and 7.5 -> 8, as OpenCV's fixed point gives
    rgb = np.stack([RAMP, RAMP + 100, RAMP + 200], axis=-1).astype(np.uint8)
    small = Resize(2, 3, image_in="x").forward(rgb, {})
    assert small.shape == (2, 3, 3) and small.dtype == np.uint8
    np.testing.assert_array_equal(small[..., 1], np.floor(RAMP_HALF + 100.5))
    assert Resize(2, 3, image_in="x").forward(RAMP[..., None], {}).shape == (2, 3, 1)  # cv2 would drop the axis
    same = Resize(4, 6, image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(same, RAMP)
    assert not np.shares_memory(same, RAMP)


def test_resize_moves_masks_with_nearest_neighbour() -> None:
    op = Resize(2, 3, image_in="x", mask_in="m", masks_in="ms", image_out="y")
    image, mask, masks = op.forward([RAMP, RAMP.astype(np.int64), [RAMP, 2 * RAMP]], {})
    np.testing.assert_array_equal(image, RAMP_HALF)
    np.testing.assert_array_equal(mask, RAMP_HALF_NEAREST)  # labels are copied, never averaged
    assert mask.dtype == np.int64
    assert isinstance(masks, list)
    np.testing.assert_array_equal(masks[1], 2 * RAMP_HALF_NEAREST)
    stacked = op.forward([RAMP, RAMP, np.stack([RAMP, RAMP])], {})[2]
    assert isinstance(stacked, np.ndarray) and stacked.shape == (2, 2, 3)
    assert op.outputs == ["y", "m", "ms"]


@pytest.mark.parametrize("op, shape, expected", [
    (LongestMaxSize(max_size=3, image_in="x"), (4, 6), (2, 3)),
    (SmallestMaxSize(max_size=2, image_in="x"), (4, 6), (2, 3)),
    (LongestMaxSize(max_size=3, image_in="x"), (5, 7), (2, 3)),  # 5 * 3 / 7 = 2.14
    (SmallestMaxSize(max_size=2, image_in="x"), (5, 7), (2, 3)),  # 7 * 2 / 5 = 2.8
    (LongestMaxSize(max_size=4, image_in="x"), (5, 8), (2, 4)),  # 2.5 rounds half to even, as Python's round
    (LongestMaxSize(max_size=4, image_in="x"), (3, 8), (2, 4)),  # 1.5 -> 2
    (SmallestMaxSize(max_size=6, image_in="x"), (6, 4), (9, 6)),  # upscaling
    (LongestMaxSize(max_size=2, image_in="x"), (1, 40), (1, 2)),  # a side never shrinks to 0
])
def test_max_size_ops_keep_the_aspect_ratio(op: Any, shape: tuple[int, int], expected: tuple[int, int]) -> None:
    assert op.forward(np.zeros(shape, np.float32), {}).shape == expected


def test_max_size_ops_resize_like_resize() -> None:
    np.testing.assert_array_equal(LongestMaxSize(3, image_in="x").forward(RAMP, {}), RAMP_HALF)
    image, mask = SmallestMaxSize(2, image_in="x", mask_in="m").forward([RAMP, RAMP], {})
    np.testing.assert_array_equal(image, RAMP_HALF)
    np.testing.assert_array_equal(mask, RAMP_HALF_NEAREST)


def test_random_scale_draws_its_factor_from_the_generator() -> None:
    op = RandomScale(scale_limit=0.5, image_in="x", mask_in="m")
    sizes = set()
    for seed in range(6):
        factor = np.random.default_rng(seed).uniform(0.5, 1.5)
        size = int(4 * factor), int(6 * factor)  # truncated, as albumentations does
        image, mask = op.forward([RAMP, RAMP], _rng(seed))
        np.testing.assert_array_equal(image, Resize(*size, image_in="x").forward(RAMP, {}))
        np.testing.assert_array_equal(mask, Resize(*size, interpolation=0, image_in="x").forward(RAMP, {}))
        sizes.add(size)
    assert len(sizes) > 1
    # A pair is offset by 1 too: (-0.5, -0.5) always halves.
    np.testing.assert_array_equal(RandomScale((-0.5, -0.5), image_in="x").forward(RAMP, _rng(0)), RAMP_HALF)
    with pytest.raises(ValueError, match=r"RandomScale drew the factor 0\.1.*4x6 input \['x'\] to 0x0"):
        RandomScale((-0.9, -0.9), image_in="x").forward(RAMP, {})


def test_crop_cuts_the_region_from_image_and_mask() -> None:
    image, mask = Crop(x_min=1, y_min=1, x_max=4, y_max=3, image_in="x", mask_in="m").forward([RAMP, RAMP * 2], {})
    np.testing.assert_array_equal(image, [[7, 8, 9], [13, 14, 15]])
    np.testing.assert_array_equal(mask, [[14, 16, 18], [26, 28, 30]])
    assert image.dtype == np.float32 and not np.shares_memory(image, RAMP)
    with pytest.raises(ValueError, match=r"reaches past the 4x6 input \['x'\].*PadIfNeeded\(min_height=1024"):
        Crop(image_in="x").forward(RAMP, {})  # the default region is 1024x1024


@pytest.mark.parametrize("kwargs, match", [({"x_min": 3, "x_max": 3}, "x_min < x_max and y_min < y_max"),
                                           ({"y_min": -1}, "Crop y_min must be a non-negative int"),
                                           ({"x_max": 2.5}, "Crop x_max must be a non-negative int")])
def test_crop_argument_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Crop(image_in="x", **kwargs)


def test_random_sized_crop_windows_are_uniform_and_aligned() -> None:
    # Crop height 2, width int(2 * 1.5) = 3, output 2x3: the window comes out unchanged.
    op = RandomSizedCrop((2, 2), height=2, width=3, w2h_ratio=1.5, image_in="x", mask_in="m")
    corners = set()
    for seed in range(60):
        image, mask = op.forward([RAMP, RAMP * 10], _rng(seed))
        top, left = divmod(int(image[0, 0]), 6)
        np.testing.assert_array_equal(image, RAMP[top:top + 2, left:left + 3])
        np.testing.assert_array_equal(mask, image * 10)
        corners.add((top, left))
    assert corners == {(top, left) for top in range(3) for left in range(4)}
    # The whole 4x6 image as the window, resized to 2x3: image linear, mask nearest.
    image, mask = RandomSizedCrop((4, 4), 2, 3, w2h_ratio=1.5, image_in="x", mask_in="m").forward([RAMP, RAMP], {})
    np.testing.assert_array_equal(image, RAMP_HALF)
    np.testing.assert_array_equal(mask, RAMP_HALF_NEAREST)


def test_random_sized_crop_draws_its_height_from_the_range() -> None:
    heights = {RandomSizedCrop((1, 3), 5, 5, image_in="x").forward(RAMP, _rng(seed)).shape for seed in range(30)}
    assert heights == {(5, 5)}  # always resized to the output size
    op = RandomSizedCrop((1, 3), 8, 8, interpolation=0, image_in="x")
    distinct = {len(np.unique(op.forward(RAMP, _rng(seed)))) for seed in range(40)}
    assert distinct == {1, 4, 9}  # a 1x1, 2x2 or 3x3 window, blown up by nearest neighbour
    with pytest.raises(ValueError, match=r"drew a 5x5 crop .*does not fit the 4x6 input"):
        RandomSizedCrop((5, 5), 2, 2, image_in="x").forward(RAMP, {})


def test_random_resized_crop_with_a_fixed_window() -> None:
    # Area 24 and ratio 1.5 give round(sqrt(36)) = 6 by round(sqrt(16)) = 4: the whole image.
    op = RandomResizedCrop(2, 3, scale=(1.0, 1.0), ratio=(1.5, 1.5), image_in="x", mask_in="m")
    image, mask = op.forward([RAMP, RAMP], _rng(0))
    np.testing.assert_array_equal(image, RAMP_HALF)
    np.testing.assert_array_equal(mask, RAMP_HALF_NEAREST)
    # Ratio 1 needs a 5x5 window (round(sqrt(24))), which never fits: the fallback is the centred 4x4 square.
    square = RandomResizedCrop(4, 4, scale=(1.0, 1.0), ratio=(1.0, 1.0), image_in="x").forward(RAMP, _rng(0))
    np.testing.assert_array_equal(square, RAMP[:, 1:5])


def test_random_resized_crop_follows_the_torchvision_recipe() -> None:
    image = np.arange(64, dtype=np.float32).reshape(8, 8)
    op = RandomResizedCrop(5, 5, scale=(0.25, 0.5), ratio=(0.5, 2.0), interpolation=0, image_in="x", mask_in="m")
    for seed in range(10):
        out, mask = op.forward([image, image * 10], _rng(seed))
        rng = np.random.default_rng(seed)
        while True:  # the recipe, written out: area fraction, log-uniform ratio, rounded sides, uniform position
            area = rng.uniform(0.25, 0.5) * 64
            ratio = math.exp(rng.uniform(math.log(0.5), math.log(2.0)))
            w, h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if 0 < w <= 8 and 0 < h <= 8:
                top, left = rng.integers(0, 8 - h + 1), rng.integers(0, 8 - w + 1)
                break
        window = image[top:top + h, left:left + w]
        expected = window[(np.arange(5) * h) // 5][:, (np.arange(5) * w) // 5]  # nearest: floor(i * in / out)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(mask, out * 10)


def test_flip_picks_one_of_three_mirrors() -> None:
    mirrors = {"both": [[6, 5, 4], [3, 2, 1]], "vertical": [[4, 5, 6], [1, 2, 3]],
               "horizontal": [[3, 2, 1], [6, 5, 4]]}
    seen = set()
    op = Flip(image_in="x", mask_in="m")
    for seed in range(30):
        choice = ("both", "vertical", "horizontal")[np.random.default_rng(seed).integers(0, 3)]
        image, mask = op.forward([IMAGE, -IMAGE], _rng(seed))
        np.testing.assert_array_equal(image, mirrors[choice])
        np.testing.assert_array_equal(mask, -image)
        assert image.flags["C_CONTIGUOUS"]
        seen.add(choice)
    assert seen == set(mirrors)


def test_random_rotate90_turns_counter_clockwise() -> None:
    turns = {0: IMAGE, 1: [[3, 6], [2, 5], [1, 4]], 2: [[6, 5, 4], [3, 2, 1]], 3: [[4, 1], [5, 2], [6, 3]]}
    seen = set()
    op = RandomRotate90(image_in="x", masks_in="ms")
    for seed in range(30):
        k = int(np.random.default_rng(seed).integers(0, 4))
        image, masks = op.forward([IMAGE, np.stack([IMAGE, IMAGE + 1])], _rng(seed))
        np.testing.assert_array_equal(image, turns[k])
        np.testing.assert_array_equal(masks[1], image + 1)
        assert image.flags["C_CONTIGUOUS"] and not np.shares_memory(image, IMAGE)  # a copy even for 0 turns
        seen.add(k)
    assert seen == set(turns)


def test_transpose_swaps_rows_and_columns_only() -> None:
    np.testing.assert_array_equal(Transpose(image_in="x").forward(IMAGE, {}), [[1, 4], [2, 5], [3, 6]])
    rgb = np.arange(12, dtype=np.uint8).reshape(2, 3, 2)
    image, mask = Transpose(image_in="x", mask_in="m").forward([rgb, IMAGE], {})
    assert image.shape == (3, 2, 2) and image.dtype == np.uint8 and image.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(image[2, 1], rgb[1, 2])  # channels are not moved
    np.testing.assert_array_equal(mask, IMAGE.T)


def test_non_random_ops_are_not_marked_random() -> None:
    assert not any(op.is_random for op in (Resize, LongestMaxSize, SmallestMaxSize, Crop, Transpose))
    assert all(op.is_random for op in (RandomScale, RandomSizedCrop, RandomResizedCrop, Flip, RandomRotate90))


@pytest.mark.parametrize("build, match", [
    (lambda: Resize(0, 3, image_in="x"), "Resize height must be a positive int, got 0"),
    (lambda: Resize(2, 3, interpolation=2, image_in="x"), r"Resize interpolation must be 0 \(cv2.INTER_NEAREST\) or 1"),
    (lambda: LongestMaxSize(interpolation=3, image_in="x"), "not implement OpenCV's cubic, area or Lanczos"),
    (lambda: SmallestMaxSize(max_size=-1, image_in="x"), "SmallestMaxSize max_size must be a positive int"),
    (lambda: LongestMaxSize(image_in="x", bbox_in="b"), "LongestMaxSize moves bounding boxes given bbox_in, bbox_"),
    (lambda: RandomScale(1.0, image_in="x"), r"scale factors \[0, 2\], but they must be positive"),
    (lambda: RandomScale((0.2, None), image_in="x"), r"RandomScale scale_limit must be a number a .*pair of numbers"),
    (lambda: RandomSizedCrop((3, 2), 4, 4, image_in="x"), r"min_max_height must be a pair of positive ints"),
    (lambda: RandomSizedCrop((1, 2), 4, 4, w2h_ratio=0, image_in="x"), "w2h_ratio must be a positive number"),
    (lambda: RandomResizedCrop(4, 4, scale=(0.5, -0.1), image_in="x"), "RandomResizedCrop scale must be a pair"),
    (lambda: RandomResizedCrop(4, 4, ratio=(0, 1), image_in="x"), "RandomResizedCrop ratio must be a pair"),
    (lambda: Flip(), "needs at least one of image_in, mask_in or masks_in"),
])
def test_argument_errors(build: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


def test_ranges_given_high_first_are_the_same_ranges() -> None:
    """albumentations' to_tuple (through which FastEstimator's ops take their ranges) sorts a pair, and its uniform
    draws take either order: a range given high-first is the same range."""
    assert RandomScale((0.2, -0.2), image_in="x").scale_limit == RandomScale((-0.2, 0.2), image_in="x").scale_limit
    assert Rotate(limit=(30, -30), image_in="x").limit == (-30.0, 30.0)
    ssr = ShiftScaleRotate(shift_limit=(0.1, -0.1), rotate_limit=(10, 5), image_in="x")
    assert (ssr.shift_limit, ssr.rotate_limit) == ((-0.1, 0.1), (5.0, 10.0))
    assert Affine(rotate=(30, -30), image_in="x").rotate == (-30.0, 30.0)
    crop = RandomResizedCrop(5, 5, scale=(1.0, 0.5), ratio=(4 / 3, 3 / 4), image_in="x")
    assert crop.scale == (0.5, 1.0) and crop.ratio == (3 / 4, 4 / 3)
    assert GridDistortion(distort_limit=(0.3, 0.1), image_in="x").distort_limit == (0.1, 0.3)


def test_max_size_lists_draw_one_size_per_sample_from_the_generator() -> None:
    """albumentations draws one of a list of sizes per sample (FastEstimator passes the list on); the op is then
    random and its draw comes from the sample's generator."""
    image = np.zeros((8, 4), np.float32)
    op = LongestMaxSize(max_size=[4, 6, 10], image_in="x")
    assert op.is_random and not LongestMaxSize(max_size=4, image_in="x").is_random
    sizes = {op.forward([image], {"rng": np.random.default_rng(seed)})[0].shape for seed in range(30)}
    assert sizes == {(4, 2), (6, 3), (10, 5)}
    same = [SmallestMaxSize([3, 5], image_in="x").forward([image], {"rng": np.random.default_rng(7)})[0].shape
            for _ in range(2)]
    assert same[0] == same[1] and same[0][1] in (3, 5)
    with pytest.raises(ValueError, match="non-empty list"):
        SmallestMaxSize([], image_in="x")
    with pytest.raises(ValueError, match="max_size must be a positive int"):
        LongestMaxSize([4, 0], image_in="x")
