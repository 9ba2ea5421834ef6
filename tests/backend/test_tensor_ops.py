"""FastEstimator's tensor helpers (``fe.backend.argmax`` ... ``fe.backend.where``) on torch, TF and numpy inputs.

Expected values are FastEstimator's documented examples; each result must stay in the input's framework.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import fe_ray as fe  # noqa: E402
from tests.backend.tensor_helpers import (  # noqa: E402
    CUBE,
    FRAMEWORKS,
    UNSUPPORTED_IDS,
    UNSUPPORTED_VALUES,
    assert_numpy_use_imports_neither_framework,
    assert_unsupported_type_error,
    check,
    make,
)


# ------------------------------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_argmax(framework: str) -> None:
    x = make(framework, [[2, 7, 5], [9, 1, 3], [4, 8, 2]], "int32")
    check(fe.backend.argmax(x), framework, [1, 2, 0], "int64")  # axis defaults to 0
    check(fe.backend.argmax(x, axis=1), framework, [1, 0, 1], "int64")
    check(fe.backend.argmax(x, axis=-1), framework, [1, 0, 1], "int64")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reduce_sum(framework: str) -> None:
    x = make(framework, CUBE, "float32")
    check(fe.backend.reduce_sum(x), framework, 36.0, "float32")
    check(fe.backend.reduce_sum(x, axis=0), framework, [[6, 8], [10, 12]], "float32")
    check(fe.backend.reduce_sum(x, axis=1), framework, [[4, 6], [12, 14]], "float32")
    check(fe.backend.reduce_sum(x, axis=[0, 2]), framework, [14, 22], "float32")
    check(fe.backend.reduce_sum(x, axis=(0, 2), keepdims=True), framework, [[[14], [22]]], "float32")
    check(fe.backend.reduce_sum(x, keepdims=True), framework, [[[36]]], "float32")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reduce_max(framework: str) -> None:
    x = make(framework, CUBE, "int32")
    check(fe.backend.reduce_max(x), framework, 8, "int32")
    check(fe.backend.reduce_max(x, axis=0), framework, [[5, 6], [7, 8]], "int32")
    check(fe.backend.reduce_max(x, axis=1), framework, [[3, 4], [7, 8]], "int32")
    check(fe.backend.reduce_max(x, axis=[0, 2]), framework, [6, 8], "int32")
    check(fe.backend.reduce_max(x, axis=[0, 2], keepdims=True), framework, [[[6], [8]]], "int32")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reduce_min(framework: str) -> None:
    x = make(framework, CUBE, "float32")
    check(fe.backend.reduce_min(x), framework, 1.0, "float32")
    check(fe.backend.reduce_min(x, axis=0), framework, [[1, 2], [3, 4]], "float32")
    check(fe.backend.reduce_min(x, axis=1), framework, [[1, 2], [5, 6]], "float32")
    check(fe.backend.reduce_min(x, axis=[0, 2]), framework, [1, 3], "float32")
    check(fe.backend.reduce_min(x, keepdims=True), framework, [[[1]]], "float32")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reductions_take_numpy_integer_axes(framework: str) -> None:
    x = make(framework, CUBE, "float32")  # an axis from numpy (np.argmax, a shape entry...) is an int, as for FE
    check(fe.backend.reduce_sum(x, axis=np.int64(1)), framework, [[4, 6], [12, 14]], "float32")
    check(fe.backend.reduce_max(x, axis=np.int32(0)), framework, [[5, 6], [7, 8]], "float32")
    check(fe.backend.reduce_min(x, axis=np.int64(-1), keepdims=True), framework, [[[1], [3]], [[5], [7]]])
    check(fe.backend.reduce_mean(x, axis=np.int64(1)), framework, [[2, 3], [6, 7]], "float32")
    check(fe.backend.reduce_std(x, axis=np.int64(0)), framework, [[2, 2], [2, 2]], "float32")
    check(fe.backend.reduce_sum(x, axis=[np.int64(0), 2]), framework, [14, 22], "float32")
    check(fe.backend.percentile(x, 50, axis=np.int64(2), keepdims=False), framework, [[1, 3], [5, 7]], "float32")
    with pytest.raises(TypeError, match=r"axis must be an int, a sequence of ints or None, got bool True"):
        fe.backend.reduce_sum(x, axis=True)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reductions_over_an_empty_axis_list(framework: str) -> None:
    # FE's torch reduce_max / min / mean loop over the listed axes, so [] reduces none (as TF and numpy); torch's
    # own amax / mean(dim=()) would reduce them all. FE hands sum and std the list, keeping torch's meaning there.
    x = make(framework, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "float32")
    for reduce in (fe.backend.reduce_max, fe.backend.reduce_min, fe.backend.reduce_mean):
        for keepdims in (False, True):
            check(reduce(x, axis=[], keepdims=keepdims), framework, [[1, 2, 3], [4, 5, 6]], "float32")
    check(fe.backend.reduce_mean(make(framework, [[1, 2]], "int32"), axis=[]), framework, [[1, 2]],
          "float64" if framework == "np" else "int32")
    if framework == "torch":
        check(fe.backend.reduce_sum(x, axis=[]), framework, 21.0, "float32")


# ---------------------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_squeeze(framework: str) -> None:
    x = make(framework, [[[[1], [2]]], [[[3], [4]]], [[[5], [6]]]], "int64")  # shape (3, 1, 2, 1)
    check(fe.backend.squeeze(x), framework, [[1, 2], [3, 4], [5, 6]], "int64")
    check(fe.backend.squeeze(x, axis=1), framework, [[[1], [2]], [[3], [4]], [[5], [6]]])
    check(fe.backend.squeeze(x, axis=3), framework, [[[1, 2]], [[3, 4]], [[5, 6]]])
    check(fe.backend.squeeze(x, axis=-1), framework, [[[1, 2]], [[3, 4]], [[5, 6]]])
    if framework == "torch":  # torch.squeeze (and so FE) leaves an axis of another length in place
        check(fe.backend.squeeze(x, axis=0), framework, [[[[1], [2]]], [[[3], [4]]], [[[5], [6]]]])
    with pytest.raises(ValueError, match=r"axis 4 .*valid choices are \[(0, )?1, (2, )?3\]"):  # no such axis
        fe.backend.squeeze(x, axis=4)
    if framework != "torch":  # length 3: TF and numpy refuse it
        with pytest.raises(ValueError, match=r"axis 0 .*valid choices are \[1, 3\]"):
            fe.backend.squeeze(x, axis=0)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_squeeze_takes_a_sequence_of_axes(framework: str) -> None:
    x = make(framework, np.arange(3).reshape(1, 3, 1), "int64")
    check(fe.backend.squeeze(x, axis=(0, 2)), framework, [0, 1, 2], "int64")
    check(fe.backend.squeeze(x, axis=[-1]), framework, [[0, 1, 2]], "int64")
    check(fe.backend.squeeze(x, axis=[np.int64(0)]), framework, [[0], [1], [2]], "int64")
    if framework == "torch":
        check(fe.backend.squeeze(torch.ones(1, 3), axis=1), framework, [[1, 1, 1]])  # as torch.squeeze
        check(fe.backend.squeeze(x, axis=[0, 1]), framework, [[0], [1], [2]], "int64")
    else:
        with pytest.raises(ValueError, match=r"axis \[0, 1\] cannot be squeezed from shape \[1, 3, 1\]"):
            fe.backend.squeeze(x, axis=[0, 1])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_expand_dims(framework: str) -> None:
    x = make(framework, [2, 7, 5])
    check(fe.backend.expand_dims(x, axis=0), framework, [[2, 7, 5]])
    check(fe.backend.expand_dims(x), framework, [[2], [7], [5]])  # axis defaults to 1
    check(fe.backend.expand_dims(x, axis=-1), framework, [[2], [7], [5]])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_permute(framework: str) -> None:
    x = make(framework, np.arange(12).reshape(3, 2, 2))
    check(fe.backend.permute(x, [2, 0, 1]), framework, [[[0, 2], [4, 6], [8, 10]], [[1, 3], [5, 7], [9, 11]]])
    check(fe.backend.permute(x, [0, 2, 1]), framework, [[[0, 2], [1, 3]], [[4, 6], [5, 7]], [[8, 10], [9, 11]]])
    for bad in ([0, 1], [0, 0, 1], [0, 1, 3], [0, -3, 1], [0, 1, -4]):
        with pytest.raises(ValueError, match=r"valid choices hold each of \[0, 1, 2\]"):
            fe.backend.permute(x, bad)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_permute_takes_negative_axes(framework: str) -> None:
    x = make(framework, np.arange(24).reshape(2, 3, 4))
    expected = np.transpose(np.arange(24).reshape(2, 3, 4), (2, 0, 1))
    check(fe.backend.permute(x, [-1, 0, 1]), framework, expected)
    check(fe.backend.permute(x, [2, -3, -2]), framework, expected)
    if framework == "tf":
        traced = tf.function(lambda t: fe.backend.permute(t, [-1, 0, 1]),
                             input_signature=[tf.TensorSpec([None, 3, 4], tf.int64)])
        check(traced(x), framework, expected)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reshape(framework: str) -> None:
    x = make(framework, CUBE, "float32")
    check(fe.backend.reshape(x, shape=[-1]), framework, [1, 2, 3, 4, 5, 6, 7, 8], "float32")
    check(fe.backend.reshape(x, shape=[2, 4]), framework, [[1, 2, 3, 4], [5, 6, 7, 8]])
    check(fe.backend.reshape(x, shape=[4, 2]), framework, [[1, 2], [3, 4], [5, 6], [7, 8]])
    check(fe.backend.reshape(x, shape=(2, 2, 2, 1)), framework, [[[[1], [2]], [[3], [4]]], [[[5], [6]], [[7], [8]]]])


# ----------------------------------------------------------------------------------------------- element-wise
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_clip_by_value(framework: str) -> None:
    x = make(framework, [-5, 4, 2, 0, 9, -2], "int64")
    check(fe.backend.clip_by_value(x, min_value=-2, max_value=3), framework, [-2, 3, 2, 0, 3, -2], "int64")
    check(fe.backend.clip_by_value(x, min_value=-2), framework, [-2, 4, 2, 0, 9, -2], "int64")
    check(fe.backend.clip_by_value(x, max_value=3), framework, [-5, 3, 2, 0, 3, -2], "int64")
    bounds = make(framework, -2, "int64"), make(framework, [3, 3, 1, 3, 3, 3], "int64")  # tensor bounds
    check(fe.backend.clip_by_value(x, *bounds), framework, [-2, 3, 1, 0, 3, -2], "int64")
    with pytest.raises(ValueError, match="both None"):
        fe.backend.clip_by_value(x)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tensor_round(framework: str) -> None:
    x = make(framework, [[1.25, 4.5, 6], [4, 9.11, 16.9], [2.5, 3.5, -0.5]], "float32")
    check(fe.backend.tensor_round(x), framework, [[1, 4, 6], [4, 9, 17], [2, 4, 0]], "float32")  # halves to even


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_abs(framework: str) -> None:
    check(fe.backend.abs(make(framework, [-2, 7, -19], "int32")), framework, [2, 7, 19], "int32")
    check(fe.backend.abs(make(framework, [-1.5, 0.0], "float32")), framework, [1.5, 0.0], "float32")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_exp(framework: str) -> None:
    expected = [0.1353353, 7.3890561, 2.7182818]
    check(fe.backend.exp(make(framework, [-2.0, 2, 1], "float32")), framework, expected, "float32", rtol=1e-6)
    ints = fe.backend.exp(make(framework, [-2, 2, 1], "int64"))  # FE's numpy example: integer input
    check(ints, framework, expected, "float64" if framework == "np" else "float32", rtol=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_maximum(framework: str) -> None:
    x, y = make(framework, [[2, 7, 6]], "int32"), make(framework, [[2, 7, 5]], "int32")
    check(fe.backend.maximum(x, y), framework, [[2, 7, 6]], "int32")
    check(fe.backend.maximum(x, make(framework, [[4], [1]], "int32")), framework, [[4, 7, 6], [2, 7, 6]])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_matmul(framework: str) -> None:
    a, b = make(framework, [[0, 1, 2], [3, 4, 5]], "int64"), make(framework, [[1], [2], [3]], "int64")
    check(fe.backend.matmul(a, b), framework, [[8], [26]], "int64")
    batch = make(framework, np.ones((4, 2, 3)), "float32")
    check(fe.backend.matmul(batch, make(framework, np.ones((3, 5)), "float32")), framework, np.full((4, 2, 5), 3.0))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_where(framework: str) -> None:
    n = make(framework, np.arange(9).reshape(3, 3), "int32")
    condition = n > 4
    check(fe.backend.where(condition, n, -1), framework, [[-1, -1, -1], [-1, -1, 5], [6, 7, 8]], "int32")
    check(fe.backend.where(condition, 1, n), framework, [[0, 1, 2], [3, 4, 1], [1, 1, 1]], "int32")
    floats = make(framework, np.arange(9).reshape(3, 3), "float32")
    check(fe.backend.where(condition, floats, 0), framework, [[0, 0, 0], [0, 0, 5], [6, 7, 8]], "float32")
    if framework != "np":  # as FE's torch version: a number takes the tensor's dtype (numpy promotes instead)
        check(fe.backend.where(condition, n, -1.7), framework, [[-1, -1, -1], [-1, -1, 5], [6, 7, 8]], "int32")
    check(fe.backend.where(condition, 1.0, 0.0), framework, [[0, 0, 0], [0, 0, 1], [1, 1, 1]])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_where_of_two_numbers_types_them_as_the_framework(framework: str) -> None:
    condition = make(framework, [True, False])
    floats = "float64" if framework == "np" else "float32"  # torch's default float, as FE's plain torch.where
    check(fe.backend.where(condition, 1.0, 0.0), framework, [1.0, 0.0], floats)
    if framework == "torch":  # numpy scalars count as numbers there too (TF and numpy keep their float64)
        check(fe.backend.where(condition, np.float64(1.0), np.float64(0.0)), framework, [1.0, 0.0], "float32")
    check(fe.backend.where(condition, 1, 0), framework, [1, 0], "int32" if framework == "tf" else "int64")
    check(fe.backend.where(condition, True, False), framework, [True, False], "bool")


# ------------------------------------------------------------------------------------------ dtypes and creation
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, expected", [("float16", "float16"), ("uint8", "uint8"), ("float64", "float64"),
                                            ("int32", "int32"), ("long", "int64"), ("bool", "bool")])
def test_cast_nested_by_name(framework: str, name: str, expected: str) -> None:
    data = {"x": make(framework, np.ones((10, 15))), "y": [make(framework, np.ones(4)), make(framework, np.ones(
        (5, 3)))], "z": {"key": make(framework, np.ones((2, 2)))}, "t": (make(framework, [1.7, 0.0]),)}
    out = fe.backend.cast(data, name)
    assert set(out) == {"x", "y", "z", "t"} and isinstance(out["y"], list) and isinstance(out["t"], tuple)
    check(out["x"], framework, np.ones((10, 15)), expected)
    check(out["y"][1], framework, np.ones((5, 3)), expected)
    check(out["z"]["key"], framework, np.ones((2, 2)), expected)
    check(out["t"][0], framework, np.array([1.7, 0.0]).astype(expected), expected, rtol=1e-3)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cast_to_reference_tensor(framework: str) -> None:
    reference = make(framework, [1], "int16")
    check(fe.backend.cast(np.array([1.9, -2.0]), reference), framework, [1, -2], "int16")
    check(fe.backend.cast([3, 4.5], reference), framework, [3, 4], "int16")  # numbers: one tensor, as FE
    check(fe.backend.cast(((1, 2), (3, np.float32(4.5))), reference), framework, [[1, 2], [3, 4]], "int16")
    listed = fe.backend.cast([make(framework, [1.5]), make(framework, [2.5])], reference)  # tensors: one by one
    assert isinstance(listed, list) and len(listed) == 2
    check(listed[1], framework, [2], "int16")
    out = fe.backend.cast({"a": make(framework, [2.0]), "b": 5}, reference)
    check(out["a"], framework, [2], "int16")
    check(out["b"], framework, 5, "int16")
    other = "tf" if framework == "torch" else "torch"  # a tensor of the other framework is converted over
    check(fe.backend.cast(make(other, [7.0, 8.0]), reference), framework, [7, 8], "int16")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_zeros_and_ones_like(framework: str) -> None:
    x = make(framework, [[0, 1], [2, 3]], "int64")
    check(fe.backend.zeros_like(x), framework, [[0, 0], [0, 0]], "int64")
    check(fe.backend.zeros_like(x, dtype="float32"), framework, [[0.0, 0.0], [0.0, 0.0]], "float32")
    check(fe.backend.ones_like(x), framework, [[1, 1], [1, 1]], "int64")
    check(fe.backend.ones_like(x, dtype="float32"), framework, [[1.0, 1.0], [1.0, 1.0]], "float32")
    check(fe.backend.ones_like(x, dtype="double"), framework, [[1.0, 1.0], [1.0, 1.0]], "float64")


@pytest.mark.parametrize("framework", ["tf", "np"])
@pytest.mark.parametrize("name", ["uint16", "uint32", "bfloat16", "complex64"])
def test_dtype_names_the_framework_knows_beyond_the_table(framework: str, name: str) -> None:
    # FE hands these names to TF / numpy; fe_ray's table lacks them, so the framework's own lookup decides.
    x = make(framework, [[1.0, 2.0]], "float32")
    for result, expected in ((fe.backend.cast(x, name), [[1, 2]]), (fe.backend.zeros_like(x, dtype=name), [[0, 0]]),
                             (fe.backend.ones_like(x, dtype=name), [[1, 1]])):
        assert str(result.dtype).removeprefix("<dtype: '").removesuffix("'>") == name
        np.testing.assert_array_equal(np.real(np.asarray(result)).astype(np.float32), expected)
    assert fe.backend.cast({"a": 1.0}, name)["a"].dtype.name == name  # numbers become numpy arrays


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("func", [lambda x: fe.backend.cast(x, "float1024"), lambda x: fe.backend.cast(x, "Float32"),
                                  lambda x: fe.backend.zeros_like(x, dtype="complex7"),
                                  lambda x: fe.backend.ones_like(x, dtype="text")])
def test_unknown_dtype_names_raise_value_error(framework: str, func: Callable[[Any], Any]) -> None:
    with pytest.raises(ValueError, match=r"unknown dtype '\w+'; valid choices are \['bool', 'uint8'.*'float64'"):
        func(make(framework, [1.0]))


# ------------------------------------------------------------------------------------------------ type errors
CALLS: dict[str, Callable[[Any], Any]] = {
    "argmax": fe.backend.argmax, "reduce_sum": fe.backend.reduce_sum, "reduce_max": fe.backend.reduce_max,
    "reduce_min": fe.backend.reduce_min, "squeeze": fe.backend.squeeze, "expand_dims": fe.backend.expand_dims,
    "clip_by_value": lambda x: fe.backend.clip_by_value(x, 0, 1), "zeros_like": fe.backend.zeros_like,
    "ones_like": fe.backend.ones_like, "permute": lambda x: fe.backend.permute(x, [0]),
    "reshape": lambda x: fe.backend.reshape(x, [-1]), "tensor_round": fe.backend.tensor_round,
    "abs": fe.backend.abs, "exp": fe.backend.exp, "maximum": lambda x: fe.backend.maximum(x, x),
    "matmul": lambda x: fe.backend.matmul(x, x), "where": lambda x: fe.backend.where(x, 1, 0),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("value", UNSUPPORTED_VALUES + [{"a": np.ones(2)}], ids=UNSUPPORTED_IDS + ["dict"])
def test_unsupported_inputs_raise_type_error(name: str, value: Any) -> None:
    assert_unsupported_type_error(name, CALLS[name], value)


def test_mixed_frameworks_and_bad_cast_reference_raise_type_error() -> None:
    with pytest.raises(TypeError, match=r"maximum: tensor1 \(ndarray\) and tensor2 \(Tensor\) must come from the same"):
        fe.backend.maximum(np.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match=r"matmul: a \(EagerTensor\) and b \(ndarray\)"):
        fe.backend.matmul(tf.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(TypeError, match=r"cast: dtype has unsupported type builtins\.float"):
        fe.backend.cast(np.ones(2), 1.0)


# ---------------------------------------------------------------------------------------- TF variables, graphs
def test_tf_variables_and_traced_graphs() -> None:
    variable = tf.Variable([[-1.0, 2.0]])
    check(fe.backend.abs(variable), "tf", [[1.0, 2.0]], "float32")
    check(fe.backend.zeros_like(variable, dtype="int32"), "tf", [[0, 0]], "int32")

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 3], tf.float32)])
    def step(x: tf.Tensor) -> tf.Tensor:  # unknown batch size: the checks must let traced shapes through
        y = fe.backend.permute(fe.backend.squeeze(x, axis=1), [1, 0])
        return fe.backend.reduce_sum(fe.backend.clip_by_value(y, max_value=2.0), axis=1)

    check(step(tf.constant([[[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]]])), "tf", [3.0, 4.0, 4.0], "float32")


def test_torch_gradients_flow() -> None:
    x = torch.tensor([[1.0, -3.0], [2.0, 0.5]], requires_grad=True)
    loss = fe.backend.reduce_sum(fe.backend.abs(fe.backend.where(x > 0, x, 0.0)) * 2) + fe.backend.reduce_max(x)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 0.0], [3.0, 2.0]])


def test_numpy_use_imports_neither_framework() -> None:
    assert_numpy_use_imports_neither_framework(
        "fe.backend.cast({'a': fe.backend.where(np.arange(3) > 0, 1, 0)}, 'float32')\n"
        "fe.backend.reduce_max(fe.backend.zeros_like(np.ones((2, 2))), axis=[0, 1])\n")
