"""Blur, GaussianBlur, MedianBlur and Downscale: values against scipy's filters and hand computations (OpenCV's
arithmetic: rounding, borders, kernels), albumentations' size distributions, errors, and exact per-sample draws in a
Pipeline (threads, resume). Where OpenCV is importable the results are also compared with it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import ndimage

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate import Blur, Downscale, GaussianBlur, MedianBlur
from fe_ray.op.numpyop.univariate.blur import gaussian_kernel_256
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {RNG_KEY: np.random.default_rng(seed)}


def _image(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _per_channel(image: np.ndarray, fn: Any) -> np.ndarray:
    if image.ndim == 2:
        return fn(image)
    return np.stack([fn(image[..., c]) for c in range(image.shape[-1])], axis=-1)


SHAPES = [(9, 7, 3), (12, 10), (5, 6, 1)]


# ------------------------------------------------------------------ values
@pytest.mark.parametrize("shape", SHAPES)
def test_box_blur_is_the_rounded_mirrored_window_mean(shape: tuple[int, ...]) -> None:
    image = _image(shape)
    floats = image.astype(np.float32) / 255
    for size in (3, 5, 7):
        def mean(channel: np.ndarray, size: int = size) -> np.ndarray:
            # scipy's "mirror" border is OpenCV's BORDER_REFLECT_101 (the edge pixel is not repeated).
            return ndimage.uniform_filter(channel.astype(np.float64), size, mode="mirror")

        expected = np.rint(_per_channel(image, mean)).astype(np.uint8)
        np.testing.assert_array_equal(Blur("x", "x").apply(image, size), expected)
        expected = _per_channel(floats, mean)
        np.testing.assert_allclose(Blur("x", "x").apply(floats, size), expected, rtol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
def test_gaussian_blur_uses_opencv_kernels_exactly_and_rounds_half_up(shape: tuple[int, ...]) -> None:
    image = _image(shape, 1)
    for size in (3, 5, 7, 9, 11):
        kernel = gaussian_kernel_256(size)

        def smooth(channel: np.ndarray, kernel: np.ndarray = kernel) -> np.ndarray:
            rows = ndimage.correlate1d(channel.astype(np.int64), kernel, axis=1, mode="mirror")
            return ndimage.correlate1d(rows, kernel, axis=0, mode="mirror")

        expected = (_per_channel(image, smooth) + 32768) >> 16
        np.testing.assert_array_equal(GaussianBlur("x", "x").apply(image, size), expected)
    floats = image.astype(np.float32) / 255
    weights = np.array([0.0625, 0.25, 0.375, 0.25, 0.0625])
    expected = _per_channel(floats.astype(np.float64), lambda c: ndimage.correlate1d(
        ndimage.correlate1d(c, weights, axis=1, mode="mirror"), weights, axis=0, mode="mirror"))
    np.testing.assert_allclose(GaussianBlur("x", "x").apply(floats, 5), expected, atol=3e-7)


def test_gaussian_kernels_are_opencvs() -> None:
    # OpenCV's getGaussianKernel(size, 0) in 1/256 units: its table up to 9, error-diffused rounding above.
    assert gaussian_kernel_256(3).tolist() == [64, 128, 64]
    assert gaussian_kernel_256(7).tolist() == [8, 28, 56, 72, 56, 28, 8]
    assert gaussian_kernel_256(11).tolist() == [2, 7, 17, 31, 45, 52, 45, 31, 17, 7, 2]
    assert gaussian_kernel_256(13).tolist() == [1, 5, 10, 19, 30, 41, 44, 41, 30, 19, 10, 5, 1]
    assert all(gaussian_kernel_256(size).sum() == 256 for size in range(3, 32, 2))


@pytest.mark.parametrize("shape", SHAPES)
def test_median_blur_repeats_edge_pixels(shape: tuple[int, ...]) -> None:
    image = _image(shape, 2)
    for size in (3, 5, 7):
        expected = _per_channel(image, lambda c, size=size: ndimage.median_filter(c, size, mode="nearest"))
        np.testing.assert_array_equal(MedianBlur("x", "x").apply(image, size), expected)
    floats = image.astype(np.float32)
    np.testing.assert_array_equal(MedianBlur("x", "x").apply(floats, 3),
                                  _per_channel(floats, lambda c: ndimage.median_filter(c, 3, mode="nearest")))
    with pytest.raises(ValueError, match="float32 images with sizes 3 and 5 only"):
        MedianBlur("x", "x").apply(floats, 7)


def test_blur_by_hand() -> None:
    image = np.zeros((5, 5), np.uint8)
    image[2, 2] = 90
    assert Blur("x", "x").apply(image, 3)[1:4, 1:4].tolist() == [[10] * 3] * 3  # 90 / 9 in every window
    assert GaussianBlur("x", "x").apply(image, 3)[2, 1:4].tolist() == [11, 23, 11]  # 90 * 32 / 256 = 11.25 ...
    assert MedianBlur("x", "x").apply(image, 3)[2, 2] == 0


def test_downscale_pixelates_by_opencvs_nearest_rule() -> None:
    image = np.arange(64, dtype=np.uint8).reshape(8, 8)
    out = Downscale("x", "x").apply(image, 0.25)  # 2x2 pixels: source rows/cols 0 and 4, each spread over 4
    expected = np.repeat(np.repeat(image[[0, 4]][:, [0, 4]], 4, axis=0), 4, axis=1)
    np.testing.assert_array_equal(out, expected)
    odd = Downscale("x", "x").apply(np.arange(30, dtype=np.float32).reshape(5, 6), 0.5)
    # 5 * 0.5 rounds to 2 rows (half to even), 6 * 0.5 to 3 columns: sources rows 0, 2 and columns 0, 2, 4.
    rows, cols = np.floor(np.arange(5) * 2 / 5).astype(int), np.floor(np.arange(6) * 3 / 6).astype(int)
    np.testing.assert_array_equal(odd, np.arange(30).reshape(5, 6)[[0, 2]][:, [0, 2, 4]][rows][:, cols])
    with pytest.raises(ValueError, match="leaves no pixels"):
        Downscale("x", "x", scale_min=0.1, scale_max=0.1).apply(np.zeros((4, 4), np.uint8), 0.1)


def test_filters_match_opencv_when_available() -> None:
    cv2 = pytest.importorskip("cv2")
    for shape in SHAPES:
        image = _image(shape, 3)
        for size in (3, 5, 7, 9, 13):
            for op, reference in ((Blur("x", "x"), cv2.blur(image, (size, size))),
                                  (GaussianBlur("x", "x"), cv2.GaussianBlur(image, (size, size), 0)),
                                  (MedianBlur("x", "x"), cv2.medianBlur(image, size))):
                np.testing.assert_array_equal(op.apply(image, size), reference.reshape(shape))
        small = cv2.resize(image, None, fx=0.3, fy=0.3, interpolation=cv2.INTER_NEAREST)
        reference = cv2.resize(small, shape[1::-1], interpolation=cv2.INTER_NEAREST).reshape(shape)
        np.testing.assert_array_equal(Downscale("x", "x").apply(image, 0.3), reference)


# ------------------------------------------------------------------ parameters and errors
def test_kernel_sizes_follow_albumentations_distributions() -> None:
    def sizes(op: NumpyOp) -> list[int]:
        return [op.get_params(None, _state(seed)) for seed in range(400)]  # type: ignore[attr-defined]

    blur = sizes(Blur("x", "x"))
    assert set(blur) == {3, 5, 7}
    assert blur[:5] == [[3, 5, 7][np.random.default_rng(seed).integers(3)] for seed in range(5)]
    gaussian = sizes(GaussianBlur("x", "x"))
    assert set(gaussian) == {3, 5, 7} and 0.12 < gaussian.count(3) / 400 < 0.28  # 1/5: an even draw moves up
    assert set(sizes(MedianBlur("x", "x"))) == {3, 5}
    assert sizes(Blur("x", "x", blur_limit=(5, 5)))[:3] == [5, 5, 5]
    factors = [Downscale("x", "x", scale_min=0.2, scale_max=0.6).get_params(None, _state(s)) for s in range(50)]
    assert 0.2 <= min(factors) and max(factors) <= 0.6
    assert factors[0] == np.random.default_rng(0).uniform(0.2, 0.6)


@pytest.mark.parametrize("make, match", [
    (lambda: Blur("x", "x", blur_limit=(4, 8)), "odd size >= 3"),
    (lambda: GaussianBlur("x", "x", blur_limit=8), "odd sizes >= 3"),
    (lambda: MedianBlur("x", "x", blur_limit=(3, 6)), "odd sizes >= 3"),
    (lambda: Blur("x", "x", blur_limit=(3.5, 7)), "int or a pair"),
    (lambda: Downscale("x", "x", scale_min=0.5, scale_max=0.3), "0 < scale_min <= scale_max < 1"),
    (lambda: Downscale("x", "x", scale_max=1.0), "0 < scale_min <= scale_max < 1"),
    (lambda: Downscale("x", "x", interpolation=1), "INTER_NEAREST"),
])
def test_argument_errors(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_running_errors() -> None:
    with pytest.raises(TypeError, match=r"uint8, float32 images, but \['x'\] has dtype int32"):
        Blur("x", "x").apply(np.zeros((4, 4), np.int32), 3)
    with pytest.raises(ValueError, match=r"\(height, width\[, channels\]\)"):
        GaussianBlur("x", "x").apply(np.zeros(4, np.uint8), 3)


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    return NumpyDataset({"x": np.random.default_rng(5).integers(0, 256, (N, 12, 12, 3), dtype=np.uint8),
                         "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [Blur("x", "x"), GaussianBlur("x", "x"), MedianBlur("x", "x"),
            Downscale("x", "x", scale_min=0.3, scale_max=0.7)]


def test_pipeline_blurs_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=3)
