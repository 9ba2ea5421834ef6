"""The weather ops (RandomFog, RandomRain, RandomShadow, RandomSnow, RandomSunFlare) and their drawing helpers:
hand-computed pixels for given parameters, visible effects, dtype/shape rules, argument errors, and exact
per-sample draws in a Pipeline (threads, resume)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate._drawing import (
    add_weighted,
    disk,
    hls_to_rgb,
    line_pixels,
    polygon_mask,
    rgb_to_hls,
)
from fe_ray.op.numpyop.univariate.blur import box_blur
from fe_ray.op.numpyop.univariate.weather import RandomFog, RandomRain, RandomShadow, RandomSnow, RandomSunFlare
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {RNG_KEY: np.random.default_rng(seed)}


def _gray(value: int, shape: tuple[int, ...] = (60, 80, 3)) -> np.ndarray:
    return np.full(shape, value, dtype=np.uint8)


FACTORIES: dict[str, Callable[[], NumpyOp]] = {
    "fog": lambda: RandomFog("x", "x", fog_coef_lower=0.8),
    "rain": lambda: RandomRain("x", "x"),
    "shadow": lambda: RandomShadow("x", "x"),
    "snow": lambda: RandomSnow("x", "x", snow_point_lower=0.1, snow_point_upper=0.9),
    "sun_flare": lambda: RandomSunFlare("x", "x", src_radius=40),
}


# ------------------------------------------------------------------ drawing helpers
def test_line_pixels_thin_and_thick() -> None:
    rows, cols = line_pixels((20, 20), (5, 2), (8, 8))
    assert len(rows) == 7 and (rows[0], cols[0]) == (2, 5) and (rows[-1], cols[-1]) == (8, 8)
    assert np.all(np.diff(rows) == 1) and np.all(np.diff(cols) >= 0)
    rows, cols = line_pixels((20, 20), (10, 5), (10, 9), thickness=3)  # vertical capsule of radius 1.5
    assert set(cols.tolist()) == {9, 10, 11} and rows.min() == 4 and rows.max() == 10
    assert len(line_pixels((4, 4), (-10, -10), (-5, -5))[0]) == 0  # wholly outside: nothing


def test_disk_polygon_and_blend_arithmetic() -> None:
    rows, cols, mask = disk((10, 10), (0, 0), 2)  # type: ignore[misc]
    assert (rows, cols) == (slice(0, 3), slice(0, 3))
    np.testing.assert_array_equal(mask, [[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    assert disk((10, 10), (-5, 3), 2) is None
    triangle = polygon_mask((6, 6), np.array([[0, 0], [4, 0], [0, 4]]))
    np.testing.assert_array_equal(triangle.astype(int), [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0],
                                                         [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0] * 6])
    # cv2.addWeighted rounds half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2.
    np.testing.assert_array_equal(add_weighted(np.array([1, 3, 5], np.uint8), 0.5, np.zeros(3, np.uint8), 0.5),
                                  [0, 2, 2])


def test_box_blur_anchor_for_even_sizes() -> None:
    image = np.arange(16, dtype=np.uint8).reshape(4, 4)
    # Size 2: the window is the pixel and its upper/left neighbours, mirrored without the edge at the border.
    np.testing.assert_array_equal(box_blur(image, 2)[:2], [[3, 3, 4, 5], [3, 3, 4, 5]])
    np.testing.assert_array_equal(box_blur(image, 1), image)
    assert box_blur(image.astype(np.float32), 2).dtype == np.float32


def test_hls_conversions_match_opencv_conventions() -> None:
    primaries = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [128, 128, 128]]], dtype=np.uint8)
    # Hue in [0, 180) (degrees / 2); lightness 127.5 rounds half to even (128).
    np.testing.assert_array_equal(rgb_to_hls(primaries), [[[0, 128, 255], [60, 128, 255], [120, 128, 255],
                                                           [0, 128, 0]]])
    # Back again, lightness 128 (not 127.5) lifts the zero channels to 1, as OpenCV's 8-bit round trip does.
    np.testing.assert_array_equal(hls_to_rgb(rgb_to_hls(primaries)), [[[255, 1, 1], [1, 255, 1], [1, 1, 255],
                                                                       [128, 128, 128]]])
    image = np.random.default_rng(0).integers(0, 256, (30, 30, 3), dtype=np.uint8)
    assert np.abs(hls_to_rgb(rgb_to_hls(image)).astype(int) - image).max() <= 6  # 8-bit quantisation only


# ------------------------------------------------------------------ effects
def test_fog_brightens_a_dark_image_with_gray_circles() -> None:
    op = RandomFog("x", "x", fog_coef_lower=1.0, fog_coef_upper=1.0, alpha_coef=0.5)
    dark = _gray(0, (120, 210, 3))
    fog_coef, haze = op.get_params(dark, _state(0))
    assert fog_coef == 1.0 and len(haze) > 0
    out = op.apply(dark, (fog_coef, haze))
    assert out.mean() > 10 and np.array_equal(out[..., 0], out[..., 2])  # white haze keeps gray gray
    # No circles and a constant image: only the blur runs, which keeps it.
    np.testing.assert_array_equal(op.apply(_gray(77), (1.0, np.zeros((0, 2), np.int64))), _gray(77))


def test_fog_params_end_on_narrow_images_and_accept_gray_images() -> None:
    op = RandomFog("x", "x", fog_coef_lower=0.3, fog_coef_upper=0.3)
    _, haze = op.get_params(_gray(0, (300, 10, 3)), _state(0))  # albumentations loops forever here
    assert haze.shape[1] == 2
    gray = _gray(0, (50, 120))
    assert op.forward(gray, _state(1)).shape == gray.shape


def test_rain_draws_drops_of_the_drop_colour() -> None:
    op = RandomRain("x", "x", slant_lower=0, slant_upper=0, drop_color=(10, 200, 30), blur_value=1,
                    brightness_coefficient=1.0)
    image = _gray(0, (60, 60, 3))
    slant, length, drops = op.get_params(image, _state(3))
    assert (slant, length, len(drops)) == (0, 20, 60 * 60 // 600)
    out = op.apply(image, (slant, length, drops))
    wet = out.any(axis=-1)
    assert np.all(out[wet] == (10, 200, 30))
    for x, y in drops:  # each drop is a vertical run of drop_length + 1 pixels
        assert wet[y:y + length + 1, x].all()
    assert wet.sum() <= len(drops) * (length + 1)


def test_rain_line_blur_and_darkening_by_hand() -> None:
    op = RandomRain("x", "x", drop_color=(255, 255, 255), blur_value=1, brightness_coefficient=0.5)
    out = op.apply(_gray(0, (20, 20, 3)), (3, 6, np.array([[5, 2]])))
    rows, cols = np.nonzero(out[..., 0])
    assert (rows[0], cols[0]) == (2, 5) and (rows[-1], cols[-1]) == (8, 8) and np.all(out[rows, cols] == 127)
    np.testing.assert_array_equal(op.apply(_gray(101), (0, 20, np.zeros((0, 2), np.int64))), _gray(50))
    blurred = RandomRain("x", "x", blur_value=3, brightness_coefficient=1.0).apply(
        _gray(0, (9, 9, 3)), (0, 0, np.array([[4, 4]])))
    assert blurred[4, 4, 0] == round(200 / 9) and blurred[3:6, 3:6].min() > 0 and blurred[0, 0, 0] == 0


def test_rain_types_and_too_small_images() -> None:
    image = _gray(0, (100, 100, 3))
    _, length, drops = RandomRain("x", "x", rain_type="torrential").get_params(image, _state(0))
    assert (length, len(drops)) == (60, 100 * 100 // 500)
    with pytest.raises(ValueError, match="at least"):
        RandomRain("x", "x", drop_length=50).get_params(_gray(0, (30, 30, 3)), _state(0))


def test_shadow_darkens_only_inside_the_roi() -> None:
    op = RandomShadow("x", "x", shadow_roi=(0.0, 0.5, 1.0, 1.0), num_shadows_lower=2, num_shadows_upper=2)
    image = _gray(100)
    polygons = op.get_params(image, _state(5))
    assert len(polygons) == 2 and all(p.shape == (5, 2) and p[:, 1].min() >= 30 for p in polygons)
    out = op.apply(image, polygons)
    np.testing.assert_array_equal(out[:30], image[:30])
    changed = np.any(out != image, axis=-1)
    assert changed.any() and np.all(out[changed] == 50)  # lightness 100 halved
    assert out.mean() < image.mean()
    square = [np.array([[10, 40], [19, 40], [19, 49], [10, 49]])]
    np.testing.assert_array_equal(op.apply(image, square)[40:50, 10:20], _gray(50, (10, 10, 3)))


def test_snow_raises_lightness_under_the_threshold() -> None:
    op = RandomSnow("x", "x", snow_point_lower=0.1, snow_point_upper=0.1, brightness_coeff=2.5)
    image = np.concatenate([_gray(30, (4, 4, 3)), _gray(200, (4, 4, 3))], axis=1)
    out = op.forward(image, _state(0))
    # Threshold 0.1 * 127.5 + 85 = 97.75: lightness 30 becomes 75, lightness 200 stays.
    np.testing.assert_array_equal(out[:, :4], _gray(75, (4, 4, 3)))
    np.testing.assert_array_equal(out[:, 4:], _gray(200, (4, 4, 3)))
    dark = np.random.default_rng(2).integers(0, 60, (20, 20, 3), dtype=np.uint8)
    assert op.forward(dark, _state(0)).mean() > dark.mean() + 20


def test_sun_flare_centre_and_circles() -> None:
    op = RandomSunFlare("x", "x", src_radius=100, src_color=(250, 240, 230))
    image = _gray(0, (60, 80, 3))
    out = op.apply(image, (20, 30, []))
    np.testing.assert_array_equal(out[30, 20], (250, 240, 230))  # the smallest circle is opaque
    assert out[30, 20].sum() > out[30, 60].sum() > out[0, 79].sum() and out.mean() > image.mean()
    circles = [(0.5, (40, 10), 1, (100, 50, 0))]
    np.testing.assert_array_equal(RandomSunFlare("x", "x", src_radius=5).apply(image, (0, 0, circles))[10, 40],
                                  (50, 25, 0))
    centre_x, centre_y, drawn = op.get_params(image, _state(4))
    assert 0 <= centre_x <= 80 and 0 <= centre_y <= 30 and 6 <= len(drawn) <= 10
    assert all(0.05 <= alpha <= 0.2 and radius in (1, 8) and 200 <= colour[0] <= 250 and 190 <= colour[1] <= 240
               and 180 <= colour[2] <= 230 for alpha, _, radius, colour in drawn)


# ------------------------------------------------------------------ dtypes, shapes, shared parameters
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_dtype_shape_and_range_are_kept(name: str) -> None:
    op = FACTORIES[name]()
    image = np.random.default_rng(0).integers(0, 256, (64, 72, 3), dtype=np.uint8)
    out = op.forward(image, _state(1))
    assert out.dtype == np.uint8 and out.shape == image.shape
    floats = op.forward(image.astype(np.float32) / 255, _state(1))
    assert floats.dtype == np.float32 and floats.shape == image.shape and 0 <= floats.min() <= floats.max() <= 1
    assert np.abs(floats * 255 - out).max() <= 1  # the float path is the uint8 path, scaled
    first, second = op.forward([image, image.copy()], _state(2))
    np.testing.assert_array_equal(first, second)  # several inputs share the sample's parameters
    np.testing.assert_array_equal(op.forward(image, _state(7)), op.forward(image, _state(7)))
    with pytest.raises(TypeError, match="uint16"):
        op.forward(image.astype(np.uint16), _state(1))
    if name != "fog":
        with pytest.raises(ValueError, match="shape"):
            op.forward(image[..., 0], _state(1))


@pytest.mark.parametrize("make, text", [
    (lambda: RandomFog("x", "x", fog_coef_lower=0.9, fog_coef_upper=0.5), "0.9"),
    (lambda: RandomFog("x", "x", alpha_coef=1.5), "1.5"),
    (lambda: RandomRain("x", "x", slant_lower=-30), "-30"),
    (lambda: RandomRain("x", "x", drop_width=7), "7"),
    (lambda: RandomRain("x", "x", drop_length=101), "101"),
    (lambda: RandomRain("x", "x", drop_color=(300, 0, 0)), "300"),
    (lambda: RandomRain("x", "x", brightness_coefficient=2.0), "2.0"),
    (lambda: RandomRain("x", "x", rain_type="monsoon"), "monsoon"),
    (lambda: RandomRain("x", "x", blur_value=0), "blur_value"),
    (lambda: RandomShadow("x", "x", shadow_roi=(0.5, 0, 0.2, 1)), "0.2"),
    (lambda: RandomShadow("x", "x", shadow_roi=(0, 0, 1)), "shadow_roi"),
    (lambda: RandomShadow("x", "x", num_shadows_lower=3, num_shadows_upper=2), "3"),
    (lambda: RandomShadow("x", "x", shadow_dimension=2), "shadow_dimension"),
    (lambda: RandomSnow("x", "x", snow_point_upper=1.2), "1.2"),
    (lambda: RandomSnow("x", "x", brightness_coeff=-1), "-1"),
    (lambda: RandomSunFlare("x", "x", flare_roi=(0, 0.5, 1, 0.5)), "0.5"),
    (lambda: RandomSunFlare("x", "x", angle_lower=0.5, angle_upper=0.5), "angle_lower"),
    (lambda: RandomSunFlare("x", "x", num_flare_circles_lower=4, num_flare_circles_upper=4), "num_flare_circles"),
    (lambda: RandomSunFlare("x", "x", src_radius=-1), "src_radius"),
    (lambda: RandomSunFlare("x", "x", src_color=(1, 2)), "src_color"),
])
def test_bad_arguments_raise(make: Callable[[], NumpyOp], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        make()


def test_defaults_match_fastestimator() -> None:
    rain = RandomRain("x", "x")
    assert (rain.slant_lower, rain.slant_upper, rain.drop_length, rain.drop_width, rain.drop_color, rain.blur_value,
            rain.brightness_coefficient, rain.rain_type) == (-10, 10, 20, 1, (200, 200, 200), 7, 0.7, None)
    fog, snow, shadow = RandomFog("x", "x"), RandomSnow("x", "x"), RandomShadow("x", "x")
    assert (fog.fog_coef_lower, fog.fog_coef_upper, fog.alpha_coef) == (0.3, 1.0, 0.08)
    assert (snow.snow_point_lower, snow.snow_point_upper, snow.brightness_coeff) == (0.1, 0.3, 2.5)
    assert (shadow.shadow_roi, shadow.num_shadows_lower, shadow.num_shadows_upper, shadow.shadow_dimension) == (
        (0.0, 0.5, 1.0, 1.0), 1, 2, 5)
    flare = RandomSunFlare("x", "x", "train", None, (0, 0, 1, 0.5), 0.0, 1.0, 6, 10, 400, (255, 255, 255))
    assert (flare.flare_roi, flare.num_flare_circles_lower, flare.src_radius) == ((0, 0, 1, 0.5), 6, 400)


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    images = np.random.default_rng(7).integers(0, 120, (N, 60, 60, 3), dtype=np.uint8)
    return NumpyDataset({"x": images, "y": np.arange(N)})


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_pipeline_draws_are_exact_by_sample_position(name: str) -> None:
    assert_position_seeded(_dataset, lambda: [FACTORIES[name]()], seed=13, batch_size=2)
