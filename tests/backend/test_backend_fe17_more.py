"""fe_ray.backend.watch, random_mix_patch and resize_3d (FastEstimator 1.7 names and signatures) for torch and TF
tensors, eager and inside a traced tf.function, checked against FastEstimator's documented examples and numpy."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.backend import random_mix_patch, resize3d, resize_3d, watch  # noqa: E402

# FastEstimator's resize_3d example: a 2 x 2 x 2 volume doubled in every direction (each voxel becomes a 2-cube).
VOLUME = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
DOUBLED = VOLUME.repeat(2, axis=0).repeat(2, axis=1).repeat(2, axis=2)


def test_exported_under_fe_names() -> None:
    assert fe.backend.watch is watch and fe.backend.random_mix_patch is random_mix_patch
    assert fe.backend.resize_3d is resize_3d and resize3d is resize_3d
    for name in ("watch", "random_mix_patch", "resize_3d", "resize3d"):
        assert name in fe.backend.__all__


# ------------------------------------------------------------------------------------------------------------ watch
def test_watch_torch_copies_once_and_leaves_the_original() -> None:
    x = torch.ones(3)
    watched = watch(x)
    assert watched.requires_grad and not x.requires_grad
    assert watch(watched) is watched  # already differentiable: no second copy
    (watched * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(watched.grad.numpy(), [1.0, 2.0, 3.0])


def test_watch_tf_tape_records_a_constant() -> None:
    x = tf.constant([1.0, -2.0])
    with tf.GradientTape() as tape:
        assert watch(x, tape=tape) is x
        y = tf.reduce_sum(x ** 3)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 3 * np.array([1.0, 4.0]))


def test_watch_errors() -> None:
    with pytest.raises(TypeError, match="floating-point"):
        watch(torch.ones(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="tape="):
        watch(tf.constant([1.0]))
    with pytest.raises(TypeError, match="unsupported type"):
        watch(np.ones(2))


# ------------------------------------------------------------------------------------------------- random_mix_patch
def patch_by_hand(height: int, width: int, x: float, y: float, lam: float) -> tuple[int, int, int, int]:
    side = np.sqrt(1 - lam)
    x1 = np.round(max(width * x - width * side / 2, 0))
    x2 = np.round(min(width * x + width * side / 2, width))
    y1 = np.round(max(height * y - height * side / 2, 0))
    y2 = np.round(min(height * y + height * side / 2, height))
    return int(x1), int(x2), int(y1), int(y2)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_random_mix_patch_fe_example(framework: str) -> None:
    """FastEstimator's test: a 32 x 32 batch, x = y = 0.25, lam = 0.5 give the box (0, 19, 0, 19) and 32 x 32."""
    if framework == "torch":
        images, scalars = torch.rand(4, 3, 32, 32), [torch.tensor([v]) for v in (0.25, 0.25, 0.5)]
    else:
        images, scalars = tf.random.uniform((4, 32, 32, 3)), [tf.constant([v]) for v in (0.25, 0.25, 0.5)]
    x1, x2, y1, y2, width, height = random_mix_patch(images, *scalars)
    assert [int(np.asarray(v)[0]) for v in (x1, x2, y1, y2)] == [0, 19, 0, 19]
    assert (width, height) == (32, 32)
    assert "int32" in str(x1.dtype)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_random_mix_patch_non_square_matches_hand_formula(framework: str) -> None:
    """Width and height are read from each framework's layout; plain numbers are accepted for x, y and lam."""
    shape = (2, 3, 20, 50) if framework == "torch" else (2, 20, 50, 3)
    images = torch.zeros(shape) if framework == "torch" else tf.zeros(shape)
    for x, y, lam in ((0.9, 0.1, 0.7), (0.5, 0.5, 0.51), (0.05, 0.95, 0.9)):
        box = random_mix_patch(images, x, y, lam)
        assert tuple(int(np.asarray(v)) for v in box[:4]) == patch_by_hand(20, 50, x, y, lam)
        assert box[4:] == (50, 20)


def test_random_mix_patch_traced_with_unknown_sizes() -> None:
    """In a graph traced for any image size, width and height become int32 scalars of the running batch."""

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
    def box(images: tf.Tensor) -> tuple[tf.Tensor, ...]:
        return random_mix_patch(images, tf.constant(0.9), tf.constant(0.1), tf.constant(0.7))

    values = [int(v) for v in box(tf.zeros((1, 20, 50, 3)))]
    assert values == [*patch_by_hand(20, 50, 0.9, 0.1, 0.7), 50, 20]


def test_random_mix_patch_rejects_a_flat_tensor() -> None:
    with pytest.raises(ValueError, match="3 axes or a batch with 4"):
        random_mix_patch(torch.zeros(4, 5), 0.5, 0.5, 0.5)


# -------------------------------------------------------------------------------------------------------- resize_3d
def test_resize_3d_fe_example_torch_and_tf() -> None:
    """torch (N, C, D, H, W) and TF (N, D, H, W, C) both give FastEstimator's doubled volume."""
    torch_out = resize_3d(torch.tensor(VOLUME[None, None]), output_shape=[4, 4, 4])
    np.testing.assert_array_equal(torch_out.numpy()[0, 0], DOUBLED)
    tf_out = resize_3d(tf.constant(VOLUME[None, ..., None]), output_shape=[4, 4, 4])
    assert tf_out.shape == (1, 4, 4, 4, 1)
    np.testing.assert_array_equal(tf_out.numpy()[0, ..., 0], DOUBLED)


def test_resize_3d_area_averages_blocks() -> None:
    """'area' down-scaling by whole factors is the mean of each block, in both frameworks and a traced graph."""
    rng = np.random.default_rng(0)
    volumes = rng.random((2, 4, 6, 8, 3), dtype=np.float32)  # channels last
    expected = volumes.reshape(2, 2, 2, 3, 2, 4, 2, 3).mean(axis=(2, 4, 6))
    by_torch = resize_3d(torch.tensor(np.moveaxis(volumes, -1, 1)), [2, 3, 4], resize_mode="area")
    np.testing.assert_allclose(np.moveaxis(by_torch.numpy(), 1, -1), expected, rtol=1e-5)
    traced = tf.function(lambda v: resize_3d(v, [2, 3, 4], "area"),
                         input_signature=[tf.TensorSpec([None, 4, 6, 8, 3], tf.float32)])
    np.testing.assert_allclose(traced(tf.constant(volumes)).numpy(), expected, rtol=1e-5)


def test_resize_3d_nearest_tf_keeps_each_voxel_when_downsampling() -> None:
    """TF's half-pixel grid: halving picks source voxel 2i + 1 along each axis."""
    volumes = np.arange(2 * 4 * 4 * 4, dtype=np.float32).reshape(2, 4, 4, 4, 1)
    out = resize_3d(tf.constant(volumes), [2, 2, 2]).numpy()
    np.testing.assert_array_equal(out, volumes[:, 1::2, 1::2, 1::2])


def test_resize_3d_errors() -> None:
    volume = torch.zeros(1, 1, 2, 2, 2)
    with pytest.raises(ValueError, match="valid choices are \\['nearest', 'area'\\]"):
        resize_3d(volume, [4, 4, 4], resize_mode="bilinear")
    with pytest.raises(ValueError, match="three positive ints"):
        resize_3d(volume, [4, 4])
    with pytest.raises(ValueError, match="batch of volumes"):
        resize_3d(torch.zeros(1, 2, 2, 2), [4, 4, 4])
    with pytest.raises(TypeError, match="torch or TF tensor"):
        resize_3d(np.zeros((1, 2, 2, 2, 1)), [4, 4, 4])
