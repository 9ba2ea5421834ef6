"""Defocus, ZoomBlur, InvertImg, FromFloat, MultiplicativeNoise, RandomShapes, HistogramMatching, FDA and
PixelDistributionAdaptation: hand-computed values, identities at zero strength, invariants, argument errors,
FastEstimator 1.7's signatures, and exact per-sample draws in a Pipeline (threads, resume)."""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate.defocus import Defocus, ZoomBlur, central_zoom, defocus_kernel
from fe_ray.op.numpyop.univariate.domain_adaptation import FDA, HistogramMatching, PixelDistributionAdaptation
from fe_ray.op.numpyop.univariate.invert import FromFloat, InvertImg
from fe_ray.op.numpyop.univariate.motion_blur import MotionBlur
from fe_ray.op.numpyop.univariate.multiplicative_noise import MultiplicativeNoise
from fe_ray.op.numpyop.univariate.normalize import ToFloat
from fe_ray.op.numpyop.univariate.random_shapes import RandomShapes, _convex_polygon, _ellipse
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {RNG_KEY: np.random.default_rng(seed)}


def _image(shape: tuple[int, ...] = (12, 10, 3), seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


# ------------------------------------------------------------------ InvertImg, FromFloat
def test_invert_img_subtracts_from_the_dtype_maximum() -> None:
    image = _image()
    op = InvertImg("x", "x")
    np.testing.assert_array_equal(op.forward(image, {}), 255 - image.astype(np.int64))
    assert op.forward(image, {}).dtype == np.uint8
    floats = np.array([[0.0, 0.25, 1.0]], dtype=np.float32)
    np.testing.assert_array_equal(op.forward(floats, {}), [[1.0, 0.75, 0.0]])
    assert op.forward(floats, {}).dtype == np.float32
    np.testing.assert_array_equal(op.forward(np.array([0, 65535, 5], dtype=np.uint16), {}), [65535, 0, 65530])
    batch = np.stack([image, image[::-1]])
    np.testing.assert_array_equal(op.forward_batch(batch, {}), 255 - batch.astype(np.int64))
    with pytest.raises(TypeError, match="float64"):
        op.forward(np.zeros((2, 2)), {})


def test_from_float_inverts_to_float_and_truncates() -> None:
    image = _image((16, 16, 3))
    for dtype in (np.uint8, np.uint16):
        scaled = image.astype(dtype) * (257 if dtype == np.uint16 else 1)
        back = FromFloat("x", "x", dtype=np.dtype(dtype).name).forward(ToFloat("x", "x").forward(scaled, {}), {})
        assert back.dtype == dtype
        np.testing.assert_array_equal(back, scaled)
    values = np.array([0.0, 0.5, 1.0], dtype=np.float32)
    np.testing.assert_array_equal(FromFloat("x", "x").forward(values, {}), [0, 32767, 65535])  # 32767.5 truncated
    np.testing.assert_array_equal(FromFloat("x", "x", max_value=10, dtype="uint8").forward(values, {}), [0, 5, 10])
    assert FromFloat("x", "x").forward(values, {}).dtype == np.uint16


@pytest.mark.parametrize("make, text", [
    (lambda: FromFloat("x", "x", dtype="int8"), "int8"),
    (lambda: FromFloat("x", "x", max_value="255"), "'255'"),
])
def test_from_float_bad_arguments(make: Callable[[], NumpyOp], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        make()


def test_from_float_bad_dtype_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not-a-dtype"):
        FromFloat("x", "x", dtype="not-a-dtype")


# ------------------------------------------------------------------ MultiplicativeNoise
@pytest.mark.parametrize("per_channel, elementwise", [(False, False), (True, False), (False, True), (True, True)])
def test_multiplicative_noise_with_unit_multiplier_is_the_identity(per_channel: bool, elementwise: bool) -> None:
    op = MultiplicativeNoise("x", "x", multiplier=(1, 1), per_channel=per_channel, elementwise=elementwise)
    image = _image()
    np.testing.assert_array_equal(op.forward(image, _state(0)), image)
    floats = image.astype(np.float32) / 255
    np.testing.assert_array_equal(op.forward(floats, _state(0)), floats)


def test_multiplicative_noise_values_by_hand() -> None:
    op = MultiplicativeNoise("x", "x", multiplier=2.0)
    assert op.multiplier == (2.0, 2.0)
    np.testing.assert_array_equal(op.forward(np.array([[0, 100, 200]], dtype=np.uint8), _state(0)), [[0, 200, 255]])
    floats = np.array([0.25, 0.75], dtype=np.float32)
    np.testing.assert_array_equal(op.forward(floats, _state(0)), [0.5, 1.0])
    pixel = np.array([[[101, 101, 101]]], dtype=np.uint8)
    # Per-channel factors through the uint8 table: 50.5 and 151.5 are truncated; 202 stays.
    np.testing.assert_array_equal(op.apply(pixel, np.array([0.5, 1.5, 2.0])), [[[50, 151, 202]]])
    np.testing.assert_array_equal(op.apply(pixel, np.full((1, 1, 3), 0.5)), [[[50, 50, 50]]])


def test_multiplicative_noise_factor_shapes_and_range() -> None:
    image = _image((6, 5, 3))
    shapes = {(False, False): (1,), (True, False): (3,), (False, True): (6, 5, 1), (True, True): (6, 5, 3)}
    for (per_channel, elementwise), shape in shapes.items():
        op = MultiplicativeNoise("x", "x", multiplier=(0.5, 0.7), per_channel=per_channel, elementwise=elementwise)
        factors = op.get_params(image, _state(3))
        assert factors.shape == shape
        assert 0.5 <= factors.min() and factors.max() < 0.7
    gray = _image((6, 5))
    op = MultiplicativeNoise("x", "x", per_channel=True, elementwise=True)
    assert op.get_params(gray, _state(1)).shape == (6, 5)
    assert op.forward(gray, _state(1)).shape == (6, 5)
    with pytest.raises(ValueError, match="height and width"):
        op.forward([image, image[:3]], _state(1))


@pytest.mark.parametrize("multiplier", [(1.2, 0.8), "big", (1, 2, 3)])
def test_multiplicative_noise_bad_multiplier(multiplier: Any) -> None:
    with pytest.raises(ValueError, match="multiplier"):
        MultiplicativeNoise("x", "x", multiplier=multiplier)


# ------------------------------------------------------------------ Defocus, ZoomBlur
def test_defocus_kernel_is_a_normalised_disk() -> None:
    kernel = defocus_kernel(3, 1e-3)  # a vanishing Gaussian leaves the disk itself
    assert kernel.shape == (17, 17) and kernel.dtype == np.float32
    disk = np.zeros((17, 17), dtype=bool)
    offsets = np.arange(-8, 9)
    disk[offsets[:, None] ** 2 + offsets[None, :] ** 2 <= 9] = True
    assert disk.sum() == 29
    np.testing.assert_allclose(kernel[disk], 1 / 29, rtol=1e-6)
    assert np.all(kernel[~disk] == 0)
    smooth = defocus_kernel(9, 0.5)
    assert smooth.shape == (19, 19)
    np.testing.assert_allclose(smooth, smooth.T, atol=1e-7)
    np.testing.assert_allclose(smooth, smooth[::-1, ::-1], atol=1e-7)
    # From radius 7 on the disk comes within the Gaussian's reach of the square's edge, whose mirrored border adds up
    # to ~1.5% of mass (as in albumentations); below it the kernel sums to 1.
    assert 1.005 < smooth.sum() < 1.02 and 1.001 < defocus_kernel(7, 0.5).sum() < 1.02
    assert defocus_kernel(6, 0.5).sum() == pytest.approx(1.0, abs=1e-5)
    assert defocus_kernel(5, 0.0).sum() == pytest.approx(1.0, abs=1e-5)  # sigma 0: OpenCV's fixed 3-tap table


def test_defocus_and_zoom_blur_keep_a_constant_image() -> None:
    for op in (Defocus("x", "x", radius=(3, 6)), Defocus("x", "x", radius=2), ZoomBlur("x", "x"),
               ZoomBlur("x", "x", max_factor=(1.5, 2.0), step_factor=0.1)):
        for seed in range(3):
            constant = np.full((16, 12, 3), 100, dtype=np.uint8)
            np.testing.assert_array_equal(op.forward(constant, _state(seed)), constant)
            floats = np.full((16, 12), 0.4, dtype=np.float32)
            out = op.forward(floats, _state(seed))
            assert out.dtype == np.float32
            np.testing.assert_allclose(out, floats, rtol=1e-5)
    large = Defocus("x", "x").forward(np.full((20, 20), 0.4, dtype=np.float32), _state(5))
    np.testing.assert_allclose(large, 0.4, rtol=0.015)  # radii up to 10 add at most ~1.5% (see above)


def test_defocus_blurs_a_dot_into_its_kernel() -> None:
    op = Defocus("x", "x", radius=4, alias_blur=(0.3, 0.3))
    kernel = op.get_params(np.zeros((1, 1)), _state(0))
    dot = np.zeros((41, 41), dtype=np.float32)
    dot[20, 20] = 1.0
    out = op.apply(dot, kernel)
    np.testing.assert_allclose(out[12:29, 12:29], kernel[::-1, ::-1], atol=1e-7)  # correlation flips the kernel
    radii = {int(np.count_nonzero(op.get_params(np.zeros((1, 1)), _state(seed)) > 1e-3)) for seed in range(40)}
    assert len(radii) == 4  # radius 4 means (1, 4), both ends included


def test_zoom_blur_params_and_central_zoom_by_hand() -> None:
    op = ZoomBlur("x", "x", max_factor=(1.2, 1.2), step_factor=0.05)
    np.testing.assert_allclose(op.get_params(np.zeros((1, 1)), _state(0)), [1.0, 1.05, 1.1, 1.15])
    assert ZoomBlur("x", "x", max_factor=1.0).get_params(np.zeros((1, 1)), _state(0)).size == 0
    image = np.zeros((4, 4), dtype=np.float32)
    image[1:3, 1:3] = [[0, 4], [8, 12]]
    zoomed = central_zoom(image, 2.0)
    np.testing.assert_allclose(zoomed[0], [0, 1, 3, 4])
    np.testing.assert_allclose(zoomed[:, 0], [0, 2, 6, 8])
    np.testing.assert_array_equal(central_zoom(_image(), 1.0), _image())
    # The mean of the image and its x2 zoom (row 1: [2, 3, 5, 6], row 2: [6, 7, 9, 10]), truncated.
    out = ZoomBlur("x", "x").apply(image.astype(np.uint8), np.array([2.0]))
    assert out.dtype == np.uint8 and (out[1, 1], out[1, 2], out[2, 2]) == (1, 4, 10)
    image = _image((20, 20, 3))
    identity = ZoomBlur("x", "x", max_factor=(1, 1))
    np.testing.assert_array_equal(identity.forward(image, _state(0)), image)


@pytest.mark.parametrize("make, text", [
    (lambda: Defocus("x", "x", radius=0), "radius"),
    (lambda: Defocus("x", "x", radius=(2.5, 4)), "2.5"),
    (lambda: Defocus("x", "x", alias_blur=-1), "-1"),
    (lambda: Defocus("x", "x", alias_blur=(0.5, 0.1)), "alias_blur"),
    (lambda: ZoomBlur("x", "x", max_factor=0.5), "0.5"),
    (lambda: ZoomBlur("x", "x", step_factor=0), "step_factor"),
    (lambda: ZoomBlur("x", "x", step_factor=(-0.1, 0.2)), "-0.1"),
])
def test_blur_bad_arguments(make: Callable[[], NumpyOp], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        make()


def test_camera_blurs_take_uint16_and_float64_images() -> None:
    """As under FastEstimator (OpenCV filters and resizes uint16 and float64 images): the dtype is kept and the
    values are the uint8 result's on the wider scale (within the uint8 result's rounding and truncation)."""
    image = np.random.default_rng(3).integers(0, 256, (12, 11, 3), dtype=np.uint8)
    for op in (Defocus("x", "x", radius=(2, 4)), ZoomBlur("x", "x", max_factor=(1.1, 1.2)), MotionBlur("x", "x")):
        params = op.get_params(image, _state(1))
        narrow = op.apply(image, params).astype(np.float64)
        wide = op.apply(image.astype(np.uint16) * 257, params)
        double = op.apply(image / 255.0, params)
        assert wide.dtype == np.uint16 and double.dtype == np.float64, type(op).__name__
        np.testing.assert_allclose(wide / 257.0, narrow, atol=2.0, err_msg=type(op).__name__)
        np.testing.assert_allclose(double * 255.0, narrow, atol=2.0, err_msg=type(op).__name__)


def test_blur_bad_images() -> None:
    for op in (Defocus("x", "x"), ZoomBlur("x", "x")):
        with pytest.raises(TypeError, match="uint8, uint16, float32, float64 images.*int32"):
            op.forward(np.zeros((8, 8), dtype=np.int32), _state(0))
        with pytest.raises(ValueError, match="shape"):
            op.forward(np.zeros((2, 8, 8, 3), dtype=np.uint8), _state(0))


# ------------------------------------------------------------------ RandomShapes
def test_shape_rasterisers() -> None:
    disk = _ellipse((11, 11), (5, 5), (2, 2), 0.0)
    assert disk.sum() == 9 and disk[5, 5] and disk[4, 4] and not disk[3, 5]  # strictly inside radius 2
    triangle = _convex_polygon((6, 6), [4, 0, 4], [0, 2, 4])
    assert triangle[4, 0] and triangle[4, 4] and triangle[0, 2] and not triangle[0, 0] and not triangle[5, 2]
    np.testing.assert_array_equal(triangle[4], [True] * 5 + [False])


def test_random_shapes_opaque_and_invisible() -> None:
    image = _image((24, 20, 3))
    opaque = RandomShapes("x", "x", intensity_range=(7, 7), transparency_range=(1, 1))
    for seed in range(5):
        out = opaque.forward(image, _state(seed))
        changed = np.any(out != image, axis=-1)
        assert changed.any() and not changed.all()
        assert np.all(out[changed] == 7)
    invisible = RandomShapes("x", "x", transparency_range=(0, 0))
    np.testing.assert_array_equal(invisible.forward(image, _state(0)), image)
    floats = image[..., 0].astype(np.float32) / 255
    out = RandomShapes("x", "x", intensity_range=(51, 51), transparency_range=(1, 1)).forward(floats, _state(0))
    assert out.shape == floats.shape and out.dtype == np.float32
    np.testing.assert_allclose(out[out != floats], 0.2)


def test_random_shapes_half_blend_and_inputs_drawn_apart() -> None:
    image = np.full((30, 30, 3), 200, dtype=np.uint8)
    op = RandomShapes("x", "x", intensity_range=(100, 100), transparency_range=(0.5, 0.5))
    first, second = op.forward([image, image], _state(4))
    assert set(np.unique(first)) == {150, 200}
    assert not np.array_equal(first, second)  # as in FastEstimator, every input gets its own shapes


def test_random_shapes_rua_level_and_errors() -> None:
    op = RandomShapes("x", "x", max_size=10)
    op.set_rua_level(0.5)
    assert (op.max_shapes, op.max_size) == (2, 5)
    assert op.transparency_range == pytest.approx((0.1, 0.5))
    op.set_rua_level(0.0)
    image = _image((10, 10, 3))
    np.testing.assert_array_equal(op.forward(image, _state(0)), image)
    with pytest.raises(ValueError, match="shape"):
        RandomShapes("x", "x").forward(np.zeros((2, 4, 4, 3), dtype=np.uint8), _state(0))
    with pytest.raises(ValueError, match="3 channels"):
        RandomShapes("x", "x", intensity_range=((0, 10), (0, 10))).forward(image, _state(0))


@pytest.mark.parametrize("make, text", [
    (lambda: RandomShapes("x", "x", intensity_range=(0, 255)), "255"),
    (lambda: RandomShapes("x", "x", intensity_range=(9, 3)), "9"),
    (lambda: RandomShapes("x", "x", transparency_range=(0.5, 1.5)), "1.5"),
    (lambda: RandomShapes("x", "x", max_shapes=0), "max_shapes"),
    (lambda: RandomShapes("x", "x", max_size=1), "max_size"),
])
def test_random_shapes_bad_arguments(make: Callable[[], NumpyOp], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        make()


# ------------------------------------------------------------------ HistogramMatching
def _ranked(seed: int, channels: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An 8x8 image holding 0..63 once per channel, shuffled, and a reference holding 3 v + 10 instead."""
    rng = np.random.default_rng(seed)
    shape = (8, 8, channels) if channels else (8, 8)
    image = np.stack([rng.permutation(64) for _ in range(max(channels, 1))], axis=-1).reshape(shape)
    reference = np.stack([rng.permutation(64) for _ in range(max(channels, 1))], axis=-1).reshape(shape) * 3 + 10
    return image.astype(np.uint8), reference.astype(np.uint8)


@pytest.mark.parametrize("channels", [0, 1, 3])
def test_histogram_matching_maps_ranks_onto_the_reference(channels: int) -> None:
    image, reference = _ranked(0, channels)
    full = HistogramMatching("x", "x", [reference], blend_ratio=(1.0, 1.0))
    np.testing.assert_array_equal(full.forward(image, _state(0)), image.astype(np.int64) * 3 + 10)
    half = HistogramMatching("x", "x", [reference], blend_ratio=(0.5, 0.5))
    np.testing.assert_array_equal(half.forward(image, _state(0)), image.astype(np.int64) * 2 + 5)
    itself = HistogramMatching("x", "x", [image])
    np.testing.assert_array_equal(itself.forward(image, _state(1)), image)
    floats = image.astype(np.float32) / 255
    float_op = HistogramMatching("x", "x", [reference.astype(np.float32) / 255], blend_ratio=(1, 1))
    out = float_op.forward(floats, _state(0))
    np.testing.assert_allclose(out, (image.astype(np.float32) * 3 + 10) / 255, rtol=1e-6)


def test_histogram_matching_references_read_fn_and_resizing() -> None:
    image, _ = _ranked(1, 3)
    references = {"dark": np.full((4, 5, 3), 20, np.uint8), "light": np.full((16, 3, 3), 220, np.uint8)}
    op = HistogramMatching("x", "x", ["dark", "light"], blend_ratio=(1, 1), read_fn=references.__getitem__)
    outputs = {int(op.forward(image, _state(seed))[0, 0, 0]) for seed in range(20)}
    assert outputs == {20, 220}
    single = HistogramMatching("x", "x", "dark", blend_ratio=(1, 1), read_fn=references.__getitem__)
    assert np.all(single.forward(image, _state(0)) == 20)
    blends = [HistogramMatching("x", "x", [image]).get_params(image, _state(seed))[1] for seed in range(50)]
    assert 0.5 <= min(blends) < 0.6 and 0.9 < max(blends) <= 1.0


def test_histogram_matching_errors() -> None:
    image, reference = _ranked(2, 3)
    with pytest.raises(TypeError, match="float32"):
        HistogramMatching("x", "x", [reference.astype(np.float32)]).forward(image, _state(0))
    with pytest.raises(ValueError, match="channels"):
        HistogramMatching("x", "x", [reference[..., :2]]).forward(image, _state(0))
    with pytest.raises(ValueError, match="1.5"):
        HistogramMatching("x", "x", [reference], blend_ratio=(0.5, 1.5))
    with pytest.raises(ValueError, match="empty"):
        HistogramMatching("x", "x", [])
    with pytest.raises(TypeError, match="read_fn"):
        HistogramMatching("x", "x", [reference], read_fn="imread")
    with pytest.raises(ValueError, match="list of images"):
        gray = image[..., 0]
        HistogramMatching("x", "x", gray).forward(gray, _state(0))  # one array is a stack: its rows are no images


# ------------------------------------------------------------------ FDA
def test_fda_with_beta_zero_is_nearly_the_identity() -> None:
    image = _image((16, 20, 3))
    shuffled = np.random.default_rng(1).permutation(image.reshape(-1, 3)).reshape(image.shape)  # same means
    op = FDA("x", "x", [shuffled], beta_limit=0)
    assert op.beta_limit == (0.0, 0.0)
    out = op.forward(image, _state(0))
    assert out.dtype == np.uint8 and np.abs(out.astype(int) - image).max() <= 1
    floats = image.astype(np.float32) / 255
    out = FDA("x", "x", [shuffled.astype(np.float32) / 255], beta_limit=0).forward(floats, _state(0))
    np.testing.assert_allclose(out, floats, atol=1e-5)
    itself = FDA("x", "x", [image], beta_limit=0.5).forward(image, _state(0))
    assert np.abs(itself.astype(int) - image).max() <= 1


def test_fda_swaps_the_mean_and_low_frequencies() -> None:
    rng = np.random.default_rng(3)
    image = (0.2 + 0.4 * rng.random((16, 16))).astype(np.float32)
    reference = np.full((8, 8), 0.5, dtype=np.float32)  # resized to 16x16; its amplitude is all in the mean
    out = FDA("x", "x", [reference], beta_limit=0).forward(image, _state(0))
    np.testing.assert_allclose(out, image - image.mean() + 0.5, atol=1e-5)
    strong = FDA("x", "x", [reference], beta_limit=(0.5, 0.5)).forward(image, _state(0))
    assert strong.std() < 0.5 * image.std()  # most of the image's amplitude is replaced by the flat reference's
    betas = [FDA("x", "x", [reference]).get_params(image, _state(seed))[1] for seed in range(50)]
    assert 0 <= min(betas) < 0.02 and 0.08 < max(betas) <= 0.1


def test_fda_errors() -> None:
    with pytest.raises(ValueError, match="0.6"):
        FDA("x", "x", [np.zeros((4, 4))], beta_limit=0.6)
    with pytest.raises(ValueError, match="-0.1"):
        FDA("x", "x", [np.zeros((4, 4))], beta_limit=(-0.1, 0.1))
    with pytest.raises(ValueError, match="shape"):
        FDA("x", "x", [np.zeros((4, 4, 3), np.uint8)]).forward(np.zeros((4, 4), np.uint8), _state(0))


# ------------------------------------------------------------------ PixelDistributionAdaptation
@pytest.mark.parametrize("transform_type", ["pca", "standard", "minmax"])
def test_pixel_adaptation_to_itself_is_nearly_the_identity(transform_type: str) -> None:
    image = _image((12, 10, 3))
    op = PixelDistributionAdaptation("x", "x", [image], blend_ratio=(1, 1), transform_type=transform_type)
    out = op.forward(image, _state(0))
    assert out.dtype == np.uint8 and np.abs(out.astype(int) - image).max() <= 1
    floats = image.astype(np.float32) / 255
    out = op.forward(floats, _state(0))
    assert out.dtype == np.float32 and np.abs(out - floats).max() <= 1.5 / 255


def test_pixel_adaptation_minmax_by_hand() -> None:
    image = np.zeros((4, 51, 3), dtype=np.uint8)
    image[:] = (np.arange(51) * 4)[None, :, None]  # 0, 4, ..., 200 in every channel
    reference = np.zeros((2, 2, 3), dtype=np.uint8)
    reference[0], reference[1] = 50, 150
    op = PixelDistributionAdaptation("x", "x", [reference], blend_ratio=(1, 1), transform_type="minmax")
    out = op.forward(image, _state(0)).astype(int)
    assert np.abs(out - (50 + image // 2)).max() <= 1  # [0, 200] mapped linearly onto [50, 150], truncated
    half = PixelDistributionAdaptation("x", "x", [reference], blend_ratio=(0.5, 0.5), transform_type="minmax")
    assert np.abs(half.forward(image, _state(0)).astype(int) - (image * 0.5 + out * 0.5)).max() <= 1


def test_pixel_adaptation_errors() -> None:
    image = _image((6, 6, 3))
    with pytest.raises(ValueError, match="'lda'"):
        PixelDistributionAdaptation("x", "x", [image], transform_type="lda")
    with pytest.raises(ValueError, match="RGB"):
        PixelDistributionAdaptation("x", "x", [image]).forward(image[..., 0], _state(0))
    with pytest.raises(TypeError, match="0, 1"):
        PixelDistributionAdaptation("x", "x", [image]).forward(image.astype(np.float32), _state(0))
    with pytest.raises(ValueError, match="-0.1"):
        PixelDistributionAdaptation("x", "x", [image], blend_ratio=(-0.1, 1))


# ------------------------------------------------------------------ signatures and defaults
_IDENTITY = object()  # FastEstimator's default read_fn, ``lambda x: x``
_COMMON = ["inputs", "outputs", "mode", "ds_id"]
_REFERENCED = ["inputs", "outputs", "reference_images", "mode", "ds_id"]  # the domain adaptation ops
_COMMON_DEFAULTS = {"mode": None, "ds_id": None}
# Each op's __init__ parameters (after self) and defaults in FastEstimator 1.7.0, as its wheel declares them
# (fastestimator/op/numpyop/univariate/<module>.py); recorded here so the check runs without the sources.
_FE17_SIGNATURES: dict[type, tuple[list[str], dict[str, Any]]] = {
    Defocus: (_COMMON + ["radius", "alias_blur"], {"radius": (3, 10), "alias_blur": (0.1, 0.5)}),
    ZoomBlur: (_COMMON + ["max_factor", "step_factor"], {"max_factor": (1, 1.31), "step_factor": (0.01, 0.03)}),
    FromFloat: (_COMMON + ["max_value", "dtype"], {"max_value": None, "dtype": "uint16"}),
    InvertImg: (_COMMON, {}),
    MultiplicativeNoise: (_COMMON + ["multiplier", "per_channel", "elementwise"],
                          {"multiplier": (0.9, 1.1), "per_channel": False, "elementwise": False}),
    RandomShapes: (_COMMON + ["max_shapes", "max_size", "intensity_range", "transparency_range"],
                   {"max_shapes": 3, "max_size": None, "intensity_range": (0, 254), "transparency_range": (0.1, 0.9)}),
    HistogramMatching: (_REFERENCED + ["blend_ratio", "read_fn"], {"blend_ratio": (0.5, 1.0), "read_fn": _IDENTITY}),
    FDA: (_REFERENCED + ["beta_limit", "read_fn"], {"beta_limit": 0.1, "read_fn": _IDENTITY}),
    PixelDistributionAdaptation: (_REFERENCED + ["blend_ratio", "read_fn", "transform_type"],
                                  {"blend_ratio": (0.25, 1.0), "read_fn": _IDENTITY, "transform_type": "pca"}),
}


@pytest.mark.parametrize("cls", list(_FE17_SIGNATURES), ids=lambda cls: cls.__name__)
def test_signatures_match_fastestimator(cls: type) -> None:
    names, defaults = _FE17_SIGNATURES[cls]
    ours = inspect.signature(cls.__init__).parameters
    assert list(ours)[1:] == names
    for name, expected in {**_COMMON_DEFAULTS, **defaults}.items():
        if expected is _IDENTITY:
            assert ours[name].default("ref") == "ref"
        else:
            assert ours[name].default == expected, name
    required = [name for name in names if name not in _COMMON_DEFAULTS and name not in defaults]
    assert all(ours[name].default is inspect.Parameter.empty for name in required), required


def test_ops_pickle_with_their_defaults() -> None:
    reference = [_image((6, 6, 3))]
    ops = [Defocus("x", "x"), ZoomBlur("x", "x"), FromFloat("x", "x"), InvertImg("x", "x"),
           MultiplicativeNoise("x", "x"), RandomShapes("x", "x"), HistogramMatching("x", "x", reference),
           FDA("x", "x", reference), PixelDistributionAdaptation("x", "x", reference)]
    image = _image((6, 6, 3))
    for op in ops:
        copy = pickle.loads(pickle.dumps(op))
        source = image.astype(np.float32) / 255 if isinstance(op, FromFloat) else image
        np.testing.assert_array_equal(copy.forward(source, _state(2)), op.forward(source, _state(2)))


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    images = np.random.default_rng(7).integers(0, 256, (N, 12, 12, 3), dtype=np.uint8)
    return NumpyDataset({"x": images, "y": np.arange(N)})


_REFERENCES = [np.random.default_rng(seed).integers(0, 256, (10, 14, 3), dtype=np.uint8) for seed in (1, 2, 3)]
FACTORIES: dict[str, Callable[[], list[NumpyOp]]] = {
    "blur": lambda: [Defocus("x", "x", radius=(1, 3)), ZoomBlur("x", "x", max_factor=(1, 1.5), step_factor=0.1)],
    "noise_shapes": lambda: [MultiplicativeNoise("x", "x", per_channel=True, elementwise=True),
                             RandomShapes("x", "x", max_size=6), InvertImg("x", "x")],
    "domain": lambda: [HistogramMatching("x", "x", _REFERENCES), FDA("x", "x", _REFERENCES),
                       PixelDistributionAdaptation("x", "x", _REFERENCES)],
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_pipeline_draws_are_exact_by_sample_position(name: str) -> None:
    assert_position_seeded(_dataset, FACTORIES[name], seed=17, batch_size=2)
