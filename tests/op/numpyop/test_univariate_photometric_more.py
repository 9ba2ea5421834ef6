"""HueSaturationValue, ColorJitter, ISONoise, ImageCompression, MotionBlur and CLAHE: hand-computed values for given
parameters (OpenCV's HSV units, line kernels, CLAHE tables), invariants (identity at neutral strength, constant
images, shapes and dtypes), parameter ranges, errors, and exact per-sample draws in a Pipeline (threads, resume)."""

from __future__ import annotations

import colorsys
import warnings
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate._drawing import add_weighted
from fe_ray.op.numpyop.univariate.clahe import CLAHE, clahe_gray, lab8_to_rgb, rgb_to_lab8
from fe_ray.op.numpyop.univariate.compression import ImageCompression, ImageCompressionType
from fe_ray.op.numpyop.univariate.hsv import ColorJitter, HueSaturationValue, hsv_to_rgb, rgb_to_hsv
from fe_ray.op.numpyop.univariate.motion_blur import MotionBlur, filter2d, line_points, motion_kernel
from fe_ray.op.numpyop.univariate.noise import ISONoise, hls_to_rgb, rgb_to_hls
from fe_ray.pipeline import Pipeline
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {RNG_KEY: np.random.default_rng(seed)}


def _u8(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.uint8)


def _smooth(size: int = 32) -> np.ndarray:
    rows, cols = np.mgrid[0:size, 0:size]
    return np.stack([rows * 8, cols * 8, (rows + cols) * 4], axis=-1).astype(np.uint8)


RED, GREEN, BLUE, YELLOW = [255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]


# ------------------------------------------------------------------ HSV conversions
def test_uint8_hsv_uses_opencv_units() -> None:
    hsv = rgb_to_hsv(_u8([[RED, GREEN, BLUE, YELLOW, [128, 128, 128]]]))
    np.testing.assert_array_equal(hsv, [[[0, 255, 255], [60, 255, 255], [120, 255, 255], [30, 255, 255],
                                         [0, 0, 128]]])
    np.testing.assert_array_equal(hsv_to_rgb(hsv), [[RED, GREEN, BLUE, YELLOW, [128] * 3]])


def test_float_hsv_and_hls_agree_with_colorsys() -> None:
    image = np.random.default_rng(0).random((6, 5, 3), dtype=np.float32)
    hsv, hls = rgb_to_hsv(image), rgb_to_hls(image)
    for pixel, ours_hsv, ours_hls in zip(image.reshape(-1, 3), hsv.reshape(-1, 3), hls.reshape(-1, 3)):
        h, s, v = colorsys.rgb_to_hsv(*pixel)
        np.testing.assert_allclose(ours_hsv, [h * 360, s, v], atol=1e-4)
        h, lum, s = colorsys.rgb_to_hls(*pixel)
        np.testing.assert_allclose(ours_hls, [h * 360, lum, s], atol=1e-4)
    np.testing.assert_allclose(hsv_to_rgb(hsv), image, atol=1e-6)
    np.testing.assert_allclose(hls_to_rgb(hls), image, atol=1e-6)


# ------------------------------------------------------------------ HueSaturationValue
def test_hue_shift_turns_pure_red() -> None:
    op = HueSaturationValue("x", "x")
    red = _u8([[RED]])
    np.testing.assert_array_equal(op.apply(red, (30.0, 0.0, 0.0)), [[YELLOW]])  # 30 OpenCV units = 60 degrees
    np.testing.assert_array_equal(op.apply(red, (-30.0, 0.0, 0.0)), [[[255, 0, 255]]])  # wraps to magenta
    np.testing.assert_array_equal(op.apply(red, (60.7, 0.0, 0.0)), [[GREEN]])  # shifted hue truncated to 60
    np.testing.assert_allclose(op.apply(np.array([[RED]], np.float32) / 255, (120.0, 0.0, 0.0)), [[[0, 1, 0]]],
                               atol=1e-6)  # float images: hue in degrees


def test_saturation_and_value_shifts() -> None:
    op = HueSaturationValue("x", "x")
    np.testing.assert_array_equal(op.apply(_u8([[[200, 100, 50]]]), (0.0, -255.0, 0.0)), [[[200] * 3]])
    # (100, 50, 50): value 100 -> 120, saturation round(50 * 255 / 100) = 128 kept: G = B = 120 * 127 / 255.
    np.testing.assert_array_equal(op.apply(_u8([[[100, 50, 50]]]), (0.0, 0.0, 20.0)), [[[120, 60, 60]]])
    np.testing.assert_array_equal(op.apply(_u8([[[250, 10, 10]]]), (0.0, 0.0, 20.0)), [[[255, 10, 10]]])
    image = np.random.default_rng(1).random((4, 4, 3), dtype=np.float32)
    gray = op.apply(image, (0.0, -1.0, 0.0))  # saturation 0: every channel becomes the value (max channel)
    np.testing.assert_allclose(gray, np.repeat(image.max(axis=-1, keepdims=True), 3, axis=-1), atol=1e-6)
    assert gray.dtype == np.float32


def test_hsv_identity_gray_images_and_shared_params() -> None:
    op = HueSaturationValue("x", "x")
    image = np.random.default_rng(2).integers(0, 256, (5, 4, 3), dtype=np.uint8)
    assert op.apply(image, (0.0, 0.0, 0.0)) is image
    gray = _u8([[10, 250], [0, 100]])
    np.testing.assert_array_equal(op.apply(gray, (0.0, 0.0, 10.0)), [[20, 255], [10, 110]])
    with pytest.warns(UserWarning, match="only the value"):
        np.testing.assert_array_equal(op.apply(gray[..., None], (5.0, 0.0, -20.0)), [[[0], [230]], [[0], [80]]])
    first, second = op.forward([image, image.copy()], _state(3))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, image)


def test_hsv_param_ranges_and_errors() -> None:
    op = HueSaturationValue("x", "x", hue_shift_limit=5, sat_shift_limit=(10, 20), val_shift_limit=0)
    assert op.hue_shift_limit == (-5.0, 5.0) and op.sat_shift_limit == (10.0, 20.0)
    draws = np.array([op.get_params(None, _state(seed)) for seed in range(100)])  # type: ignore[arg-type]
    assert -5 <= draws[:, 0].min() < -4 and 4 < draws[:, 0].max() <= 5
    assert 10 <= draws[:, 1].min() and draws[:, 1].max() <= 20 and not draws[:, 2].any()
    with pytest.raises(ValueError, match="hue_shift_limit"):
        HueSaturationValue("x", "x", hue_shift_limit="a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="float64"):
        op.apply(np.zeros((2, 2, 3)), (1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="RGB images"):
        op.apply(np.zeros((2, 2, 4), np.uint8), (1.0, 0.0, 0.0))


# ------------------------------------------------------------------ ColorJitter
def _jitter(image: np.ndarray, factors: tuple[float, float, float, float], order: tuple[int, ...] = (0, 1, 2, 3)
            ) -> np.ndarray:
    return ColorJitter("x", "x").apply(image, (factors, np.array(order)))


def test_color_jitter_single_adjustments() -> None:
    image = np.random.default_rng(4).integers(0, 256, (5, 6, 3), dtype=np.uint8)
    np.testing.assert_array_equal(_jitter(image, (1, 1, 1, 0)), image)
    np.testing.assert_array_equal(_jitter(_u8([[[200, 101, 3]]]), (0.5, 1, 1, 0)), [[[100, 50, 1]]])
    # Saturation 0: OpenCV's gray of pure red, round(0.299 * 255) = 76 (fixed point), in every channel.
    np.testing.assert_array_equal(_jitter(_u8([[RED]]), (1, 1, 0, 0)), [[[76] * 3]])
    # Contrast 0: every value becomes the rounded mean gray (76 and 150 average to 113).
    np.testing.assert_array_equal(_jitter(_u8([[RED, GREEN]]), (1, 0, 1, 0)), [[[113] * 3] * 2])
    np.testing.assert_array_equal(_jitter(_u8([[RED]]), (1, 1, 1, 0.5)), [[[0, 255, 255]]])  # half a turn: cyan
    np.testing.assert_allclose(_jitter(np.array([[RED]], np.float32) / 255, (1, 1, 1, 1 / 3)), [[[0, 1, 0]]],
                               atol=1e-5)
    np.testing.assert_allclose(_jitter(np.full((2, 2, 3), 0.8, np.float32), (1.5, 1, 1, 0)), np.ones((2, 2, 3)))


def test_color_jitter_order_matters_and_gray_images() -> None:
    image = _u8([[[200, 40, 10], [20, 90, 160]]])
    factors = (1.6, 0.5, 1.8, 0.1)
    assert not np.array_equal(_jitter(image, factors, (0, 1, 2, 3)), _jitter(image, factors, (3, 2, 1, 0)))
    gray = _u8([[10, 100], [40, 50]])
    np.testing.assert_array_equal(_jitter(gray, (2.0, 1, 0.0, 0.4)), gray * 2)  # saturation and hue skip gray


def test_color_jitter_ranges_draws_and_errors() -> None:
    op = ColorJitter("x", "x", brightness=1.5, contrast=(0.5, 0.7), saturation=0, hue=0.1)
    assert op.brightness == (0.0, 2.5) and op.contrast == (0.5, 0.7) and op.saturation == (1.0, 1.0)
    assert op.hue == (-0.1, 0.1)
    orders = set()
    for seed in range(60):
        factors, order = op.get_params(None, _state(seed))  # type: ignore[arg-type]
        assert 0 <= factors[0] <= 2.5 and 0.5 <= factors[1] <= 0.7 and factors[2] == 1 and abs(factors[3]) <= 0.1
        orders.add(tuple(order))
    assert len(orders) > 10 and all(sorted(order) == [0, 1, 2, 3] for order in orders)
    for kwargs in ({"brightness": -0.1}, {"contrast": (0.9, 0.5)}, {"hue": 0.6}, {"hue": (-0.7, 0.1)},
                   {"saturation": "high"}):
        with pytest.raises(ValueError):
            ColorJitter("x", "x", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="float64"):
        op.apply(np.zeros((2, 2, 3)), ((1.0, 1.0, 1.0, 0.0), np.arange(4)))
    with pytest.raises(TypeError, match="hue=0"):  # OpenCV, under FastEstimator, has no uint16 HSV either
        op.apply(np.zeros((2, 2, 3), np.uint16), ((1.0, 1.0, 1.0, 0.05), np.arange(4)))


def test_color_jitter_uint16_values_as_opencv_gives_them() -> None:
    """uint16 goes as albumentations takes it: brightness in float64 (90 * 0.7 = 62.99... truncates to 62, float32
    would give 63), gray by OpenCV's 15-bit fixed point, saturation by cv2.addWeighted; hue only for gray images."""
    np.testing.assert_array_equal(_jitter(np.array([[90, 1000]], np.uint16), (0.7, 1, 1, 0.3)), [[62, 700]])
    pixel = np.array([[[60000, 20000, 1000]]], np.uint16)
    np.testing.assert_array_equal(_jitter(pixel, (1, 1, 0, 0)), [[[29795] * 3]])  # OpenCV's gray, 15-bit weights
    np.testing.assert_array_equal(_jitter(pixel, (1, 0, 1, 0)), [[[29795] * 3]])  # contrast 0: the rounded mean
    np.testing.assert_array_equal(_jitter(pixel, (1.2, 1, 1, 0)), [[[65535, 24000, 1200]]])  # clipped at 65535
    # Saturation 1.5: fma(x, 1.5, gray * -0.5), rounded half to even: 60000 * 1.5 - 14897.5 = 75102.5 -> 65535.
    np.testing.assert_array_equal(_jitter(pixel, (1, 1, 1.5, 0)), [[[65535, 15102, 0]]])


def test_add_weighted_is_opencvs_fused_multiply_add() -> None:
    """cv2.addWeighted's vector code rounds fma(a, alpha, b * beta) once (checked against OpenCV 4.11): two
    roundings, a * alpha + b * beta in float32, give one level less for these pixels."""
    got = add_weighted(np.array([124, 215, 165], np.uint8), 1.7, np.array([249, 190, 180], np.uint8), 1 - 1.7)
    np.testing.assert_array_equal(got, [37, 233, 155])
    got = add_weighted(np.array([52295, 55248, 17490], np.uint16), 1.7, np.array([51690, 45193, 33295], np.uint16),
                       1 - 1.7)
    np.testing.assert_array_equal(got, [52719, 62287, 6427])
    assert got.dtype == np.uint16


# ------------------------------------------------------------------ ISONoise
def test_iso_noise_constant_gray_and_white_stay() -> None:
    op = ISONoise("x", "x", color_shift=(0.05, 0.05), intensity=(0.5, 0.5))
    for level in (0, 128, 255):
        image = np.full((6, 5, 3), level, np.uint8)
        # A constant image has no lightness spread (no Poisson noise), and gray has no hue to shift.
        np.testing.assert_array_equal(op.forward(image, _state(1)), image)


def test_iso_noise_zero_intensity_is_near_identity_and_noise_grows() -> None:
    image = np.random.default_rng(5).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    op = ISONoise("x", "x")
    quiet = op.apply(image, (0.05, 0.0, 7))
    assert np.abs(quiet.astype(int) - image).max() <= 1  # only the float round trip's truncation
    weak, strong = op.apply(image, (0.01, 0.1, 7)), op.apply(image, (0.05, 0.5, 7))
    assert weak.dtype == np.uint8 and weak.shape == image.shape
    assert np.abs(strong.astype(int) - image).mean() > np.abs(weak.astype(int) - image).mean() > 0
    # Lightness noise only brightens (l + n/255 * (1 - l) with n >= 0): no hue noise, summed values never drop.
    brightened = op.apply(image, (0.0, 0.5, 7)).astype(int)
    assert (brightened.sum(axis=-1) >= image.astype(int).sum(axis=-1) - 3).all()


def test_iso_noise_shared_seed_ranges_and_errors() -> None:
    op = ISONoise("x", "x")
    image = np.random.default_rng(6).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    first, second = op.forward([image, image.copy()], _state(2))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(op.forward(image, _state(2)), first)
    for seed in range(30):
        shift, intensity, _ = op.get_params(image, _state(seed))
        assert 0.01 <= shift <= 0.05 and 0.1 <= intensity <= 0.5
    with pytest.raises(TypeError, match="uint8"):
        op.apply(image.astype(np.float32) / 255, (0.01, 0.1, 0))
    with pytest.raises(ValueError, match="3"):
        op.apply(image[..., 0], (0.01, 0.1, 0))
    with pytest.raises(ValueError, match="intensity"):
        ISONoise("x", "x", intensity=(0.5, -1))


# ------------------------------------------------------------------ ImageCompression
def test_image_compression_quality_100_is_near_identity() -> None:
    image = _smooth()
    for kind in ImageCompressionType:
        out = ImageCompression("x", "x", compression_type=kind).apply(image, 100)
        assert out.dtype == np.uint8 and out.shape == image.shape
        assert np.abs(out.astype(int) - image).mean() < 1.5
    gray = image[..., :1]
    out = ImageCompression("x", "x").apply(gray, 100)
    assert out.shape == gray.shape and np.abs(out.astype(int) - gray).max() <= 1
    red = np.zeros((16, 16, 3), np.uint8)
    red[..., 0] = 255  # channel order survives the codec: red stays red
    assert np.abs(ImageCompression("x", "x").apply(red, 90).astype(int) - red).max() <= 2


def test_image_compression_low_quality_loses_more_and_floats() -> None:
    image = np.random.default_rng(7).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    op = ImageCompression("x", "x")
    errors = [np.abs(op.apply(image, quality).astype(int) - image).mean() for quality in (5, 95)]
    assert errors[0] > errors[1]
    floats = _smooth().astype(np.float32) / 255
    out = op.apply(floats, 100)
    assert out.dtype == np.float32 and 0 <= out.min() and out.max() <= 1
    np.testing.assert_allclose(out * 255, np.rint(out * 255), atol=1e-3)  # back from uint8 levels
    assert np.abs(out - floats).mean() < 2 / 255
    rgba = np.dstack([_smooth(), np.full((32, 32), 200, np.uint8)])
    webp = ImageCompression("x", "x", compression_type=ImageCompression.ImageCompressionType.WEBP).apply(rgba, 90)
    assert webp.shape == rgba.shape and np.abs(webp[..., 3].astype(int) - 200).max() <= 2
    with pytest.raises(ValueError, match="channels"):
        op.apply(rgba, 90)


def test_image_compression_params_and_errors() -> None:
    op = ImageCompression("x", "x", quality_lower=10, quality_upper=12)
    draws = {op.get_params(None, _state(seed)) for seed in range(60)}  # type: ignore[arg-type]
    assert draws == {10, 11, 12}
    assert ImageCompression("x", "x", compression_type="webp").compression_type == ImageCompressionType.WEBP
    assert ImageCompression("x", "x", quality_lower=0).quality_lower == 0
    for kwargs in ({"quality_lower": 101}, {"quality_lower": 50.5}, {"quality_lower": 90, "quality_upper": 80},
                   {"quality_lower": 0, "compression_type": ImageCompressionType.WEBP}, {"compression_type": "png"}):
        with pytest.raises(ValueError):
            ImageCompression("x", "x", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="float64"):
        op.apply(np.zeros((4, 4, 3)), 50)


# ------------------------------------------------------------------ MotionBlur
def test_motion_kernel_lines_follow_opencv() -> None:
    assert line_points((0, 0), (6, 3)) == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (6, 3)]
    assert line_points((3, 4), (3, 0)) == [(3, 4), (3, 3), (3, 2), (3, 1), (3, 0)]
    assert line_points((5, 1), (0, 4)) == [(0, 4), (1, 3), (2, 3), (3, 2), (4, 2), (5, 1)]
    kernel = motion_kernel(5, (0, 2), (4, 2))
    assert kernel.dtype == np.float32 and kernel.sum() == pytest.approx(1)
    np.testing.assert_array_equal(kernel[2], np.full(5, 0.2, np.float32))
    assert not np.delete(kernel, 2, axis=0).any()


def test_motion_blur_hand_values_and_constants() -> None:
    image = np.tile(_u8([0, 30, 60, 90]), (3, 1))
    horizontal = motion_kernel(3, (0, 1), (2, 1))
    # Mirrored border without repeating the edge: x=0 averages (30, 0, 30), x=3 averages (60, 90, 60).
    np.testing.assert_array_equal(filter2d(image, horizontal), np.tile([20, 30, 60, 70], (3, 1)))
    ramp = (np.arange(16).reshape(4, 4) * 10).astype(np.float32)
    shifted = motion_kernel(3, (0, 0), (1, 0))  # taps one row up, at x-1 and x: off the kernel's centre
    np.testing.assert_allclose(filter2d(ramp, shifted)[2, 2], (ramp[1, 1] + ramp[1, 2]) / 2)
    op = MotionBlur("x", "x")
    for constant in (np.full((6, 7, 3), 77, np.uint8), np.full((6, 7), 0.25, np.float32)):
        for seed in range(5):
            kernel = op.get_params(constant, _state(seed))
            np.testing.assert_allclose(op.apply(constant, kernel), constant, atol=1e-6)


def test_motion_blur_draws_and_errors() -> None:
    op = MotionBlur("x", "x")
    assert op.blur_limit == (3, 7)
    sizes = set()
    for seed in range(80):
        kernel = op.get_params(None, _state(seed))  # type: ignore[arg-type]
        sizes.add(kernel.shape[0])
        assert kernel.shape[0] == kernel.shape[1] and kernel.sum() == pytest.approx(1, abs=1e-6)
        assert 2 <= np.count_nonzero(kernel) <= kernel.shape[0]  # a line, never a single dot
    assert sizes == {3, 5, 7}
    image = np.random.default_rng(8).integers(0, 256, (6, 6, 3), dtype=np.uint8)
    first, second = op.forward([image, image.copy()], _state(4))
    np.testing.assert_array_equal(first, second)
    for limit in (2, (3, 6), (5, 3), 7.5):
        with pytest.raises(ValueError, match="blur_limit"):
            MotionBlur("x", "x", blur_limit=limit)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int32"):
        op.apply(np.zeros((4, 4), np.int32), motion_kernel(3, (0, 0), (2, 2)))
    with pytest.raises(ValueError, match="shape"):
        op.apply(np.zeros((2, 4, 4, 3), np.uint8), motion_kernel(3, (0, 0), (2, 2)))


# ------------------------------------------------------------------ CLAHE
def test_clahe_constant_image_hand_computed() -> None:
    image = np.full((8, 8), 100, np.uint8)
    # Tiles of 16 pixels, limit max(1, int(4 * 16 / 256)) = 1: 15 clipped counts go one each to bins 0, 17, ...,
    # 238; six of them lie below 100, so level 100's table value is round((6 + 1) * 255 / 16) = 112.
    np.testing.assert_array_equal(clahe_gray(image, 4.0, (2, 2)), np.full((8, 8), 112))
    np.testing.assert_array_equal(clahe_gray(image, 0.0, (2, 2)), np.full((8, 8), 255))  # no clipping
    odd = np.full((10, 7, 1), 60, np.uint8)  # grid does not divide the image: padded tiles, still constant
    out = CLAHE("x", "x").apply(odd, 3.0)
    assert out.shape == odd.shape and len(np.unique(out)) == 1
    rgb = np.full((9, 9, 3), (200, 120, 40), np.uint8)
    out = CLAHE("x", "x", tile_grid_size=(3, 3)).apply(rgb, 2.0)
    assert (out == out[0, 0]).all()


def test_clahe_single_tile_without_clipping_is_global_equalization() -> None:
    image = np.arange(16, dtype=np.uint8).reshape(4, 4) * 3
    expected = np.rint(np.arange(1, 17) * np.float32(255 / 16)).reshape(4, 4)
    np.testing.assert_array_equal(clahe_gray(image, 0.0, (1, 1)), expected)


def test_clahe_raises_local_contrast_and_keeps_gray_rgb_gray() -> None:
    rng = np.random.default_rng(9)
    image = rng.integers(100, 130, (32, 32), dtype=np.uint8)
    out = CLAHE("x", "x").apply(image, 4.0)
    assert out.dtype == np.uint8 and out.std() > 2 * image.std()
    gray_rgb = np.repeat(image[..., None], 3, axis=-1)
    out = CLAHE("x", "x").apply(gray_rgb, 4.0).astype(int)
    assert np.abs(out - out[..., :1]).max() <= 2 and out.std() > 2 * image.std()
    colors = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    lab = rgb_to_lab8(colors)
    np.testing.assert_array_equal(rgb_to_lab8(_u8([[[255] * 3, [0] * 3]])), [[[255, 128, 128], [0, 128, 128]]])
    assert np.abs(lab8_to_rgb(lab).astype(int) - colors).mean() < 3


def test_clahe_params_and_errors() -> None:
    op = CLAHE("x", "x")
    assert op.clip_limit == (1.0, 4.0) and op.tile_grid_size == (8, 8)
    for seed in range(30):
        assert 1 <= op.get_params(None, _state(seed)) <= 4  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tile_grid_size"):
        CLAHE("x", "x", tile_grid_size=(0, 8))
    with pytest.raises(ValueError, match="clip_limit"):
        CLAHE("x", "x", clip_limit=(-1, 2))
    with pytest.raises(TypeError, match="float32"):
        op.apply(np.zeros((8, 8, 3), np.float32), 2.0)
    with pytest.raises(ValueError, match="RGB images"):
        op.apply(np.zeros((8, 8, 4), np.uint8), 2.0)


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    images = np.random.default_rng(10).integers(0, 256, (N, 8, 8, 3), dtype=np.uint8)
    return NumpyDataset({"x": images, "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [HueSaturationValue("x", "x"), ColorJitter("x", "x"), ISONoise("x", "x"),
            ImageCompression("x", "x", quality_lower=40, quality_upper=90), MotionBlur("x", "x"),
            CLAHE("x", "x", tile_grid_size=(2, 2))]


def test_pipeline_draws_are_exact_by_sample_position() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of the ops may warn on RGB uint8 images
        assert_position_seeded(_dataset, _ops, seed=13, batch_size=3)
    with Pipeline(_dataset(), batch_size=3, ops=_ops())("train", 1) as loader:
        batch = next(iter(loader))
    assert batch["x"].dtype == np.uint8 and batch["x"].shape == (3, 8, 8, 3)
