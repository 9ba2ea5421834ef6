"""Rotate: quarter turns move whole pixels, a 45-degree turn with a constant border gives hand-computed corners,
masks stay labels, the angle comes from the sample's generator, and argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from fe_ray.op.numpyop.multivariate import Rotate
from fe_ray.op.numpyop.multivariate.rotate import rotation_sources, sample

GRID = np.arange(16, dtype=np.float32).reshape(4, 4)


def test_quarter_turns_are_exact_and_counter_clockwise() -> None:
    left, = Rotate(limit=(90, 90), image_in="x").forward([GRID], {})
    np.testing.assert_array_equal(left, [[3, 7, 11, 15], [2, 6, 10, 14], [1, 5, 9, 13], [0, 4, 8, 12]])
    right, = Rotate(limit=(-90, -90), image_in="x").forward([GRID], {})
    np.testing.assert_array_equal(right, [[12, 8, 4, 0], [13, 9, 5, 1], [14, 10, 6, 2], [15, 11, 7, 3]])
    assert left.dtype == np.float32


def test_45_degrees_with_a_constant_border() -> None:
    """The corner pixel samples 0.84 px above the image: 16% of the pixel below it, 84% of the fill (0)."""
    out, = Rotate(limit=(45, 45), border_mode=0, image_in="x").forward([np.full((5, 5), 100, np.uint8)], {})
    np.testing.assert_array_equal(out, [[16, 88, 100, 88, 16], [88, 100, 100, 100, 88], [100] * 5,
                                        [88, 100, 100, 100, 88], [16, 88, 100, 88, 16]])
    assert out.dtype == np.uint8
    filled, = Rotate(limit=(45, 45), border_mode=0, value=200, image_in="x").forward(
        [np.full((5, 5), 100, np.uint8)], {})
    assert filled[0, 0] == 184  # 0.84375 * 200 + 0.15625 * 100


def test_masks_are_sampled_nearest_and_keep_their_labels() -> None:
    image = np.tile(np.arange(6, dtype=np.float32), (6, 1))
    mask = (np.arange(36).reshape(6, 6) % 3).astype(np.int64)
    new_image, new_mask = Rotate(limit=(30, 30), image_in="x", mask_in="m").forward([image, mask], {})
    assert set(np.unique(new_mask)) <= {0, 1, 2}
    assert not np.all(np.isin(new_image, np.arange(6)))  # the image is interpolated between pixel values


def test_masks_round_the_exact_source_positions_bilinear_reads_them_at_a_32nd_pixel() -> None:
    """As OpenCV's warpAffine: nearest sampling resolves positions at 1/1024 pixel (close to exact), bilinear at
    1/32; quantising the nearest positions to 1/32 moves boundary pixels of a rotated mask."""
    exact = rotation_sources(64, 64, 30.0)
    assert not np.allclose(exact[0] * 32, np.round(exact[0] * 32))  # not quantised
    rows, cols = np.mgrid[0:64, 0:64]
    disc = ((rows - 31.3) ** 2 + (cols - 30.8) ** 2 < 300).astype(np.uint8)
    image = np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    new_image, new_mask = Rotate(limit=(30, 30), border_mode=0, image_in="x", mask_in="m").forward([image, disc], {})
    nearest = np.rint(exact[0]).astype(int), np.rint(exact[1]).astype(int)
    inside = (nearest[0] >= 0) & (nearest[0] < 64) & (nearest[1] >= 0) & (nearest[1] < 64)
    np.testing.assert_array_equal(new_mask[inside], disc[nearest[0][inside], nearest[1][inside]])
    quantised = tuple(np.round(axis * 32) / 32 for axis in exact)
    np.testing.assert_array_equal(new_image, sample(image, quantised, 1, 0, None))


def test_the_angle_comes_from_the_generator() -> None:
    op = Rotate(limit=(10, 20), border_mode=1, image_in="x")
    out, = op.forward([GRID], {"rng": np.random.default_rng(5)})
    angle = np.random.default_rng(5).uniform(10, 20)
    np.testing.assert_array_equal(out, sample(GRID, rotation_sources(4, 4, angle), 1, 1, None))
    other, = op.forward([GRID], {"rng": np.random.default_rng(6)})
    assert not np.array_equal(out, other)


@pytest.mark.parametrize("kwargs, match", [({"limit": (20, 10, 5)}, r"Rotate limit must be a number a .*pair"),
                                           ({"limit": "45"}, "Rotate limit must be a number"),
                                           ({"interpolation": 2}, "not implement OpenCV's cubic"),
                                           ({"border_mode": -1}, "Rotate border_mode must be one of")])
def test_rotate_argument_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Rotate(image_in="x", **kwargs)  # type: ignore[arg-type]
