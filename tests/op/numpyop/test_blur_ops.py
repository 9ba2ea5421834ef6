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
from fe_ray.op.numpyop.univariate.blur import advanced_kernel, filter2d, gaussian_kernel_256, gaussian_kernel_size
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
        np.testing.assert_array_equal(GaussianBlur("x", "x").apply(image, (size, 0.0)), expected)
    floats = image.astype(np.float32) / 255
    weights = np.array([0.0625, 0.25, 0.375, 0.25, 0.0625])
    expected = _per_channel(floats.astype(np.float64), lambda c: ndimage.correlate1d(
        ndimage.correlate1d(c, weights, axis=1, mode="mirror"), weights, axis=0, mode="mirror"))
    np.testing.assert_allclose(GaussianBlur("x", "x").apply(floats, (5, 0.0)), expected, atol=3e-7)


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
    assert GaussianBlur("x", "x").apply(image, (3, 0.0))[2, 1:4].tolist() == [11, 23, 11]  # 90 * 32 / 256 = 11.25 ...
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


def test_downscale_bilinear_by_hand_and_as_opencv_gave_it() -> None:
    """interpolation=1 (FastEstimator passes it to albumentations, which resizes both ways bilinearly in float32)."""
    op = Downscale("x", "x", interpolation=1)
    ramp = np.array([[0, 2, 4, 6]] * 2, np.float32)
    # Shrunk to [1, 5] (pixel pairs' means); enlarged at positions -0.25, 0.25, 0.75, 1.25, edges repeated.
    np.testing.assert_array_equal(op.apply(ramp, 0.5), [[1, 2, 4, 5]] * 2)
    flat = np.full((3, 4, 1), 100, np.uint8)  # through float32(100 / 255) and back without losing a level
    np.testing.assert_array_equal(op.apply(flat, 0.5), flat)
    # Reference values from albumentations 1.4.1's F.downscale(image, scale, 1, 1) with OpenCV 4.11 (IPP).
    floats = ((np.arange(15).reshape(3, 5) * 7 % 11) / 10).astype(np.float32)
    expected = np.array([[0.192857146, 0.39785713, 0.640561223, 0.749642909, 0.642857194],
        [0.259948969, 0.429591835, 0.51964283, 0.611607194, 0.785714269],
        [0.327040821, 0.46132654, 0.398724496, 0.47357145, 0.928571403]], np.float32)
    np.testing.assert_allclose(op.apply(floats, 0.7), expected, rtol=0, atol=3e-7)
    image = (np.arange(72).reshape(4, 6, 3) * 37 % 256).astype(np.uint8)
    opencv = np.array([[[59, 96, 133], [123, 75, 112], [180, 70, 88], [152, 137, 79], [119, 142, 80], [94, 131, 83]],
                       [[67, 104, 141], [106, 79, 116], [147, 67, 90], [157, 119, 85], [127, 132, 94], [94, 131, 104]],
                       [[81, 118, 155], [71, 86, 123], [81, 60, 93], [167, 84, 97], [141, 111, 123], [94, 131, 147]],
                       [[89, 126, 163], [53, 90, 127], [48, 57, 94], [172, 66, 103], [149, 100, 137], [94, 132, 169]]])
    out = op.apply(image, 0.6)
    assert out.dtype == np.uint8 and np.abs(out.astype(int) - opencv).max() <= 1 and (out != opencv).sum() <= 1
    with pytest.raises(TypeError, match="uint8 or float32 images, but .* has dtype uint16"):
        op.apply(np.zeros((4, 4), np.uint16), 0.5)


def test_filters_match_opencv_when_available() -> None:
    cv2 = pytest.importorskip("cv2")
    for shape in SHAPES:
        image = _image(shape, 3)
        for size in (3, 5, 7, 9, 13):
            for op, reference in ((Blur("x", "x"), cv2.blur(image, (size, size))),
                                  (GaussianBlur("x", "x"), cv2.GaussianBlur(image, (size, size), 0)),
                                  (MedianBlur("x", "x"), cv2.medianBlur(image, size))):
                params = (size, 0.0) if isinstance(op, GaussianBlur) else size
                np.testing.assert_array_equal(op.apply(image, params), reference.reshape(shape))
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
    assert {size for size, _ in sizes(GaussianBlur("x", "x"))} == {3}  # FastEstimator's default 3 reads as (3, 3)
    gaussian = [size for size, sigma in sizes(GaussianBlur("x", "x", blur_limit=7))]
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
    (lambda: Downscale("x", "x", interpolation=2), r"0 \(cv2.INTER_NEAREST\) or 1 \(cv2.INTER_LINEAR\), got 2"),
])
def test_argument_errors(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_running_errors() -> None:
    with pytest.raises(TypeError, match=r"uint8, uint16, float32, float64 images, but \['x'\] has dtype int32"):
        Blur("x", "x").apply(np.zeros((4, 4), np.int32), 3)
    with pytest.raises(TypeError, match=r"uint8, uint16, float32 images, but \['x'\] has dtype float64"):
        MedianBlur("x", "x").apply(np.zeros((4, 4)), 3)  # cv2.medianBlur has no float64 kernel either
    with pytest.raises(ValueError, match="uint16 images with sizes 3 and 5 only"):
        MedianBlur("x", "x").apply(np.zeros((8, 8), np.uint16), 7)
    with pytest.raises(ValueError, match=r"\(height, width\[, channels\]\)"):
        GaussianBlur("x", "x").apply(np.zeros(4, np.uint8), (3, 0.0))


# The values cv2 4.11 gives on this uint16 image (FastEstimator's albumentations blurs uint16 and float64 images).
_U16 = ((np.arange(30, dtype=np.int64).reshape(5, 6) * 7919) % 65536).astype(np.uint16)
_CV2_U16 = {
    "gaussian_11": [[33246, 33148, 32691, 32062, 31390, 31118], [32825, 32809, 32574, 32225, 31788, 31610],
                    [31668, 31841, 32122, 32437, 32567, 32617], [30169, 30536, 31364, 32387, 33131, 33430],
                    [29512, 29952, 30988, 32288, 33276, 33676]],
    "gaussian_sigma_1.3": [[34142, 34342, 33314, 30372, 27961, 27248], [34362, 34733, 34310, 32116, 29964, 29195],
                           [32215, 32922, 34018, 34216, 33658, 33274], [27258, 27998, 30213, 33092, 35144, 35777],
                           [24647, 25259, 27689, 31618, 34949, 36156]],
    "box_5": [[40305, 36646, 36155, 33588, 33096, 29437], [36701, 33042, 32550, 32605, 32113, 28454],
              [28509, 27471, 29601, 29656, 31786, 30748], [30803, 29765, 31895, 31950, 34080, 33042],
              [27199, 28782, 33534, 33589, 38340, 39924]],
    "median_5": [[15838, 15838, 23757, 23757, 31676, 31676], [15838, 23757, 27308, 31676, 31676, 35227],
                 [29492, 27308, 27308, 27308, 31676, 33043], [37411, 29492, 27308, 25124, 27308, 33043],
                 [29492, 27308, 25124, 25124, 33043, 33043]],
}


def test_uint16_images_blur_as_opencv_does() -> None:
    """uint16 Gaussians use OpenCV's 16-bit fixed-point kernels (error-diffused from size 11 / a given sigma)."""
    results = {"gaussian_11": GaussianBlur("x", "x").apply(_U16, (11, 0.0)),
               "gaussian_sigma_1.3": GaussianBlur("x", "x").apply(_U16, (0, 1.3)),
               "box_5": Blur("x", "x").apply(_U16, 5), "median_5": MedianBlur("x", "x").apply(_U16, 5)}
    for name, result in results.items():
        assert result.dtype == np.uint16, name
        np.testing.assert_array_equal(result, _CV2_U16[name], err_msg=name)


def test_float64_images_blur_in_double_precision() -> None:
    image = _U16 / 65535.0
    for op, params in ((Blur("x", "x"), 5), (GaussianBlur("x", "x"), (11, 0.0)), (GaussianBlur("x", "x"), (0, 1.3))):
        result = op.apply(image, params)
        assert result.dtype == np.float64
        # The same filter on the uint16 image: its kernel and result rounded to 16 bits, a level or two apart.
        reference = op.apply(_U16, params) / 65535.0
        np.testing.assert_allclose(result, reference, atol=2.0 / 65535)
    kernel = advanced_kernel(3, 0.8, 0.5, 0.3, 1.5, np.ones((3, 3)))
    np.testing.assert_allclose(filter2d(image, kernel), ndimage.correlate(image, kernel.astype(np.float64),
                                                                          mode="mirror"), rtol=1e-12)


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    return NumpyDataset({"x": np.random.default_rng(5).integers(0, 256, (N, 12, 12, 3), dtype=np.uint8),
                         "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [Blur("x", "x"), GaussianBlur("x", "x"), MedianBlur("x", "x"), Blur("x", "x", advanced=True),
            GaussianBlur("x", "x", blur_limit=(0, 5), sigma_limit=(0.5, 1.5)),
            Downscale("x", "x", scale_min=0.3, scale_max=0.7)]


def test_pipeline_blurs_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=3)


# ------------------------------------------------------------------ GaussianBlur's sigma_limit
def test_gaussian_kernel_with_a_given_sigma() -> None:
    # sigma 0.5, size 3: weights 1 and exp(-2) = 0.1353 on each side, so 256 * 0.1353 / 1.2707 = 27.26 -> 27.
    assert gaussian_kernel_256(3, 0.5).tolist() == [27, 202, 27]
    # A given sigma bypasses OpenCV's fixed small-size table (which holds sigma 0.8 for size 3).
    assert gaussian_kernel_256(3, 0.8).tolist() != gaussian_kernel_256(3).tolist()
    for size, sigma in ((5, 1.5), (7, 0.3), (9, 4.0)):
        kernel = gaussian_kernel_256(size, sigma)
        assert kernel.sum() == 256 and kernel.tolist() == kernel[::-1].tolist()
        weights = np.exp(-(np.arange(size) - size // 2) ** 2 / (2 * sigma * sigma))
        np.testing.assert_allclose(kernel / 256, weights / weights.sum(), atol=1 / 256)


def test_gaussian_blur_with_sigma_by_hand() -> None:
    image = _image((9, 8, 3), 4)
    kernel = gaussian_kernel_256(5, 1.5)

    def smooth(channel: np.ndarray) -> np.ndarray:
        rows = ndimage.correlate1d(channel.astype(np.int64), kernel, axis=1, mode="mirror")
        return ndimage.correlate1d(rows, kernel, axis=0, mode="mirror")

    np.testing.assert_array_equal(GaussianBlur("x", "x").apply(image, (5, 1.5)), (_per_channel(image, smooth)
                                                                                 + 32768) >> 16)
    floats = image.astype(np.float32) / 255
    weights = np.exp(-(np.arange(5) - 2.0) ** 2 / (2 * 1.5 ** 2))
    weights /= weights.sum()
    expected = _per_channel(floats.astype(np.float64), lambda c: ndimage.correlate1d(
        ndimage.correlate1d(c, weights, axis=1, mode="mirror"), weights, axis=0, mode="mirror"))
    np.testing.assert_allclose(GaussianBlur("x", "x").apply(floats, (5, 1.5)), expected, atol=1e-6)
    # Size 0: OpenCV's size from sigma, 3 sigmas a side for uint8 (7 for sigma 1), 4 for float32 (9).
    assert gaussian_kernel_size(1.0, np.dtype(np.uint8)) == 7 and gaussian_kernel_size(1.0, np.dtype(np.float32)) == 9
    np.testing.assert_array_equal(GaussianBlur("x", "x").apply(image, (0, 1.0)),
                                  GaussianBlur("x", "x").apply(image, (7, 1.0)))
    np.testing.assert_array_equal(GaussianBlur("x", "x").apply(floats, (0, 1.0)),
                                  GaussianBlur("x", "x").apply(floats, (9, 1.0)))


def test_gaussian_sigma_draws() -> None:
    op = GaussianBlur("x", "x", blur_limit=(3, 7), sigma_limit=(0.5, 2.0))
    params = [op.get_params(None, _state(seed)) for seed in range(200)]
    sigmas = [sigma for _, sigma in params]
    assert 0.5 <= min(sigmas) and max(sigmas) <= 2.0 and len(set(sigmas)) == 200
    rng = np.random.default_rng(0)
    size = int(rng.integers(3, 8))
    assert params[0] == (size + (size % 2 == 0), rng.uniform(0.5, 2.0))  # size first, then sigma
    # A single number v means (0, v); with a sigma range starting above 0 the size may be 0 (size from sigma).
    assert GaussianBlur("x", "x", sigma_limit=2.0).sigma_limit == (0.0, 2.0)
    from_sigma = GaussianBlur("x", "x", blur_limit=0, sigma_limit=(1.0, 1.0))
    assert from_sigma.blur_limit == (0, 0) and from_sigma.get_params(None, _state(1)) == (0, 1.0)
    assert {size for size, _ in (GaussianBlur("x", "x", blur_limit=5, sigma_limit=(0.1, 1)).get_params(
        None, _state(seed)) for seed in range(100))} == {0, 1, 3, 5}
    with pytest.raises(ValueError, match="sigma_limit"):
        GaussianBlur("x", "x", sigma_limit=(-1.0, 1.0))
    with pytest.raises(ValueError, match="sigma_limit"):
        GaussianBlur("x", "x", sigma_limit=(2.0, 1.0))


# ------------------------------------------------------------------ Blur(advanced=True)
def test_filter2d_is_opencvs_correlation_not_a_convolution() -> None:
    image = np.arange(20, dtype=np.uint8).reshape(4, 5)
    right = np.zeros((3, 3), np.float32)
    right[1, 2] = 1.0  # weight on the right neighbour: out[y, x] = image[y, x + 1], mirrored at the last column
    expected = np.concatenate([image[:, 1:], image[:, 3:4]], axis=1)
    np.testing.assert_array_equal(filter2d(image, right), expected)
    kernel = np.random.default_rng(1).uniform(0, 1, (5, 5)).astype(np.float32)
    kernel /= kernel.sum()
    colour = _image((7, 6, 3), 5)
    reference = _per_channel(colour, lambda c: ndimage.correlate(c.astype(np.float64), kernel, mode="mirror"))
    np.testing.assert_array_equal(filter2d(colour, kernel), np.rint(reference).astype(np.uint8))
    floats = colour.astype(np.float32) / 255
    np.testing.assert_allclose(filter2d(floats, kernel), reference / 255, rtol=1e-5)
    assert filter2d(floats, kernel).dtype == np.float32


def test_filter2d_rounds_as_opencv_direct_and_dft_paths() -> None:
    """Values from cv2.filter2D (OpenCV 4.11). A small kernel sums by float32 fused multiply-adds (float32 products
    and sums, or double sums, round differently); from 130 taps OpenCV goes through a DFT, in double precision."""
    kernel = (np.array([[4, 3, 4], [6, 5, 1], [1, 8, 7]]) / 20).astype(np.float32)
    out = filter2d(np.full((1, 1), 0.828, np.float32), kernel)  # a 1x1 image mirrors to itself: 0.828 * sum
    assert out.dtype == np.float32 and float(out[0, 0]) == 1.6146001815795898  # two roundings: 1.6145999 / 1.6146001
    kernel = (np.array([[5, 6, 2], [4, 8, 8], [3, 6, 1]]) / 20).astype(np.float32)
    assert float(filter2d(np.full((2, 2), 0.725, np.float32), kernel)[1, 1]) == 1.5587499141693115
    uniform = np.full((13, 13), np.float32(1 / 169), np.float32)
    assert float(filter2d(np.full((1, 1), 0.761, np.float32), uniform)[0, 0]) == 0.7609999775886536  # float32: 0.760999


def test_advanced_kernel_shapes() -> None:
    ones = np.ones((7, 7))
    # beta 1, equal sigmas, no noise: the (separable) Gaussian.
    gauss = np.exp(-(np.arange(7) - 3.0) ** 2 / (2 * 1.2 ** 2))
    np.testing.assert_allclose(advanced_kernel(7, 1.2, 1.2, 0.3, 1.0, ones), np.outer(gauss, gauss) / gauss.sum() ** 2,
                               rtol=1e-5)
    wide = advanced_kernel(7, 2.0, 0.5, 0.0, 1.0, ones)
    assert wide.dtype == np.float32 and abs(float(wide.sum()) - 1) < 1e-6
    assert wide[3, 0] > wide[0, 3]  # sigma_x (across columns) is the larger
    np.testing.assert_allclose(advanced_kernel(7, 2.0, 0.5, np.pi / 2, 1.0, ones), wide.T, atol=1e-7)  # 90 degrees
    # beta > 1 flattens the top and cuts the tails; beta < 1 does the opposite.
    flat, peaked = advanced_kernel(7, 1.5, 1.5, 0.0, 4.0, ones), advanced_kernel(7, 1.5, 1.5, 0.0, 0.5, ones)
    plain = advanced_kernel(7, 1.5, 1.5, 0.0, 1.0, ones)
    assert flat[3, 3] / flat[3, 1] > plain[3, 3] / plain[3, 1] > peaked[3, 3] / peaked[3, 1]
    noise = np.full((7, 7), 1.0)
    noise[0, 0] = 3.0
    noisy = advanced_kernel(7, 1.5, 1.5, 0.0, 1.0, noise)
    np.testing.assert_allclose(noisy[0, 0] / noisy[0, 6], 3.0, rtol=1e-5)


def test_advanced_blur_draws_and_applies() -> None:
    op = Blur("x", "x", advanced=True)
    kernel = op.get_params(None, _state(3))
    assert isinstance(kernel, np.ndarray) and kernel.shape[0] in (3, 5, 7) and kernel.shape[0] == kernel.shape[1]
    np.testing.assert_array_equal(kernel, op.get_params(None, _state(3)))
    assert any(op.get_params(None, _state(s)).shape != kernel.shape or not np.array_equal(
        op.get_params(None, _state(s)), kernel) for s in range(4, 8))
    # Replaying the draw order by hand gives the same kernel.
    rng = np.random.default_rng(3)
    size = [3, 5, 7][rng.integers(3)]
    sx, sy, angle = rng.uniform(0.2, 1.0), rng.uniform(0.2, 1.0), np.deg2rad(rng.uniform(-90, 90))
    beta = rng.uniform(0.5, 1.0) if rng.random() < 0.5 else rng.uniform(1.0, 8.0)
    noise = rng.uniform(0.9, 1.1, (size, size))
    np.testing.assert_array_equal(kernel, advanced_kernel(size, sx, sy, angle, beta, noise))
    image = _image((10, 9, 3), 6)
    out = op.apply(image, kernel)
    assert out.dtype == np.uint8 and out.shape == image.shape
    np.testing.assert_array_equal(out, filter2d(image, kernel))
    flat = np.full((6, 6), 77, np.uint8)  # a normalised kernel keeps a flat image flat
    np.testing.assert_array_equal(op.apply(flat, kernel), flat)
    assert not Blur("x", "x").advanced and isinstance(Blur("x", "x").get_params(None, _state(3)), int)


@pytest.mark.parametrize("kwargs, match", [
    ({"beta_limit": (1.0, 4.0)}, "1.0 strictly inside"),
    ({"beta_limit": 0.9}, "1.0 strictly inside"),
    ({"sigmaX_limit": 0, "sigmaY_limit": (0.0, 1.0)}, "may not both start at 0"),
    ({"sigmaX_limit": (-0.5, 1.0)}, "sigmaX_limit"),
    ({"noise_limit": (1.2, 0.8)}, "noise_limit"),
    ({"rotate_limit": "x"}, "rotate_limit"),
])
def test_advanced_argument_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Blur("x", "x", advanced=True, **kwargs)
    Blur("x", "x", advanced=False, **kwargs)  # unused unless advanced, as in FastEstimator


def test_advanced_ranges_read_as_albumentations() -> None:
    op = Blur("x", "x", advanced=True, sigmaX_limit=2, rotate_limit=30, beta_limit=4, noise_limit=1.5)
    assert (op.sigmaX_limit, op.rotate_limit, op.beta_limit, op.noise_limit) == ((0, 2), (-30, 30), (0, 4), (0, 1.5))


def test_downscale_enlarges_back_with_opencvs_step() -> None:
    """OpenCV steps back up by 1 / (size / small): at scale 0.28 a 100-pixel ramp shrinks to 28 columns and column 25
    reads small column 7 (source column 25), where the step small / size would read column 6."""
    ramp = np.tile(np.arange(100, dtype=np.uint8), (4, 1))
    out = Downscale("x", "x").apply(ramp, 0.28)
    assert out[0, 24:27].tolist() == [21, 21, 25] and out[0, 50] == 46

