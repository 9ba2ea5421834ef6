"""FastEstimator's math, statistics, random and inspection helpers on torch, TF and numpy inputs.

Expected values are written out by hand (or computed with plain numpy); every result must stay in the input's
framework, and the three frameworks must agree.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import fe_ray as fe  # noqa: E402
from tests.backend import tensor_helpers  # noqa: E402
from tests.backend.tensor_helpers import (  # noqa: E402
    CUBE,
    FRAMEWORKS,
    UNSUPPORTED_IDS,
    UNSUPPORTED_VALUES,
    assert_numpy_use_imports_neither_framework,
    assert_unsupported_type_error,
    make,
)

# Float maths: a small tolerance unless a test asks for another rtol.
check = partial(tensor_helpers.check, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------- element-wise
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sign(framework: str) -> None:
    check(fe.backend.sign(make(framework, [-2, 7, -19, 0], "int32")), framework, [-1, 1, -1, 0], "int32")
    check(fe.backend.sign(make(framework, [-0.5, 3.0, 0.0], "float32")), framework, [-1, 1, 0], "float32")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tensor_pow(framework: str) -> None:
    x = [[1.0, 4.0, 6.0], [2.3, 0.5, 0.0]]
    check(fe.backend.tensor_pow(make(framework, x, "float32"), 3.2), framework, np.power(np.float64(x), 3.2),
          "float32", rtol=1e-5)
    check(fe.backend.tensor_pow(make(framework, x, "float64"), 0.21), framework, np.power(np.float64(x), 0.21),
          "float64")
    check(fe.backend.tensor_pow(make(framework, [1, 2, 3], "int64"), 2), framework, [1, 4, 9], "int64")
    fractional = fe.backend.tensor_pow(make(framework, [1, 4, 9], "int64"), 0.5)  # integers -> floating point
    check(fractional, framework, [1.0, 2.0, 3.0], "float64" if framework == "np" else "float32")
    with pytest.raises(TypeError, match=r"tensor_pow: power must be an int or float, got str '2'"):
        fe.backend.tensor_pow(make(framework, [1.0]), "2")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tensor_pow_takes_tensor_and_numpy_powers(framework: str) -> None:
    # FE hands the power to torch.pow / tf.pow / np.power, which all take these.
    x = make(framework, [1.0, 2.0, 3.0], "float32")
    check(fe.backend.tensor_pow(x, make(framework, 2.0, "float32")), framework, [1, 4, 9], "float32")
    check(fe.backend.tensor_pow(x, np.float32(2.0)), framework, [1, 4, 9], "float32")
    promoted = "float64" if framework == "np" else "float32"  # numpy 2: an int64 scalar is no weak Python int
    check(fe.backend.tensor_pow(x, np.int64(3)), framework, [1, 8, 27], promoted)
    check(fe.backend.tensor_pow(x, np.array([1.0, 2.0, 3.0], "float32")), framework, [1, 4, 27], "float32")
    check(fe.backend.tensor_pow(x, make(framework, [3.0, 2.0, 1.0], "float32")), framework, [1, 4, 3], "float32")
    roots = fe.backend.tensor_pow(make(framework, [1, 4, 9], "int32"), make(framework, 0.5, "float32"))
    check(roots, framework, [1, 2, 3], "float64" if framework == "np" else "float32")
    if framework != "np":
        other = "tf" if framework == "torch" else "torch"
        with pytest.raises(TypeError, match=r"tensor_pow: power must be an int or float, got"):
            fe.backend.tensor_pow(x, make(other, 2.0))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tensor_sqrt(framework: str) -> None:
    expected = [[1.0, 2.0, math.sqrt(6)], [2.0, 3.0, 4.0]]
    check(fe.backend.tensor_sqrt(make(framework, [[1, 4, 6], [4, 9, 16]], "float32")), framework, expected,
          "float32")
    ints = fe.backend.tensor_sqrt(make(framework, [[1, 4, 6], [4, 9, 16]], "int32"))
    check(ints, framework, expected, "float64" if framework == "np" else "float32")


# ------------------------------------------------------------------------------------------ stats, normalise
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reduce_std(framework: str) -> None:
    x = make(framework, CUBE, "float32")
    cube = np.array(CUBE)
    check(fe.backend.reduce_std(x), framework, cube.std(), "float32")
    check(fe.backend.reduce_std(x, axis=0), framework, [[2.0, 2.0], [2.0, 2.0]])
    check(fe.backend.reduce_std(x, axis=1), framework, [[1.0, 1.0], [1.0, 1.0]])
    check(fe.backend.reduce_std(x, axis=[0, 2]), framework, cube.std(axis=(0, 2)))  # sqrt(4.25) twice
    check(fe.backend.reduce_std(x, keepdims=True), framework, [[[cube.std()]]])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_percentile(framework: str) -> None:
    x = make(framework, [[1, 2, 3], [4, 5, 6], [7, 8, 9]], "int32")
    check(fe.backend.percentile(x, percentiles=[66]), framework, [[[6]]], "int32")  # a list adds a leading axis
    check(fe.backend.percentile(x, percentiles=[66], axis=0), framework, [[[4, 5, 6]]])
    check(fe.backend.percentile(x, percentiles=66, axis=1), framework, [[2], [5], [8]])
    check(fe.backend.percentile(x, [0, 100], axis=-1, keepdims=False), framework, [[1, 4, 7], [3, 6, 9]])
    rng = np.random.default_rng(3)
    data = rng.normal(size=(4, 5, 6)).astype(np.float32)
    for percentiles, axis in ((37.5, None), ([10, 50, 95], (0, 2)), ([25], [-1, 0]), (99, 1)):
        expected = np.percentile(data, percentiles, axis=None if axis is None else tuple(axis) if isinstance(
            axis, list) else axis, keepdims=True, method="lower")
        check(fe.backend.percentile(make(framework, data), percentiles, axis=axis), framework, expected, "float32")
    with pytest.raises(ValueError, match=r"percentiles must lie in \[0, 100\], got \[50, 101\]"):
        fe.backend.percentile(x, [50, 101])
    with pytest.raises(ValueError, match=r"axis 2 does not exist in a tensor of shape \[3, 3\]"):
        fe.backend.percentile(x, 50, axis=2)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_zscore(framework: str) -> None:
    expected = [[-1.34164079, -0.4472136], [0.4472136, 1.34164079]]
    check(fe.backend.zscore(make(framework, [[0, 1], [2, 3]])), framework, expected,
          "float64" if framework == "np" else "float32", rtol=1e-6)
    check(fe.backend.zscore(make(framework, [5.0, 5.0], "float32")), framework, [0.0, 0.0])  # constant: no NaN


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tensor_normalize(framework: str) -> None:
    x = make(framework, CUBE, "float32")
    cube = np.array(CUBE)
    scalar = (cube - 0.5625 * 8) / (0.2864 * 8 + 1e-7)
    check(fe.backend.tensor_normalize(x, 0.5625, 0.2864, 8.0), framework, scalar, "float32", rtol=1e-5)
    per_channel = fe.backend.tensor_normalize(x, (0.5, 0.625), (0.2795, 0.2795), 8.0)
    mean, std = np.array([4.0, 5.0]), np.array([2.236, 2.236]) + 1e-7
    if framework == "torch":  # channels first (axis -3)
        expected = (cube - mean[:, None, None]) / std[:, None, None]
    else:  # channels last
        expected = (cube - mean) / std
    check(per_channel, framework, expected, "float32", rtol=1e-5)
    image = make(framework, np.full((3, 2, 2) if framework == "torch" else (2, 2, 3), 255, np.uint8))
    defaults = fe.backend.tensor_normalize(image)  # ImageNet statistics for 0..255 pixels, uint8 -> float32
    imagenet = (1 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    check(defaults, framework, np.broadcast_to(imagenet[:, None, None] if framework == "torch" else imagenet,
                                               (3, 2, 2) if framework == "torch" else (2, 2, 3)), "float32",
          rtol=1e-5)
    with pytest.raises(ValueError, match=r"3 mean values do not fit a tensor of shape \[2, 2, 2\]"):
        fe.backend.tensor_normalize(x, (0.1, 0.2, 0.3), 0.5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_iwd(framework: str) -> None:
    x = make(framework, [[0.5] * 5, [0.0] + [1.0] * 4], "float32")
    check(fe.backend.iwd(x), framework, [[0.2] * 5, [0.95] + [0.0125] * 4], "float32", rtol=1e-5)
    distances = np.array([[0.2, 1.0, 3.0], [2.0, 2.0, 0.5]])
    inverse = (1 / distances) ** 2
    check(fe.backend.iwd(make(framework, distances), power=2.0), framework, inverse / inverse.sum(-1, keepdims=True))
    floored = fe.backend.iwd(make(framework, [[0.0, 1.0]], "float32"), eps=0.5)  # explicit eps: 1 / 0.5 vs 1 / 1
    check(floored, framework, [[2 / 3, 1 / 3]], rtol=1e-6)
    with pytest.raises(ValueError, match=r"max_prob must lie strictly between 0 and 1, got 1\.0"):
        fe.backend.iwd(x, max_prob=1.0)
    with pytest.raises(ValueError, match=r"at least 2 classes"):
        fe.backend.iwd(make(framework, [[1.0]]))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lambertw(framework: str, dtype: str) -> None:
    z = np.array([-1 / math.e, -0.34, -0.32, -0.2, 0, 0.12, 0.15, math.e, 5, math.exp(1 + math.e), 100, 1e6])
    w = fe.backend.lambertw(make(framework, z, dtype))
    known = [-1, -0.6537, -0.5605, -0.2592, 0, 0.1077, 0.1315, 1, 1.3267, math.e, 3.3856, 11.3834]  # 4 decimals
    check(w, framework, known, dtype, rtol=1e-3)
    got = np.asarray(w, dtype=np.float64)
    tolerance = 1e-6 if dtype == "float32" else 1e-13  # w * exp(w) must give z back
    np.testing.assert_allclose(got * np.exp(got), z, rtol=tolerance, atol=tolerance)
    below = np.asarray(fe.backend.lambertw(make(framework, [-0.5, 1.0], dtype)))  # out of domain: NaN
    assert math.isnan(below[0]) and below[1] == pytest.approx(0.5671433, rel=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_lambertw_integer_input(framework: str) -> None:
    check(fe.backend.lambertw(make(framework, [0, 1], "int32")), framework, [0.0, 0.5671433],
          "float64" if framework == "np" else "float32", rtol=1e-6)


# ------------------------------------------------------------------------------------------------------ random
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_random_normal_like(framework: str) -> None:
    torch.manual_seed(0), tf.random.set_seed(0), np.random.seed(0)
    template = make(framework, np.zeros((200, 100), np.int64))
    noise = fe.backend.random_normal_like(template, mean=5.0, std=2.0)
    check(noise, framework, np.asarray(noise), "float32")  # framework, shape (200, 100), float32 by default
    assert abs(float(np.mean(np.asarray(noise))) - 5.0) < 0.1 and abs(float(np.std(np.asarray(noise))) - 2.0) < 0.1
    assert np.unique(np.asarray(noise)).size > 19000  # really random, not a constant
    half = fe.backend.random_normal_like(make(framework, np.zeros((4, 3))), dtype="half")
    assert np.asarray(half).dtype == np.float16 and np.asarray(half).shape == (4, 3)
    own = fe.backend.random_normal_like(make(framework, np.zeros(3), "float64"), dtype=None)
    assert np.asarray(own).dtype == np.float64


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_random_uniform_like(framework: str) -> None:
    torch.manual_seed(1), tf.random.set_seed(1), np.random.seed(1)
    noise = np.asarray(fe.backend.random_uniform_like(make(framework, np.ones((100, 100))), minval=-5.0, maxval=-3))
    assert noise.shape == (100, 100) and noise.dtype == np.float32
    assert noise.min() >= -5.0 and noise.max() < -3.0 and abs(noise.mean() + 4.0) < 0.05
    assert abs(noise.std() - 2 / math.sqrt(12)) < 0.05  # the std of U(a, b) is (b - a) / sqrt(12)
    default = np.asarray(fe.backend.random_uniform_like(make(framework, np.ones(1000)), dtype="double"))
    assert default.dtype == np.float64 and 0.0 <= default.min() and default.max() < 1.0


@pytest.mark.parametrize("framework", ["tf", "np"])
def test_random_uniform_like_draws_integers_on_tf_and_numpy(framework: str) -> None:
    tf.random.set_seed(2), np.random.seed(2)
    for name in ("int32", "int64"):
        noise = fe.backend.random_uniform_like(make(framework, np.ones((50, 40))), 0, 10, dtype=name)
        values = np.asarray(noise)
        assert values.dtype == np.dtype(name) and values.shape == (50, 40)
        assert values.min() == 0 and values.max() == 9  # [minval, maxval), every value drawn among 2000
    if framework == "tf":
        with pytest.raises(ValueError, match=r"integer noise in TF needs whole-number bounds, got minval 0\.5"):
            fe.backend.random_uniform_like(tf.ones(3), 0.5, 10, dtype="int32")


def test_random_uniform_like_refuses_integers_on_torch() -> None:
    with pytest.raises(ValueError, match=r"dtype 'int32' is no floating type noise can take here"):
        fe.backend.random_uniform_like(torch.ones(3), 0, 10, dtype="int32")  # torch.rand_like cannot either


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("call, message", [
    (lambda x: fe.backend.random_normal_like(x, dtype="int32"), r"dtype 'int32' is no floating type.*'float16'"),
    (lambda x: fe.backend.random_uniform_like(x, dtype="float128"), r"dtype 'float128' is no floating type"),
    (lambda x: fe.backend.random_normal_like(x, dtype=None), r"dtype=None takes the tensor's dtype, but int64"),
    (lambda x: fe.backend.random_normal_like(x, std=-1.0), r"std must be >= 0, got -1\.0"),
    (lambda x: fe.backend.random_uniform_like(x, minval=2.0, maxval=1.0), r"maxval \(1\.0\) must be greater")])
def test_random_rejects_bad_arguments(framework: str, call: Callable[[Any], Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(make(framework, [1, 2], "int64"))


def test_random_torch_follows_the_seed() -> None:
    template = torch.zeros(5)
    torch.manual_seed(3)
    first = fe.backend.random_normal_like(template)
    torch.manual_seed(3)
    assert torch.equal(first, fe.backend.random_normal_like(template))


def test_random_tf_traces_with_unknown_shape() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def noisy(x: tf.Tensor) -> tf.Tensor:
        return x + fe.backend.random_uniform_like(x, minval=0.0, maxval=0.5)

    out = noisy(tf.ones((4, 3))).numpy()
    assert out.shape == (4, 3) and out.min() >= 1.0 and out.max() < 1.5


def test_tf_math_in_traced_graph_matches_eager() -> None:
    funcs = [fe.backend.zscore, lambda x: fe.backend.percentile(x, [50], axis=[1, 2]), fe.backend.lambertw,
             lambda x: fe.backend.iwd(x + 1.0), lambda x: fe.backend.tensor_normalize(x, 0.5, 0.25, 1.0),
             lambda x: fe.backend.reduce_std(x, axis=-1)]

    @tf.function(input_signature=[tf.TensorSpec([None, 4, 3], tf.float32)])  # unknown batch size
    def traced(x: tf.Tensor) -> list[tf.Tensor]:
        return [func(x) for func in funcs]

    data = tf.constant(np.random.default_rng(4).random((2, 4, 3)), tf.float32)
    for graph, func in zip(traced(data), funcs):
        np.testing.assert_allclose(graph.numpy(), func(data).numpy(), rtol=1e-6)


# ---------------------------------------------------------------------------------------------- inspection
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_to_shape(framework: str) -> None:
    data = {"x": make(framework, np.ones((10, 15))), "y": [make(framework, np.ones(4)),
                                                           make(framework, np.ones((5, 3)))],
            "z": {"key": make(framework, np.ones((2, 2)))}, "n": 3}
    assert fe.backend.to_shape(data) == {"x": (10, 15), "y": [(4,), (5, 3)], "z": {"key": (2, 2)}, "n": ()}
    assert fe.backend.to_shape(data, add_batch=True) == {"x": [None, 10, 15], "y": [[None, 4], [None, 5, 3]],
                                                         "z": {"key": [None, 2, 2]}, "n": [None]}
    assert fe.backend.to_shape(data, exact_shape=False) == {"x": [None, None], "y": [[None], [None, None]],
                                                            "z": {"key": [None, None]}, "n": []}
    assert fe.backend.to_shape((make(framework, np.ones(2)),)) == ((2,),)  # tuples stay tuples


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_to_type_and_get_shape(framework: str) -> None:
    data = {"x": make(framework, np.ones((2, 2)), "float32"), "y": [make(framework, [1], "int8")], "n": 1.5}
    types = fe.backend.to_type(data)
    dtype_type = {"torch": torch.dtype, "tf": tf.DType, "np": np.dtype}[framework]
    assert isinstance(types["x"], dtype_type) and isinstance(types["y"][0], dtype_type)
    assert "float32" in str(types["x"]) and "int8" in str(types["y"][0])
    assert types["n"] == np.dtype("float64")
    assert fe.backend.get_shape(make(framework, np.zeros((3, 2, 2)))) == (3, 2, 2)
    with pytest.raises(TypeError, match=r"get_shape: tensor has unsupported type builtins\.list"):
        fe.backend.get_shape([1, 2])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_get_image_dims(framework: str) -> None:
    layout = (2, 3, 12, 10) if framework == "torch" else (2, 12, 10, 3)  # channels first for torch only
    assert fe.backend.get_image_dims(make(framework, np.zeros(layout))) == (3, 12, 10)
    assert fe.backend.get_image_dims(make(framework, np.zeros(layout[1:]))) == (3, 12, 10)
    with pytest.raises(ValueError, match=r"needs an image with 3 axes or a batch with 4, got shape \[12, 10\]"):
        fe.backend.get_image_dims(make(framework, np.zeros((12, 10))))


def test_get_shape_and_image_dims_in_a_traced_tf_graph_read_unknown_sizes() -> None:
    # FE's TF get_shape is tf.shape: sizes a traced graph does not know are its running sizes, usable in reshape.
    seen = {}

    @tf.function(input_signature=[tf.TensorSpec([None, None, 5, 3], tf.float32)])
    def traced(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        shape, dims = fe.backend.get_shape(x), fe.backend.get_image_dims(x)
        seen["shape"], seen["dims"] = shape, dims
        flat = fe.backend.reshape(x, [shape[0], shape[1], 15])
        return flat, tf.stack([tf.cast(size, tf.int32) for size in dims])

    flat, dims = traced(tf.ones((2, 4, 5, 3)))
    assert flat.shape == (2, 4, 15)
    np.testing.assert_array_equal(dims.numpy(), [3, 4, 5])  # channels, height, width
    assert isinstance(seen["shape"], tuple) and seen["shape"][2:] == (5, 3)  # known sizes stay Python ints
    assert all(tf.is_tensor(size) for size in seen["shape"][:2]) and seen["dims"][0] == 3
    assert fe.backend.get_shape(tf.ones((2, 4))) == (2, 4)  # eager: plain ints, as before


def test_check_nan_in_a_traced_tf_graph_gives_a_bool_tensor() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.int32)])
    def traced(x: tf.Tensor, ints: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        found = fe.backend.check_nan(x)
        assert tf.is_tensor(found) and found.dtype == tf.bool  # FE: a bool tensor (Python needs the values)
        return found, fe.backend.check_nan(ints), fe.backend.check_nan([x, 1.0])

    for values, expected in (([1.0, 2.0], False), ([1.0, np.nan], True), ([np.inf], True)):
        found, ints, listed = traced(tf.constant(values, tf.float32), tf.constant([1], tf.int32))
        assert bool(found) is expected and bool(listed) is expected and not bool(ints)
    assert fe.backend.check_nan(tf.constant([np.nan])) is True  # eager: a Python bool, as before


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_check_nan(framework: str) -> None:
    assert fe.backend.check_nan(make(framework, [[1.0, 2.0], [3.0, np.nan]])) is True
    assert fe.backend.check_nan(make(framework, [1.0, -np.inf])) is True  # infinities count too
    assert fe.backend.check_nan(make(framework, CUBE)) is False
    assert fe.backend.check_nan(make(framework, [1, 2], "int32")) is False
    assert fe.backend.check_nan({"a": [make(framework, [0.0]), float("nan")]}) is True
    assert fe.backend.check_nan(0.5) is False and fe.backend.check_nan(math.inf) is True
    with pytest.raises(TypeError, match=r"check_nan: cannot look for NaN in str"):
        fe.backend.check_nan("nan")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_convert_tensor_precision(framework: str) -> None:
    check(fe.backend.convert_tensor_precision(make(framework, [1, 2], "int64")), framework, [1.0, 2.0], "float32")
    check(fe.backend.convert_tensor_precision(make(framework, [0.5], "float64")), framework, [0.5], "float32")


def test_convert_tensor_precision_follows_mixed_precision() -> None:
    import keras

    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        assert fe.backend.convert_tensor_precision(tf.constant([1.0])).dtype == tf.float16
        assert fe.backend.convert_tensor_precision(np.ones(2)).dtype == np.float16
    finally:
        keras.mixed_precision.set_global_policy(policy)
    assert fe.backend.convert_tensor_precision(np.ones(2)).dtype == np.float32


# ------------------------------------------------------------------------------------------------ type errors
CALLS: dict[str, Callable[[Any], Any]] = {
    "sign": fe.backend.sign, "tensor_pow": lambda x: fe.backend.tensor_pow(x, 2), "tensor_sqrt": fe.backend.tensor_sqrt,
    "percentile": lambda x: fe.backend.percentile(x, 50), "reduce_std": fe.backend.reduce_std,
    "lambertw": fe.backend.lambertw,
    "zscore": fe.backend.zscore, "tensor_normalize": fe.backend.tensor_normalize, "iwd": fe.backend.iwd,
    "random_normal_like": fe.backend.random_normal_like, "random_uniform_like": fe.backend.random_uniform_like,
    "get_image_dims": fe.backend.get_image_dims, "convert_tensor_precision": fe.backend.convert_tensor_precision,
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("value", UNSUPPORTED_VALUES, ids=UNSUPPORTED_IDS)
def test_unsupported_inputs_raise_type_error(name: str, value: Any) -> None:
    assert_unsupported_type_error(name, CALLS[name], value)


def test_numpy_use_imports_neither_framework() -> None:
    assert_numpy_use_imports_neither_framework(
        "x = np.arange(6.0).reshape(2, 3)\n"
        "fe.backend.roll(fe.backend.tensor_sqrt(x), 1, 0); fe.backend.random_normal_like(x)\n"
        "fe.backend.dice_score(np.ones((1, 2, 2, 1)), np.ones((1, 2, 2, 1))); fe.backend.check_nan(x)\n"
        "fe.backend.to_shape({'a': x}); fe.backend.iwd(x + 1); fe.backend.tensor_normalize(np.ones((2, 2, 3)))\n")
