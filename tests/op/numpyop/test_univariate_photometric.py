"""The pixel-value and channel ops (Brightness ... RGBShift, ToArray): hand-computed values for given parameters,
albumentations' parameter distributions, dtype rules, shared parameters across inputs, errors, and exact per-sample
draws in a Pipeline (threads, resume)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate import (
    Brightness,
    ChannelDropout,
    ChannelShuffle,
    Contrast,
    GaussianNoise,
    Posterize,
    RandomBrightnessContrast,
    RandomGamma,
    RGBShift,
    Solarize,
    ToArray,
    ToGray,
    ToSepia,
)
from fe_ray.pipeline import Pipeline
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {RNG_KEY: np.random.default_rng(seed)}


def _u8(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.uint8)


# ------------------------------------------------------------------ Brightness, Contrast (Pillow's arithmetic)
def test_brightness_scales_and_truncates() -> None:
    op = Brightness("x", "x")
    np.testing.assert_array_equal(op.apply(_u8([[10, 255], [3, 100]]), 0.5), [[5, 127], [1, 50]])
    np.testing.assert_array_equal(op.apply(_u8([200, 100, 3])[None], 1.5), [[255, 150, 4]])
    assert op.apply(_u8([[1]]), 0.5).dtype == np.uint8


def test_contrast_moves_values_around_the_rounded_mean_luminance() -> None:
    black_white = _u8([[[0, 0, 0], [255, 255, 255]]])  # luminance 0 and 255: mean 127.5 rounds to 128
    np.testing.assert_array_equal(Contrast("x", "x").apply(black_white, 0.5), [[[64] * 3, [191] * 3]])
    np.testing.assert_array_equal(Contrast("x", "x").apply(black_white, 0.0), [[[128] * 3, [128] * 3]])
    gray = _u8([[10, 30]])  # mean 20
    np.testing.assert_array_equal(Contrast("x", "x").apply(gray, 3.0), [[0, 50]])
    np.testing.assert_array_equal(Contrast("x", "x").apply(gray[..., None], 3.0), [[[0], [50]]])


def test_enhance_alpha_channel_is_kept() -> None:
    rgba = _u8([[[200, 100, 50, 77]]])
    np.testing.assert_array_equal(Brightness("x", "x").apply(rgba, 0.5), [[[100, 50, 25, 77]]])
    np.testing.assert_array_equal(Contrast("x", "x").apply(rgba, 1.0), rgba)


@pytest.mark.parametrize("shape", [(7, 5, 3), (6, 4), (5, 5, 4)])
def test_enhance_equals_pillow(shape: tuple[int, ...]) -> None:
    image_module = pytest.importorskip("PIL.Image")
    enhance = pytest.importorskip("PIL.ImageEnhance")
    image = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    for factor in (0.0, 0.3, 0.46, 1.0, 1.54, 2.7):
        for op, reference in ((Brightness("x", "x"), enhance.Brightness), (Contrast("x", "x"), enhance.Contrast)):
            expected = np.array(reference(image_module.fromarray(image)).enhance(factor))
            np.testing.assert_array_equal(op.apply(image, factor), expected)


def test_enhance_factor_range_rua_level_and_errors() -> None:
    op = Brightness("x", "x", limit=0.2)
    factors = [op.get_params(None, _state(seed)) for seed in range(200)]  # type: ignore[arg-type]
    assert 0.8 <= min(factors) < 0.85 and 1.15 < max(factors) <= 1.2
    op.set_rua_level(0.5)
    assert op.limit == pytest.approx((-0.1, 0.1))
    assert Contrast("x", "x", limit=(0.1, 0.3)).limit == (0.1, 0.3)
    with pytest.raises(TypeError, match=r"uint8 images, but \['x'\] has dtype float32"):
        Brightness("x", "x").apply(np.zeros((2, 2, 3), np.float32), 1.0)
    with pytest.raises(ValueError, match="grayscale"):
        Contrast("x", "x").apply(np.zeros((2, 2, 2), np.uint8), 1.0)


# ------------------------------------------------------------------ RandomBrightnessContrast, RandomGamma
def test_random_brightness_contrast_uint8_lookup() -> None:
    image = _u8([0, 100, 120])
    np.testing.assert_array_equal(RandomBrightnessContrast("x", "x").apply(image, (2.0, 0.1)), [25, 225, 255])
    by_mean = RandomBrightnessContrast("x", "x", brightness_by_max=False)
    np.testing.assert_array_equal(by_mean.apply(_u8([0, 100]), (1.0, 0.2)), [10, 110])  # + 0.2 * mean 50


def test_random_brightness_contrast_float_is_clipped_to_one() -> None:
    out = RandomBrightnessContrast("x", "x").apply(np.array([0.1, 0.5], np.float32), (2.0, 0.1))
    np.testing.assert_allclose(out, [0.3, 1.0], rtol=1e-6)
    assert out.dtype == np.float32
    by_mean = RandomBrightnessContrast("x", "x", brightness_by_max=False)
    np.testing.assert_allclose(by_mean.apply(np.array([0.2, 0.6], np.float32), (0.5, 1.0)), [0.3, 0.5], rtol=1e-6)


def test_random_brightness_contrast_parameter_ranges() -> None:
    op = RandomBrightnessContrast("x", "x", brightness_limit=(0.1, 0.2), contrast_limit=0.3)
    params = np.array([op.get_params(None, _state(seed)) for seed in range(300)])  # type: ignore[arg-type]
    assert 0.7 <= params[:, 0].min() < 0.75 and 1.25 < params[:, 0].max() <= 1.3
    assert 0.1 <= params[:, 1].min() < 0.11 and 0.19 < params[:, 1].max() <= 0.2
    with pytest.raises(ValueError, match="brightness_limit must be a number or a pair"):
        RandomBrightnessContrast("x", "x", brightness_limit=(1, 2, 3))


def test_random_gamma_values_and_range() -> None:
    op = RandomGamma("x", "x")
    np.testing.assert_array_equal(op.apply(_u8([0, 128, 255]), 2.0), [0, 64, 255])  # 128: 64.25
    # albumentations' table truncates (k * (1/255)) * 255 below k for some k: gamma 1 lowers 24 levels by one.
    identity = op.apply(np.arange(256).astype(np.uint8), 1.0)
    assert np.count_nonzero(identity != np.arange(256)) == 24 and identity[33] == 32
    np.testing.assert_allclose(op.apply(np.array([0.5, 0.25], np.float32), 2.0), [0.25, 0.0625])
    gammas = [op.get_params(None, _state(seed)) for seed in range(200)]  # type: ignore[arg-type]
    assert 0.8 <= min(gammas) < 0.82 and 1.18 < max(gammas) <= 1.2
    with pytest.raises(ValueError, match=r"0 < low <= high, e.g. \(80, 120\)"):
        RandomGamma("x", "x", gamma_limit=100)


# ------------------------------------------------------------------ GaussianNoise
def test_gaussian_noise_adds_clips_and_truncates() -> None:
    op = GaussianNoise("x", "x")
    out = op.apply(_u8([10, 250, 100]), np.array([-20.7, 10.2, 0.9]))
    np.testing.assert_array_equal(out, [0, 255, 100])
    assert out.dtype == np.uint8
    out = op.apply(np.array([0.5, 0.9], np.float32), np.array([0.25, 0.3]))
    np.testing.assert_allclose(out, [0.75, 1.0])
    assert out.dtype == np.float32


def test_gaussian_noise_distribution_and_shared_noise() -> None:
    op = GaussianNoise(["a", "b"], ["a", "b"], var_limit=(4.0, 4.0), mean=10.0)
    noise = op.get_params(np.zeros((100, 100, 3), np.uint8), _state(0))
    assert noise.shape == (100, 100, 3)
    assert abs(noise.mean() - 10.0) < 0.1 and abs(noise.std() - 2.0) < 0.05  # variance 4: sigma 2
    base = np.full((4, 4, 3), 100, np.uint8)
    first, second = op.forward([base, base.copy()], _state(3))
    np.testing.assert_array_equal(first, second)  # one noise for both inputs
    assert GaussianNoise("x", "x", var_limit=5.0).var_limit == (0.0, 5.0)
    with pytest.raises(ValueError, match="non-negative"):
        GaussianNoise("x", "x", var_limit=(-1.0, 2.0))
    with pytest.raises(ValueError, match="need one shape"):
        op.forward([base, np.zeros((2, 2, 3), np.uint8)], _state(0))


# ------------------------------------------------------------------ Posterize, Solarize
def test_posterize_keeps_high_bits() -> None:
    op = Posterize("x", "x")
    np.testing.assert_array_equal(op.apply(_u8([183, 15, 255]), 4), [176, 0, 240])  # 0b1011_0111 -> 0b1011_0000
    np.testing.assert_array_equal(op.apply(_u8([183]), 0), [0])
    np.testing.assert_array_equal(op.apply(_u8([183]), 8), [183])
    np.testing.assert_array_equal(op.apply(_u8([[[255, 255, 77]]]), [1, 2, 8]), [[[128, 192, 77]]])


def test_posterize_bit_ranges_follow_albumentations() -> None:
    assert Posterize("x", "x").get_params(None, _state(0)) == 4  # type: ignore[arg-type]
    draws = {Posterize("x", "x", num_bits=(2, 3)).get_params(None, _state(s)) for s in range(50)}  # type: ignore
    assert draws == {2, 3}
    per_channel = Posterize("x", "x", num_bits=(8, 4, (5, 6)))  # ints r mean (0, r)
    assert per_channel.num_bits == [(0.0, 8.0), (0.0, 4.0), (5.0, 6.0)]
    draws = np.array([per_channel.get_params(None, _state(s)) for s in range(300)])  # type: ignore[arg-type]
    assert draws[:, 0].min() == 0 and draws[:, 0].max() == 8 and draws[:, 1].max() == 4
    assert set(draws[:, 2]) == {5, 6}


def test_posterize_errors() -> None:
    with pytest.raises(ValueError, match=r"ints in \[0, 8\]"):
        Posterize("x", "x", num_bits=9)
    with pytest.raises(ValueError, match=r"ints in \[0, 8\]"):
        Posterize("x", "x", num_bits=(5, 3))
    with pytest.raises(TypeError, match="works on uint8 images"):
        Posterize("x", "x").apply(np.zeros(3, np.float32), 4)
    with pytest.raises(ValueError, match=r"\(height, width, 3\)"):
        Posterize("x", "x").apply(np.zeros((2, 2), np.uint8), [1, 2, 3])


def test_solarize_inverts_from_the_threshold() -> None:
    op = Solarize("x", "x")
    assert op.threshold == (128.0, 128.0) and op.get_params(None, _state(0)) == 128.0  # type: ignore[arg-type]
    np.testing.assert_array_equal(op.apply(_u8([0, 127, 128, 255]), 128.0), [0, 127, 127, 0])
    out = op.apply(np.array([0.2, 0.5, 0.9], np.float32), 0.5)
    np.testing.assert_allclose(out, [0.2, 0.5, 0.1], rtol=1e-6)
    assert out.dtype == np.float32
    unchanged = np.array([0.2, 0.9], np.float32)
    np.testing.assert_array_equal(op.apply(unchanged, 128.0), unchanged)  # the default threshold: a no-op
    thresholds = [Solarize("x", "x", threshold=(0, 10)).get_params(None, _state(s)) for s in range(50)]  # type: ignore
    assert 0 <= min(thresholds) < 2 and 8 < max(thresholds) <= 10


# ------------------------------------------------------------------ ToGray, ToSepia
def test_to_gray_uses_opencv_weights() -> None:
    rgb = _u8([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [10, 20, 30]]])
    out = ToGray("x", "x").forward(rgb, {})
    # (4899 R + 9617 G + 1868 B + 8192) >> 14
    np.testing.assert_array_equal(out, np.repeat(_u8([[76, 150, 29, 18]])[..., None], 3, axis=-1))
    np.testing.assert_allclose(ToGray("x", "x").forward(np.array([[[1.0, 0.5, 0.0]]], np.float32), {}),
                               [[[0.5925] * 3]], rtol=1e-6)
    batch = ToGray("x", "x").forward_batch(np.stack([rgb, rgb[:, ::-1]]), {})
    np.testing.assert_array_equal(batch[1], out[:, ::-1])


def test_to_gray_leaves_gray_images_and_rejects_others() -> None:
    gray = _u8([[1, 2]])
    with pytest.warns(UserWarning, match="already gray"):
        np.testing.assert_array_equal(ToGray("x", "x").forward(gray, {}), gray)
    with pytest.raises(ValueError, match=r"\(height, width, 3\)"):
        ToGray("x", "x").forward(np.zeros((2, 2, 4), np.uint8), {})


def test_to_sepia_mixes_and_saturates() -> None:
    out = ToSepia("x", "x").forward(_u8([[[100, 50, 20], [255, 255, 255]]]), {})
    # (100, 50, 20): 81.53, 72.56, 56.52 rounded; white: 344.5, 306.8, 238.9 saturated
    np.testing.assert_array_equal(out, [[[82, 73, 57], [255, 255, 239]]])
    np.testing.assert_allclose(ToSepia("x", "x").forward(np.ones((1, 1, 3), np.float32), {}), [[[1.0, 1.0, 0.937]]],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="ToSepia needs images of shape"):
        ToSepia("x", "x").forward(np.zeros((2, 2)), {})


def test_uint16_gray_and_sepia_round_as_opencv() -> None:
    """cv2.cvtColor weighs uint16 pixels with 15-bit fixed-point weights; cv2.transform rounds uint16 results."""
    rgb = np.array([[[59069, 35814, 56438], [35227, 51824, 2718], [61415, 27728, 63515], [42028, 8397, 65227]]],
                   np.uint16)
    gray = ToGray("x", "x").forward(rgb, {})
    assert gray.dtype == np.uint16
    np.testing.assert_array_equal(gray[..., 0], [[45118, 41264, 41880, 24931]])  # cv2 4.11's values
    rgb = np.array([[[917, 12030, 23143], [34256, 45369, 56482], [37682, 48795, 59908]]], np.uint16)
    sepia = ToSepia("x", "x").forward(rgb, {})
    assert sepia.dtype == np.uint16
    np.testing.assert_array_equal(sepia, [[[13985, 12461, 9705], [59026, 52567, 40944], [63655, 56689, 44154]]])


def test_brightness_contrast_and_solarize_refuse_dtypes_without_a_maximum() -> None:
    """albumentations fails on them (no MAX_VALUES_BY_DTYPE entry) rather than clip to [0, 1]."""
    for dtype in (np.int32, np.int64, np.bool_):
        image = np.ones((2, 2, 3), dtype)
        with pytest.raises(TypeError, match=f"has dtype {np.dtype(dtype)}"):
            RandomBrightnessContrast("x", "x").apply(image, (1.2, 0.1))
        with pytest.raises(TypeError, match=f"has dtype {np.dtype(dtype)}"):
            Solarize("x", "x").apply(image, 128.0)
    np.testing.assert_allclose(Solarize("x", "x").apply(np.array([0.2, 0.7]), 0.5), [0.2, 0.3])


# ------------------------------------------------------------------ ChannelShuffle, ChannelDropout, RGBShift
def test_channel_shuffle_permutes_alike_for_every_input() -> None:
    image = np.arange(12).reshape(2, 2, 3)
    np.testing.assert_array_equal(ChannelShuffle("x", "x").apply(image, np.array([2, 0, 1])), image[..., [2, 0, 1]])
    first, second = ChannelShuffle(["a", "b"], ["a", "b"]).forward([image, image + 100], _state(4))
    np.testing.assert_array_equal(second, first + 100)
    seen = {tuple(ChannelShuffle("x", "x").get_params(image, _state(s))) for s in range(60)}
    assert len(seen) == 6  # every permutation of 3 channels
    with pytest.raises(ValueError, match="channels last"):
        ChannelShuffle("x", "x").forward(np.zeros((2, 2)), _state(0))


def test_channel_dropout_fills_chosen_channels() -> None:
    image = np.ones((2, 2, 4), np.float32)
    out = ChannelDropout("x", "x", fill_value=7).apply(image, np.array([1, 3]))
    np.testing.assert_array_equal(out[0, 0], [1, 7, 1, 7])
    assert out.dtype == np.float32 and image[0, 0, 1] == 1  # the input is not changed
    op = ChannelDropout("x", "x", channel_drop_range=(1, 2))
    draws = [op.get_params(image, _state(s)) for s in range(60)]
    assert {len(d) for d in draws} == {1, 2} and all(len(set(d)) == len(d) for d in draws)
    with pytest.raises(ValueError, match="at least one must stay"):
        ChannelDropout("x", "x", channel_drop_range=(1, 3)).get_params(np.zeros((2, 2, 3)), _state(0))
    with pytest.raises(ValueError, match="several channels"):
        ChannelDropout("x", "x").get_params(np.zeros((2, 2, 1)), _state(0))
    with pytest.raises(ValueError, match="1 <= min <= max"):
        ChannelDropout("x", "x", channel_drop_range=(0, 1))


def test_rgb_shift_per_channel_offsets() -> None:
    out = RGBShift("x", "x").apply(_u8([[[10, 250, 100]]]), np.array([-20.5, 10.7, 0.4]))
    np.testing.assert_array_equal(out, [[[0, 255, 100]]])
    out = RGBShift("x", "x").apply(np.full((1, 1, 3), 0.5, np.float32), np.array([0.25, -0.75, 0.0]))
    np.testing.assert_allclose(out, [[[0.75, 0.0, 0.5]]])
    assert out.dtype == np.float32
    shifts = np.array([RGBShift("x", "x", r_shift_limit=(1, 2), g_shift_limit=0).get_params(None, _state(s))
                       for s in range(100)])  # type: ignore[arg-type]
    assert shifts[:, 0].min() >= 1 and shifts[:, 0].max() <= 2 and np.all(shifts[:, 1] == 0)
    assert shifts[:, 2].min() < -10 and shifts[:, 2].max() > 10
    with pytest.raises(ValueError, match=r"RGBShift needs images of shape \(height, width, 3\)"):
        RGBShift("x", "x").forward(np.zeros((2, 2, 1), np.uint8), _state(0))


# ------------------------------------------------------------------ ToArray
def test_to_array_converts_with_dtype() -> None:
    out = ToArray(["a", "b"], ["a", "b"], dtype="float32").forward([[1, 2], 3], {})
    assert out[0].dtype == np.float32 and out[0].tolist() == [1.0, 2.0] and out[1].shape == ()
    assert ToArray("a", "a").forward([[1, 2]], {})[0].dtype.kind == "i"
    with pytest.raises(ValueError, match="ToArray cannot make 'a'"):
        ToArray("a", "a", dtype="int32").forward([["x"]], {})
    with pytest.raises(ValueError, match="same position"):
        ToArray(["a", "b"], "a")


# ------------------------------------------------------------------ dtypes
def _float_ops() -> list[NumpyOp]:
    return [RandomBrightnessContrast("x", "x"), RandomGamma("x", "x"), GaussianNoise("x", "x", var_limit=0.01),
            Solarize("x", "x", threshold=0.5), ToGray("x", "x"), ToSepia("x", "x"), ChannelShuffle("x", "x"),
            ChannelDropout("x", "x"), RGBShift("x", "x", r_shift_limit=0.1, g_shift_limit=0.1, b_shift_limit=0.1)]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_every_op_keeps_dtype_and_shape(dtype: type) -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (5, 4, 3)).astype(np.uint8) if dtype == np.uint8 else \
        rng.random((5, 4, 3)).astype(np.float32)
    ops = _float_ops() + ([Brightness("x", "x"), Contrast("x", "x"), Posterize("x", "x")] if dtype == np.uint8 else [])
    for op in ops:
        out = op.forward([image.copy()], _state(1))[0]
        assert out.dtype == dtype and out.shape == image.shape, type(op).__name__
        if dtype == np.float32:
            assert 0.0 <= out.min() and out.max() <= 1.0, type(op).__name__


# ------------------------------------------------------------------ in a Pipeline
N = 8


def _dataset() -> NumpyDataset:
    images = np.random.default_rng(7).integers(0, 256, (N, 4, 4, 3), dtype=np.uint8)
    return NumpyDataset({"x": images, "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [Brightness("x", "x"), Contrast("x", "x"), RandomBrightnessContrast("x", "x"), RandomGamma("x", "x"),
            GaussianNoise("x", "x"), Posterize("x", "x", num_bits=(4, 7)), Solarize("x", "x", threshold=(100, 255)),
            ChannelShuffle("x", "x"), ChannelDropout("x", "x"), RGBShift("x", "x"), ToSepia("x", "x")]


def test_pipeline_draws_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=11, batch_size=3)
    with Pipeline(_dataset(), batch_size=3, ops=_ops())("train", 1) as loader:
        assert next(iter(loader))["x"].dtype == np.uint8
