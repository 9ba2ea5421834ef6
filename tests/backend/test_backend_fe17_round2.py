"""fe.backend.normalize and fe.backend.pow (FastEstimator 1.7's public names) on torch, TF and numpy inputs, eager
and inside a traced tf.function, checked against FastEstimator's documented examples; and fe.backend exporting every
public function of FastEstimator 1.7's fe.backend."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.backend import normalize, tensor_normalize  # noqa: E402
from fe_ray.backend import pow as fe_pow  # noqa: E402
from tests.backend.tensor_helpers import FRAMEWORKS, check, make, to_numpy  # noqa: E402

#: The public functions of FastEstimator 1.7's fastestimator/backend/__init__.py.
FE17_BACKEND = (
    "abs argmax binary_crossentropy cast categorical_crossentropy check_nan clip_by_value concat "
    "convert_tensor_precision dice_score exp expand_dims feed_forward flip focal_loss gather gather_from_batch "
    "get_gradient get_image_dims get_lr get_shape hinge huber iwd l1_loss l2_regularization lambertw load_model matmul "
    "maximum mean_squared_error normalize ones_like percentile permute pow random_normal_like random_uniform_like "
    "reduce_max reduce_mean reduce_min reduce_std reduce_sum reshape resize_3d roll save_model set_lr sign "
    "smooth_l1_loss sparse_categorical_crossentropy squeeze tensor_pow tensor_round tensor_sqrt to_shape to_tensor "
    "to_type transpose update_model watch where zeros_like zscore").split()
CUBE = [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]


def test_every_fastestimator_17_backend_function_is_exported() -> None:
    missing = [name for name in FE17_BACKEND if name not in fe.backend.__all__ or not callable(
        getattr(fe.backend, name, None))]
    assert not missing
    assert fe.backend.normalize is tensor_normalize and fe.backend.pow is fe_pow
    assert pow(2, 3) == 8  # the builtin is untouched outside fe_ray.backend


# -------------------------------------------------------------------------------------------------------- normalize
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_normalize_follows_fastestimators_examples(framework: str) -> None:
    """FastEstimator's documented values (one mean / std; and per-channel ones along the last axis)."""
    data = make(framework, CUBE, "float32")
    check(normalize(data, 0.5625, 0.2864, 8.0), framework,
          [[[-1.52752516, -1.0910894], [-0.65465364, -0.21821788]],
           [[0.21821788, 0.65465364], [1.0910894, 1.52752516]]], dtype="float32", rtol=1e-4)
    if framework != "torch":  # torch's channel axis is -3 (channels first)
        check(normalize(data, (0.5, 0.625), (0.2795, 0.2795), 8.0), framework,
              [[[-1.34164073, -1.34164073], [-0.44721358, -0.44721358]],
               [[0.44721358, 0.44721358], [1.34164073, 1.34164073]]], rtol=1e-4)


def test_normalize_defaults_are_imagenets() -> None:
    pixels = np.full((2, 2, 3), 255.0, np.float32)
    expected = (255.0 - np.array([0.485, 0.456, 0.406]) * 255) / (np.array([0.229, 0.224, 0.225]) * 255 + 1e-7)
    np.testing.assert_allclose(normalize(pixels), np.broadcast_to(expected, (2, 2, 3)), rtol=1e-5)


# ------------------------------------------------------------------------------------------------------------- pow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_pow_with_a_number_follows_fastestimators_example(framework: str) -> None:
    check(fe_pow(make(framework, [-2, 7, -19]), 2), framework, [4, 49, 361])
    check(fe_pow(make(framework, [4.0, 9.0]), 0.5), framework, [2.0, 3.0], rtol=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_pow_with_a_tensor_exponent(framework: str) -> None:
    base = make(framework, [[2.0, 3.0], [4.0, 9.0]], "float32")
    check(fe_pow(base, make(framework, [3.0, 0.5], "float32")), framework, [[8.0, np.sqrt(3.0)], [64.0, 3.0]],
          rtol=1e-6)
    check(fe_pow(make(framework, [2, 3]), make(framework, [3, 2])), framework, [8, 9])
    promoted = fe_pow(make(framework, [4, 9]), make(framework, [0.5, 0.5], "float32"))
    check(promoted, framework, [2.0, 3.0], rtol=1e-6)
    assert to_numpy(promoted, framework).dtype.kind == "f"  # an integer base with a float exponent: floats


def test_pow_inside_a_traced_tf_function() -> None:
    @tf.function
    def traced(base: tf.Tensor, power: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return fe_pow(base, power), fe_pow(base, 2)

    by_tensor, by_number = traced(tf.constant([1.5, 2.0]), tf.constant([2.0, 3.0]))
    np.testing.assert_allclose(by_tensor.numpy(), [2.25, 8.0], rtol=1e-6)
    np.testing.assert_allclose(by_number.numpy(), [2.25, 4.0], rtol=1e-6)


def test_pow_errors() -> None:
    with pytest.raises(TypeError, match="must come from the same framework"):
        fe_pow(torch.tensor([1.0]), np.array([2.0]))
    with pytest.raises(TypeError, match="unsupported type"):
        fe_pow([1.0, 2.0], 2)
    with pytest.raises(TypeError, match="unsupported type"):
        fe_pow(np.array([1.0]), "2")
