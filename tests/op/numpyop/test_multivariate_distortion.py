"""Affine, ElasticTransform, GridDistortion, OpticalDistortion and RandomGridShuffle: identity at zero strength,
hand-computed maps, masks moving exactly with the image, exact tile permutations, argument errors, and draws that are a
pure function of the sample's position in a Pipeline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.multivariate import (
    Affine,
    ElasticTransform,
    GridDistortion,
    OpticalDistortion,
    RandomGridShuffle,
    Rotate,
)
from fe_ray.op.numpyop.multivariate.distortion import gaussian_blur_17
from fe_ray.op.numpyop.randomness import RNG_KEY
from tests.op.numpyop.pipeline_checks import assert_position_seeded

RAMP = np.arange(24, dtype=np.float32).reshape(4, 6)  # pixel (r, c) holds 6 * r + c
GRID = np.arange(16, dtype=np.float32).reshape(4, 4)


def _rng(seed: int) -> dict[str, Any]:
    return {"rng": np.random.default_rng(seed)}


def _image(height: int = 16, width: int = 20) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)


def _label_map(height: int = 16, width: int = 20) -> np.ndarray:
    """A mask whose value names its pixel (r * width + c), so a moved mask says where each pixel came from."""
    return np.arange(height * width, dtype=np.int64).reshape(height, width)


def _random_ops(**keys: Any) -> list[NumpyOp]:
    return [Affine(rotate=(-30, 30), scale=(0.8, 1.2), shear=(-10, 10), translate=(-0.1, 0.1), **keys),
            Affine(translate=(-3, 3), border_handling="reflect", **keys),
            ElasticTransform(alpha=8, sigma=3, alpha_affine=2, **keys),
            ElasticTransform(alpha=8, sigma=3, alpha_affine=2, approximate=True, same_dxdy=True, **keys),
            GridDistortion(num_steps=4, **keys), OpticalDistortion(distort_limit=0.8, shift_limit=2, **keys),
            RandomGridShuffle(grid=(2, 4), **keys)]


# ------------------------------------------------------------------ identity at zero strength
@pytest.mark.parametrize("op", [
    Affine(rotate=0, image_in="x"), Affine(scale=1.0, image_in="x"), Affine(scale=1, translate=0, shear=0,
                                                                             fit_output=True, image_in="x"),
    ElasticTransform(alpha=0, alpha_affine=0, image_in="x"),
    ElasticTransform(alpha=0, alpha_affine=0, approximate=True, image_in="x"),
    GridDistortion(distort_limit=0, image_in="x"), GridDistortion(num_steps=7, distort_limit=0, image_in="x"),
    OpticalDistortion(distort_limit=0, shift_limit=0, image_in="x"),
    RandomGridShuffle(grid=(1, 1), image_in="x"),
], ids=lambda op: type(op).__name__)
def test_zero_strength_returns_the_input(op: NumpyOp) -> None:
    image = _image(15, 22)
    out = op.forward(image, _rng(0))
    np.testing.assert_array_equal(out, image)
    assert out.dtype == np.uint8 and out is not image


# ------------------------------------------------------------------ Affine by hand
def test_affine_quarter_turn_is_exact_and_counter_clockwise() -> None:
    left = Affine(rotate=90, image_in="x").forward(GRID, {})
    np.testing.assert_array_equal(left, [[3, 7, 11, 15], [2, 6, 10, 14], [1, 5, 9, 13], [0, 4, 8, 12]])
    np.testing.assert_array_equal(left, Rotate(limit=(90, 90), image_in="x").forward(GRID, {}))
    assert left.dtype == np.float32


def test_affine_integer_translation_in_pixels_and_fractions() -> None:
    """translate=(2, 2) px moves content 2 right and 2 down; 0.5 of a 4x6 image is 3 right and 2 down."""
    px = Affine(translate=(2, 2), image_in="x").forward(RAMP, {})
    expected = np.zeros_like(RAMP)
    expected[2:, 2:] = RAMP[:2, :4]
    np.testing.assert_array_equal(px, expected)
    fraction = Affine(translate=0.5, fill_value=-1, image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(fraction, [[-1] * 6, [-1] * 6, [-1, -1, -1, 0, 1, 2], [-1, -1, -1, 6, 7, 8]])
    # 'reflect' is FastEstimator's OpenCV flag 1, BORDER_REPLICATE: the edge pixel repeats.
    edge = Affine(translate=(1, 1), border_handling="reflect", image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(edge, np.pad(RAMP, 1, mode="edge")[:4, :6])


def test_affine_zoom_about_the_pixel_grid_centre() -> None:
    """Scale 2 about (2.5, 1.5): output (i, j) reads input (i / 2 + 0.75, j / 2 + 1.25), where bilinear
    interpolation of the ramp 6 r + c is exact: 3 i + j / 2 + 5.75."""
    out = Affine(scale=2.0, image_in="x").forward(RAMP, {})
    rows, cols = np.mgrid[0:4, 0:6]
    np.testing.assert_allclose(out, 3 * rows + cols / 2 + 5.75, rtol=0, atol=1e-5)


def test_affine_shear_follows_albumentations_convention() -> None:
    """A single shear of 45 degrees shears y and x alike (as albumentations with scikit-image 0.21 does): first y
    loses x (y' = y - x about the centre), then x gains that y (x' = x + y'), so the forward linear part is [[0, 1],
    [-1, 1]] and the pixel-grid centre stays put (cross-checked against albumentations 1.4.1, which FE 1.7 pins)."""
    matrix = Affine(shear=45, image_in="x").matrix(5, 7, np.random.default_rng(0))
    np.testing.assert_allclose(matrix[:2, :2], [[0, 1], [-1, 1]], atol=1e-12)
    np.testing.assert_allclose(matrix @ [3, 2, 1], [3, 2, 1], atol=1e-12)


def test_affine_fit_output_holds_the_whole_turned_image() -> None:
    out = Affine(rotate=90, fit_output=True, image_in="x").forward(RAMP, {})
    np.testing.assert_array_equal(out, np.rot90(RAMP))
    tilted = Affine(rotate=45, fit_output=True, image_in="x", mask_in="m").forward([_image(10, 10), _label_map(10,
                                                                                                             10)], {})
    assert tilted[0].shape == (14, 14, 3) and tilted[1].shape == (14, 14)


def test_affine_draws_each_axis_and_keep_ratio() -> None:
    """A range draws x and y separately (a square grows unevenly); keep_ratio gives y the x draw."""
    square = np.zeros((21, 21), np.uint8)
    square[5:16, 5:16] = 1
    free = Affine(scale=(0.5, 1.5), interpolation="nearest_neighbor", image_in="x").forward(square, _rng(3))
    kept = Affine(scale=(0.5, 1.5), keep_ratio=True, interpolation="nearest_neighbor",
                  image_in="x").forward(square, _rng(3))
    rows, cols = np.nonzero(free)
    assert np.ptp(rows) != np.ptp(cols)
    rows, cols = np.nonzero(kept)
    assert np.ptp(rows) == np.ptp(cols)


def test_affine_default_is_albumentations_random_map() -> None:
    op = Affine(image_in="x")
    assert op.rotate == (-15, 15) and op.scale == (0.9, 1.1) and op.shear == (-10, 10)
    assert op.translate == (-0.1, 0.1) and not op.translate_px
    first, second = (op.forward(_image(), _rng(seed)) for seed in (1, 2))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, op.forward(_image(), _rng(1)))


# ------------------------------------------------------------------ the distortions by hand
def test_grid_distortion_stretches_cells_by_their_factors() -> None:
    """distort_limit=(0.5, 0.5): every factor is 1.5, so on 8 columns in 2 cells of 4, output pixel c of a cell
    reads 1.5 c from where the cell starts: cell 0 at 0, cell 1 at 6 (past the edge: reflect-101)."""
    row = np.arange(8, dtype=np.float32)[None].repeat(8, axis=0)
    out = GridDistortion(num_steps=2, distort_limit=(0.5, 0.5), border_mode=1, image_in="x").forward(row, {})
    np.testing.assert_allclose(out[0], [0, 1.5, 3, 4.5, 6, 7, 7, 7])  # 7.5, 9, 10.5 clamp to the edge (replicate)
    # Leftover pixels of a 10-pixel axis in 3 cells of 3 run evenly to the edge: here from 3 * 3 * 1 = 9 to 10.
    leftover = GridDistortion(num_steps=3, distort_limit=0, image_in="x")._axis(10, np.ones(4))
    np.testing.assert_array_equal(leftover, np.arange(10))


def test_optical_distortion_follows_the_radial_model() -> None:
    """k = 1 on a 5x5 image: the corner (offset (2, 2) / 5, r2 = 0.32) reads the centre plus (2, 2) * 1.4224."""
    coords = OpticalDistortion(distort_limit=(1, 1), shift_limit=0, image_in="x").get_params(5, 5, {})
    assert coords[0][2, 2] == 2 and coords[1][2, 2] == 2  # the centre stays
    np.testing.assert_allclose([coords[0][4, 4], coords[1][4, 4]], [2 + 2 * 1.4224] * 2, atol=1 / 32)
    shifted = OpticalDistortion(distort_limit=0, shift_limit=(1, 1), border_mode=0, image_in="x").forward(GRID, {})
    np.testing.assert_array_equal(shifted, np.pad(GRID, ((0, 1), (0, 1)))[1:, 1:])  # reads one pixel down-right


def test_gaussian_blur_17_matches_a_dense_convolution() -> None:
    field = np.random.default_rng(4).random((20, 23))
    taps = np.exp(-np.arange(-8, 9) ** 2 / (2 * 3.0 ** 2))
    kernel = np.outer(taps, taps) / taps.sum() ** 2
    padded = np.pad(field, 8, mode="reflect")
    dense = np.array([[np.sum(padded[r:r + 17, c:c + 17] * kernel) for c in range(23)] for r in range(20)])
    np.testing.assert_allclose(gaussian_blur_17(field, 3.0), dense, rtol=0, atol=1e-12)
    assert gaussian_blur_17(np.ones((5, 6)), 0).max() == pytest.approx(1.0)  # normalised, even with OpenCV's sigma


def test_elastic_same_dxdy_moves_along_the_diagonal() -> None:
    coords = ElasticTransform(alpha=20, sigma=2, alpha_affine=0, same_dxdy=True, image_in="x").get_params(
        12, 12, _rng(5))
    rows, cols = np.mgrid[0:12, 0:12]
    np.testing.assert_allclose(coords[0] - rows, coords[1] - cols, atol=1 / 32)
    assert np.abs(coords[0] - rows).max() > 0.5


# ------------------------------------------------------------------ masks move with the image
def _nearest_ops(**keys: Any) -> list[NumpyOp]:
    """Random ops sampling the image with nearest neighbour and filling with -1, as they sample masks."""
    fill = {"interpolation": 0, "border_mode": 0, "value": -1, "mask_value": -1}
    return [Affine(rotate=(-30, 30), scale=(0.8, 1.2), shear=(-10, 10), translate=(-0.1, 0.1),
                   interpolation="nearest_neighbor", fill_value=-1, **keys),
            Affine(translate=(-3, 3), border_handling="reflect", interpolation="nearest_neighbor", **keys),
            ElasticTransform(alpha=8, sigma=3, alpha_affine=2, **fill, **keys),
            GridDistortion(num_steps=4, **fill, **keys),
            OpticalDistortion(distort_limit=0.8, shift_limit=2, **fill, **keys),
            RandomGridShuffle(grid=(2, 4), **keys)]


@pytest.mark.parametrize("op", _nearest_ops(image_in="x", mask_in="m", masks_in="ms"), ids=lambda op: type(op).__name__)
def test_masks_move_exactly_like_the_image(op: NumpyOp) -> None:
    """With nearest-neighbour sampling the image is a lookup of the source pixels, so when its first channel is the
    label map (each value names its pixel), a mask equal to the labels must come back equal to that channel."""
    labels = _label_map()
    image = np.stack([labels, labels // 7], axis=-1)
    new_image, new_mask, new_masks = op.forward([image, labels, [labels, labels[..., None] % 3]], _rng(8))
    assert new_mask.dtype == np.int64 and set(np.unique(new_mask)) <= set(range(-1, labels.size))
    np.testing.assert_array_equal(new_image[..., 0], new_mask)
    np.testing.assert_array_equal(new_masks[0], new_mask)
    np.testing.assert_array_equal(new_masks[1][..., 0], np.where(new_mask >= 0, new_mask % 3, -1))
    assert not np.array_equal(new_mask, labels)  # something moved


def test_masks_use_nearest_while_the_image_interpolates() -> None:
    image = np.tile(np.arange(20, dtype=np.float32), (16, 1))
    mask = (_label_map() % 3).astype(np.uint8)
    ops = _random_ops(image_in="x", mask_in="m")
    for op in ops[:1] + ops[2:-1]:  # not the whole-pixel translation nor the tile shuffle: they move whole pixels
        new_image, new_mask = op.forward([image, mask], _rng(2))
        assert set(np.unique(new_mask)) <= {0, 1, 2}, type(op).__name__
        assert not np.all(np.isin(new_image, np.arange(20))), type(op).__name__


# ------------------------------------------------------------------ RandomGridShuffle
def test_grid_shuffle_permutes_whole_tiles() -> None:
    """A 7x10 image in a 2x3 grid has tiles of rows [0, 3) / [3, 7) and columns [0, 3) / [3, 6) / [6, 10): only
    tiles of equal size trade places, every tile appears once, and the mask's tiles move with the image's."""
    image, labels = _image(7, 10), _label_map(7, 10)
    rows, cols = (0, 3, 7), (0, 3, 6, 10)

    def tiles(array: np.ndarray) -> list[bytes]:
        return [array[rows[r]:rows[r + 1], cols[c]:cols[c + 1]].tobytes() for r in range(2) for c in range(3)]

    seen = set()
    for seed in range(12):
        out, mask = RandomGridShuffle(grid=(2, 3), image_in="x", mask_in="m").forward([image, labels], _rng(seed))
        assert sorted(tiles(out)) == sorted(tiles(image))
        assert sorted(tiles(mask)) == sorted(tiles(labels))
        for r in range(2):
            for c in range(3):  # the image tile came from where the mask tile says
                origin = mask[rows[r], cols[c]]
                src_r, src_c = divmod(int(origin), 10)
                np.testing.assert_array_equal(out[rows[r]:rows[r + 1], cols[c]:cols[c + 1]],
                                              image[src_r:src_r + rows[r + 1] - rows[r],
                                                    src_c:src_c + cols[c + 1] - cols[c]])
        seen.add(mask.tobytes())
    assert len(seen) > 1


# ------------------------------------------------------------------ argument errors
@pytest.mark.parametrize("make, match", [
    (lambda: Affine(rotate=(30, "10"), image_in="x"), r"Affine rotate must be .* got \(30, '10'\)"),
    (lambda: Affine(scale=0, image_in="x"), "Affine scale must be positive .* got 0"),
    (lambda: Affine(shear="5", image_in="x"), "Affine shear must be .* got '5'"),
    (lambda: Affine(translate=(1, 2.5), image_in="x"), r"must be all ints, got \(1, 2.5\)"),
    (lambda: Affine(border_handling="wrap", image_in="x"), "border_handling must be one of .* got 'wrap'"),
    (lambda: Affine(interpolation="bicubic", image_in="x"), "interpolation must be one of .* got 'bicubic'"),
    (lambda: Affine(mask_interpolation=1, image_in="x"), "mask_interpolation must be one of .* got 1"),
    (lambda: Affine(rotate_method="box", image_in="x"), "rotate_method must be one of .* got 'box'"),
    (lambda: Affine(bbox_in="b", image_in="x"), "bbox_in='b'"),
    (lambda: ElasticTransform(sigma=-1, image_in="x"), "ElasticTransform sigma must be a number >= 0, got -1"),
    (lambda: ElasticTransform(alpha="a", image_in="x"), "ElasticTransform alpha must be a number, got 'a'"),
    (lambda: ElasticTransform(interpolation=2, image_in="x"), "interpolation must be 0 .* got 2"),
    (lambda: GridDistortion(num_steps=0, image_in="x"), "GridDistortion num_steps must be a positive int, got 0"),
    (lambda: GridDistortion(distort_limit=(0.3, 0.1, 0.2), image_in="x"), r"distort_limit .* got \(0.3, 0.1, 0.2\)"),
    (lambda: OpticalDistortion(border_mode=7, image_in="x"), "OpticalDistortion border_mode must be one of .* 7"),
    (lambda: OpticalDistortion(shift_limit="1", image_in="x"), "OpticalDistortion shift_limit .* got '1'"),
    (lambda: RandomGridShuffle(grid=3, image_in="x"), "RandomGridShuffle grid must be a pair .* got 3"),
    (lambda: RandomGridShuffle(grid=(0, 2), image_in="x"), "RandomGridShuffle grid rows must be a positive int"),
    (lambda: ElasticTransform(), "needs at least one of image_in"),
])
def test_argument_errors(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_too_small_images_are_refused_when_run() -> None:
    with pytest.raises(ValueError, match=r"grid=\(3, 3\) is too fine for a 5x9 image"):
        RandomGridShuffle(image_in="x").forward(np.zeros((5, 9)), {})


def test_grid_distortion_keeps_a_side_shorter_than_num_steps() -> None:
    """No whole cell fits a side under num_steps: all its pixels are leftovers, running from 0 to the edge, so that
    side is kept (albumentations smears its first row / column over it) and the other is still distorted."""
    image = np.arange(36, dtype=np.float64).reshape(4, 9)
    op = GridDistortion(num_steps=5, distort_limit=(0.5, 0.5), border_mode=1, image_in="x")
    out = op.forward(image, {RNG_KEY: np.random.default_rng(0)})
    rows, cols = op.get_params(4, 9, {RNG_KEY: np.random.default_rng(0)})
    np.testing.assert_array_equal(rows[:, 0], np.arange(4))  # the short side: identity
    np.testing.assert_array_equal(cols[0, :2], [0.0, 1.5])  # the long side: 1 pixel cells stretched by 1.5
    assert out.shape == image.shape and not np.array_equal(out, image)
    tiny = np.arange(6, dtype=np.uint8).reshape(2, 3)
    np.testing.assert_array_equal(GridDistortion(image_in="x").forward(tiny, {RNG_KEY: np.random.default_rng(1)}),
                                  tiny)


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    return NumpyDataset({"x": np.random.default_rng(3).integers(0, 256, (N, 12, 12, 3), dtype=np.uint8),
                         "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return _random_ops(image_in="x")


def test_pipeline_draws_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=4)
