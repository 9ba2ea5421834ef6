"""Normalize, ToFloat, Binarize, Reshape, ChannelTranspose and CoarseDropout: hand-computed values, per sample and
as pops, and their argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from fe_ray.op.numpyop import forward_numpyop
from fe_ray.op.numpyop.univariate import Binarize, ChannelTranspose, CoarseDropout, Normalize, Reshape, ToFloat


def _rng(seed: int) -> dict[str, np.random.Generator]:
    return {"rng": np.random.default_rng(seed)}


# ------------------------------------------------------------------ Normalize
def test_normalize_per_channel_values() -> None:
    image = np.array([[[0, 255, 51], [255, 0, 102]]], dtype=np.uint8)  # (1, 2, 3)
    op = Normalize(inputs="x", outputs="x", mean=(0.5, 0.5, 0.2), std=(0.5, 0.25, 0.2))
    out = op.forward([image], {})[0]
    # channel 0: (v - 127.5) / 127.5; channel 1: (v - 127.5) / 63.75; channel 2: (v - 51) / 51
    np.testing.assert_allclose(out, [[[-1.0, 2.0, 0.0], [1.0, -2.0, 1.0]]], rtol=1e-6)
    assert out.dtype == np.float32
    batch = np.stack([image, 255 - image])
    expected_second = [[[1.0, -2.0, 3.0], [-1.0, 2.0, 2.0]]]  # 255 - image
    np.testing.assert_allclose(op.forward_batch([batch], {})[0], np.stack([out, expected_second]), rtol=1e-6,
                               atol=1e-6)


def test_normalize_defaults_are_imagenet_and_a_single_number_applies_to_every_channel() -> None:
    white = np.full((1, 1, 3), 255, dtype=np.uint8)
    expected = [(1 - 0.485) / 0.229, (1 - 0.456) / 0.224, (1 - 0.406) / 0.225]
    np.testing.assert_allclose(Normalize("x", "x").forward(white, {}).reshape(-1), expected, rtol=1e-6)
    gray = np.array([[0.0, 0.5, 1.0]], dtype=np.float32)  # (1, 3) with no channel axis
    out = Normalize("x", "x", mean=0.5, std=0.5, max_pixel_value=1.0).forward(gray, {})
    np.testing.assert_allclose(out, [[-1.0, 0.0, 1.0]])


def test_normalize_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"mean has 3 values .* shape \(2, 2\)"):
        Normalize("x", "x").forward(np.zeros((2, 2)), {})
    with pytest.raises(ValueError, match="neither may be 0"):
        Normalize("x", "x", std=(1.0, 0.0, 1.0))
    with pytest.raises(ValueError, match=r"got 1 input\(s\) \['x'\] and 2 output\(s\)"):
        Normalize("x", ["a", "b"])


def test_several_inputs_through_forward_numpyop() -> None:
    data = {"a": np.array([[255]], np.uint8), "b": np.array([[0]], np.uint8)}
    forward_numpyop([Normalize(("a", "b"), ("na", "nb"), mean=0.5, std=0.5)], data, {})
    np.testing.assert_allclose(data["na"], [[1.0]])
    np.testing.assert_allclose(data["nb"], [[-1.0]])


# ------------------------------------------------------------------ ToFloat, Binarize
def test_to_float_infers_the_divisor_from_the_dtype() -> None:
    np.testing.assert_allclose(ToFloat("x", "x").forward(np.array([0, 51, 255], np.uint8), {}), [0.0, 0.2, 1.0])
    np.testing.assert_allclose(ToFloat("x", "x").forward(np.array([65535], np.uint16), {}), [1.0])
    out = ToFloat("x", "x", max_value=10).forward(np.array([5, 10], np.int32), {})
    np.testing.assert_allclose(out, [0.5, 1.0])
    assert out.dtype == np.float32
    with pytest.raises(ValueError, match=r"cannot infer the maximum of dtype int64 .* Pass max_value"):
        ToFloat("x", "x").forward(np.array([5]), {})


def test_binarize_thresholds_inclusively() -> None:
    op = Binarize(0.5, inputs="x", outputs="x")
    out = op.forward(np.array([0.2, 0.5, 0.7]), {})
    np.testing.assert_array_equal(out, [0.0, 1.0, 1.0])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(op.forward_batch(np.array([[0.9, 0.1]]), {}), [[1.0, 0.0]])


# ------------------------------------------------------------------ Reshape, ChannelTranspose
def test_reshape_per_sample_and_per_batch() -> None:
    op = Reshape((2, -1), inputs="x", outputs="x")
    np.testing.assert_array_equal(op.forward(np.arange(6), {}), [[0, 1, 2], [3, 4, 5]])
    batch = np.arange(12).reshape(2, 6)
    np.testing.assert_array_equal(op.forward_batch(batch, {})[1], [[6, 7, 8], [9, 10, 11]])
    assert Reshape(4, "x", "x").forward(np.zeros((2, 2)), {}).shape == (4,)
    with pytest.raises(ValueError, match=r"cannot make \['x'\] of shape \(5,\) \(5 elements\) into \(2, -1\)"):
        op.forward(np.arange(5), {})
    with pytest.raises(ValueError, match="at most one -1"):
        Reshape((-1, -1), "x", "x")


def test_channel_transpose_moves_channels_first() -> None:
    image = np.arange(12).reshape(2, 2, 3)  # image[h, w, c] = 6h + 3w + c
    out = ChannelTranspose("x", "x").forward(image, {})
    assert out.shape == (3, 2, 2)
    np.testing.assert_array_equal(out[2], [[2, 5], [8, 11]])  # channel 2 of every pixel
    batch = ChannelTranspose("x", "x").forward_batch(np.stack([image, image + 100]), {})
    assert batch.shape == (2, 3, 2, 2) and batch[1, 0, 1, 1] == 109
    with pytest.raises(ValueError, match=r"permute 3 axes, but a sample of \['x'\] has shape \(2, 2\)"):
        ChannelTranspose("x", "x").forward(np.zeros((2, 2)), {})
    with pytest.raises(ValueError, match="permutation of 0..2"):
        ChannelTranspose("x", "x", axes=(0, 0, 1))


# ------------------------------------------------------------------ CoarseDropout
def test_coarse_dropout_hole_as_large_as_the_image_fills_it_per_channel() -> None:
    op = CoarseDropout("x", "x", max_holes=1, max_height=2, max_width=3, fill_value=(1, 2, 3))
    out = op.forward(np.zeros((2, 3, 3), np.uint8), _rng(0))
    np.testing.assert_array_equal(out, np.tile([1, 2, 3], (2, 3, 1)))


def test_coarse_dropout_places_holes_only_where_they_fit() -> None:
    image = np.zeros((2, 3))
    # A 2x2 hole in a 2x3 image has exactly two places.
    left = np.array([[9.0, 9.0, 0.0], [9.0, 9.0, 0.0]])
    right = left[:, ::-1]
    op = CoarseDropout("x", "x", max_holes=1, max_height=2, max_width=2, fill_value=9)
    seen = set()
    for seed in range(40):
        out = op.forward(image, _rng(seed))
        assert np.array_equal(out, left) or np.array_equal(out, right)
        seen.add(out[0, 0])
    assert seen == {0.0, 9.0}  # both places occur
    np.testing.assert_array_equal(image, np.zeros((2, 3)))  # the input is not changed in place


def test_coarse_dropout_fractions_counts_and_shared_holes() -> None:
    # max_height=1.0 and max_width=0.5 of a 4x4 image: one full-height hole 2 pixels wide.
    op = CoarseDropout(("a", "b"), ("a", "b"), max_holes=1, max_height=1.0, max_width=0.5, fill_value=1)
    a, b = op.forward([np.zeros((4, 4)), np.zeros((4, 4))], _rng(3))
    np.testing.assert_array_equal(a, b)  # several inputs share the sample's holes
    assert a.sum() == 8 and (a.sum(axis=0) > 0).sum() == 2
    # 1x1 holes: between min_holes and max_holes pixels get filled (fewer only if holes overlap).
    counts = {int(CoarseDropout("x", "x", max_holes=3, min_holes=2, max_height=1, max_width=1, fill_value=1)
                  .forward(np.zeros((20, 20)), _rng(seed)).sum()) for seed in range(30)}
    assert counts <= {1, 2, 3} and {2, 3} <= counts


@pytest.mark.parametrize("kwargs, match", [({"min_holes": 3, "max_holes": 2}, "0 <= min_holes <= max_holes"),
                                           ({"max_height": 0}, r"ints >= 1 \(pixels\) or floats in \(0, 1\]"),
                                           ({"min_width": 0.5, "max_width": 4}, "mix pixels and fractions"),
                                           ({"min_height": 5, "max_height": 4}, "min_height=5 exceeds max_height=4")])
def test_coarse_dropout_argument_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CoarseDropout("x", "x", **kwargs)  # type: ignore[arg-type]


def test_coarse_dropout_as_a_pop_draws_per_sample() -> None:
    np.random.seed(0)  # the fallback generator is seeded from numpy's global one
    batch = CoarseDropout("x", "x", max_holes=1, max_height=1, max_width=1, fill_value=1).forward_batch(
        np.zeros((30, 5, 5)), {})
    assert batch.shape == (30, 5, 5) and np.all(batch.sum(axis=(1, 2)) == 1)
    assert len({int(np.argmax(sample)) for sample in batch}) > 1  # not one hole for the whole batch
