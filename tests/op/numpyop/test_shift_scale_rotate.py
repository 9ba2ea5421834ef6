"""ShiftScaleRotate: pure shifts, zooms and half turns give hand-computed pixels, the draws come from the sample's
generator in the documented order, masks stay labels, and argument errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.op.numpyop.multivariate import Rotate, ShiftScaleRotate
from fe_ray.op.numpyop.multivariate.rotate import rotation_sources, sample

RAMP = np.arange(24, dtype=np.float32).reshape(4, 6)  # pixel (r, c) holds 6 * r + c


def _fixed(shift: float = 0.0, scale: float = 0.0, angle: float = 0.0, **kwargs: Any) -> ShiftScaleRotate:
    """An op whose every range is a single value."""
    return ShiftScaleRotate(shift_limit=(shift, shift), scale_limit=(scale, scale), rotate_limit=(angle, angle),
                            image_in="x", **kwargs)


def test_zero_ranges_leave_the_image_unchanged() -> None:
    out = _fixed().forward(RAMP, {})
    np.testing.assert_array_equal(out, RAMP)
    assert out.dtype == np.float32


def test_a_pure_shift_moves_by_fractions_of_the_size() -> None:
    """dx = dy = 0.5 moves the 4x6 image 3 columns right and 2 rows down; the constant border fills with 0."""
    out = _fixed(shift=0.5, border_mode=0).forward(RAMP, {})
    np.testing.assert_array_equal(out, [[0] * 6, [0] * 6, [0, 0, 0, 0, 1, 2], [0, 0, 0, 6, 7, 8]])
    wrapped = _fixed(shift=0.5, border_mode=3).forward(RAMP, {})  # BORDER_WRAP: a cyclic shift
    np.testing.assert_array_equal(wrapped, np.roll(RAMP, (2, 3), axis=(0, 1)))


def test_a_zoom_about_the_pixel_grid_centre() -> None:
    """Scale 2 about (2.5, 1.5): output (i, j) reads input (i / 2 + 0.75, j / 2 + 1.25), inside the image, where
    bilinear interpolation of the ramp 6 r + c is exact: 3 i + j / 2 + 5.75."""
    out = _fixed(scale=1.0).forward(RAMP, {})
    rows, cols = np.mgrid[0:4, 0:6]
    np.testing.assert_allclose(out, 3 * rows + cols / 2 + 5.75, rtol=0, atol=1e-5)


def test_a_half_turn_moves_whole_pixels() -> None:
    out = _fixed(angle=180).forward(RAMP, {})
    np.testing.assert_array_equal(out, RAMP[::-1, ::-1])
    quarter = _fixed(angle=90).forward(RAMP[:4, :4], {})  # the same map as Rotate's
    np.testing.assert_array_equal(quarter, Rotate(limit=(90, 90), image_in="x").forward(RAMP[:4, :4], {}))


def test_masks_move_with_the_image_and_keep_their_labels() -> None:
    mask = (np.arange(36).reshape(6, 6) % 3).astype(np.uint8)
    image = np.tile(np.arange(6, dtype=np.float32), (6, 1))
    op = ShiftScaleRotate(shift_limit=0.1, scale_limit=0.2, rotate_limit=30, image_in="x", mask_in="m",
                          masks_in="ms")
    new_image, new_mask, new_masks = op.forward([image, mask, [mask, mask]], {"rng": np.random.default_rng(3)})
    assert new_mask.dtype == np.uint8 and set(np.unique(new_mask)) <= {0, 1, 2}
    np.testing.assert_array_equal(new_masks[1], new_mask)
    assert not np.all(np.isin(new_image, np.arange(6)))  # the image is interpolated between pixel values
    # Shifting by exactly one column keeps both aligned: the mask is sampled where the image is.
    shifted_image, shifted_mask = _fixed(shift=1 / 6, mask_in="m").forward([image, mask], {})
    np.testing.assert_array_equal(shifted_image[:, 1:], image[:, :-1])
    np.testing.assert_array_equal(shifted_mask[:, 1:], mask[:, :-1])


def test_draws_come_from_the_generator_in_documented_order() -> None:
    """Angle, then scale, then dx, then dy; the shift is dx * width, dy * height pixels."""
    op = ShiftScaleRotate(shift_limit=0.2, scale_limit=0.3, rotate_limit=40, border_mode=1, image_in="x")
    for seed in range(3):
        rng = np.random.default_rng(seed)
        angle, scale = rng.uniform(-40, 40), rng.uniform(0.7, 1.3)
        dx, dy = rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2)
        expected = sample(RAMP, rotation_sources(4, 6, angle, scale=scale, shift=(dx * 6, dy * 4)), 1, 1, None)
        np.testing.assert_array_equal(op.forward(RAMP, {"rng": np.random.default_rng(seed)}), expected)
    first, second = (op.forward(RAMP, {"rng": np.random.default_rng(seed)}) for seed in (0, 1))
    assert not np.array_equal(first, second)


def test_uint8_images_and_constant_fill_per_channel() -> None:
    rgb = np.full((4, 4, 2), 50, np.uint8)
    out = _fixed(shift=0.5, border_mode=0, value=[7, 9]).forward(rgb, {})
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out[0, 0], [7, 9])
    np.testing.assert_array_equal(out[3, 3], [50, 50])


@pytest.mark.parametrize("kwargs, match", [
    ({"scale_limit": 1.0}, r"ShiftScaleRotate scale_limit=1.0 gives scale factors \[0, 2\]"),
    ({"shift_limit": (0.2,)}, r"ShiftScaleRotate shift_limit must be a number a .*pair of numbers"),
    ({"rotate_limit": "45"}, "ShiftScaleRotate rotate_limit must be a number"),
    ({"interpolation": 4}, "ShiftScaleRotate interpolation must be 0"),
    ({"border_mode": 6}, "ShiftScaleRotate border_mode must be one of"),
    ({"keypoints_in": "k"}, "keypoints_in='k'"),
])
def test_argument_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ShiftScaleRotate(image_in="x", **kwargs)
