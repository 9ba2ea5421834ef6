"""FastEstimator's layout and indexing helpers (roll, flip, transpose, gather, gather_from_batch) on torch, TF and
numpy inputs; each result must stay in the input's framework and hold the hand-written values.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import fe_ray as fe  # noqa: E402
from tests.backend.tensor_helpers import (  # noqa: E402
    FRAMEWORKS,
    UNSUPPORTED_IDS,
    UNSUPPORTED_VALUES,
    assert_unsupported_type_error,
    check,
    make,
)


# ------------------------------------------------------------------------------------------------------ layout
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_roll(framework: str) -> None:
    x = make(framework, [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])
    check(fe.backend.roll(x, shift=1, axis=0), framework, [[5, 6, 7], [1, 2, 3]])
    check(fe.backend.roll(x, shift=2, axis=1), framework, [[2, 3, 1], [6, 7, 5]])
    check(fe.backend.roll(x, shift=-2, axis=1), framework, [[3, 1, 2], [7, 5, 6]])
    check(fe.backend.roll(x, shift=[-1, -1], axis=[0, 1]), framework, [[6, 7, 5], [2, 3, 1]])
    for shift, axis in ((1, [0, 1]), ([1, 2], [0]), ([1, 2], 0)):
        with pytest.raises(ValueError, match=r"roll: shift .* and axis .* do not pair up"):
            fe.backend.roll(x, shift=shift, axis=axis)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_roll_takes_tensor_and_numpy_shifts_and_tuple_axes(framework: str) -> None:
    # FE passes shift / axis straight to the framework's roll, which takes all of these.
    x = make(framework, [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])
    check(fe.backend.roll(x, make(framework, 1, "int32"), 1), framework, [[3, 1, 2], [7, 5, 6]])
    check(fe.backend.roll(x, np.int64(1), np.int64(0)), framework, [[5, 6, 7], [1, 2, 3]])
    check(fe.backend.roll(x, 1, (0,)), framework, [[5, 6, 7], [1, 2, 3]])
    check(fe.backend.roll(x, [1], 0), framework, [[5, 6, 7], [1, 2, 3]])
    check(fe.backend.roll(x, make(framework, [-1, -1]), (0, 1)), framework, [[6, 7, 5], [2, 3, 1]])
    check(fe.backend.roll(x, np.array([2]), [np.int32(1)]), framework, [[2, 3, 1], [6, 7, 5]])
    with pytest.raises(TypeError, match=r"roll: shift must be an int, a list of ints or an integer tensor, got 1\.5"):
        fe.backend.roll(x, 1.5, 0)


def test_roll_reads_a_traced_tf_shift_in_the_graph() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([], tf.int32)])
    def rolled(x: tf.Tensor, shift: tf.Tensor) -> tf.Tensor:
        return fe.backend.roll(x, shift, 1)

    check(rolled(tf.constant([[1.0, 2.0, 3.0]]), tf.constant(2)), "tf", [[2, 3, 1]])


# --------------------------------------------------------------------------------------------------- indexing
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gather_from_batch(framework: str) -> None:
    index = make(framework, [1, 0, 1])
    check(fe.backend.gather_from_batch(make(framework, [[0, 1], [2, 3], [4, 5]]), index), framework, [1, 2, 5])
    cube = make(framework, np.arange(12).reshape(3, 2, 2))
    check(fe.backend.gather_from_batch(cube, index), framework, [[2, 3], [4, 5], [10, 11]])
    column = make(framework, [[1], [0], [1]], "int32")  # (batch, 1) indices, int32
    check(fe.backend.gather_from_batch(cube, column), framework, [[2, 3], [4, 5], [10, 11]])
    check(fe.backend.gather_from_batch(make(framework, [[7, 8, 9]]), [2]), framework, [9])  # a batch of one
    other = "tf" if framework == "torch" else "torch"  # indices of another framework are converted
    check(fe.backend.gather_from_batch(cube, make(other, [0, 1, 0])), framework, [[0, 1], [6, 7], [8, 9]])
    with pytest.raises(ValueError, match=r"indices of shape \[2\] do not match a batch of 3"):
        fe.backend.gather_from_batch(cube, [0, 1])
    with pytest.raises(ValueError, match=r"tensor of shape \[3\] has no axis to gather from"):
        fe.backend.gather_from_batch(make(framework, [1, 2, 3]), [0, 0, 0])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gather(framework: str) -> None:
    rows = make(framework, [[0, 1], [2, 3], [4, 5]])
    check(fe.backend.gather(rows, make(framework, [1, 0, 1])), framework, [[2, 3], [0, 1], [2, 3]])
    check(fe.backend.gather(rows, np.array([[2], [0]])), framework, [[4, 5], [0, 1]])  # (k, 1) indices squeezed
    cube = make(framework, np.arange(12).reshape(3, 2, 2))
    check(fe.backend.gather(cube, [1, 0, 1]), framework, [[[4, 5], [6, 7]], [[0, 1], [2, 3]], [[4, 5], [6, 7]]])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_flip(framework: str) -> None:
    x = make(framework, np.arange(12).reshape(3, 2, 2), "int32")
    check(fe.backend.flip(x, axis=[0]), framework, [[[8, 9], [10, 11]], [[4, 5], [6, 7]], [[0, 1], [2, 3]]], "int32")
    check(fe.backend.flip(x, axis=[0, 1]), framework, [[[10, 11], [8, 9]], [[6, 7], [4, 5]], [[2, 3], [0, 1]]])
    check(fe.backend.flip(x, axis=-1), framework, [[[1, 0], [3, 2]], [[5, 4], [7, 6]], [[9, 8], [11, 10]]])
    with pytest.raises(ValueError, match=r"flip: axis \[3\] does not exist.*valid choices are \[-3, -2, -1, 0, 1, 2\]"):
        fe.backend.flip(x, axis=[3])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_transpose(framework: str) -> None:
    check(fe.backend.transpose(make(framework, [[0, 1, 2], [3, 4, 5], [6, 7, 8]])), framework,
          [[0, 3, 6], [1, 4, 7], [2, 5, 8]])
    cube = np.arange(24).reshape(2, 3, 4)
    check(fe.backend.transpose(make(framework, cube)), framework, cube.transpose(2, 1, 0))  # all axes reversed
    check(fe.backend.transpose(make(framework, [1.5, 2.5], "float32")), framework, [1.5, 2.5], "float32")


# ------------------------------------------------------------------------------------------------ type errors
CALLS: dict[str, Callable[[Any], Any]] = {
    "roll": lambda x: fe.backend.roll(x, 1, 0), "flip": lambda x: fe.backend.flip(x, [0]),
    "transpose": fe.backend.transpose, "gather": lambda x: fe.backend.gather(x, [0]),
    "gather_from_batch": lambda x: fe.backend.gather_from_batch(x, [0]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("value", UNSUPPORTED_VALUES, ids=UNSUPPORTED_IDS)
def test_unsupported_inputs_raise_type_error(name: str, value: Any) -> None:
    assert_unsupported_type_error(name, CALLS[name], value)


def test_tf_layout_in_traced_graph() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None], tf.int32)])
    def pick(x: tf.Tensor, index: tf.Tensor) -> tf.Tensor:  # unknown batch size: checks must let it through
        return fe.backend.gather_from_batch(fe.backend.flip(fe.backend.roll(x, 1, 1), [1]), index)

    out = pick(tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), tf.constant([0, 2]))
    check(out, "tf", [2.0, 6.0], "float32")  # rows rolled to [3, 1, 2] / [6, 4, 5], flipped to [2, 1, 3] / [5, 4, 6]
