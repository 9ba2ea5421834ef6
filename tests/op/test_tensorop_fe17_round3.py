"""FastEstimator 1.7 parity of small TensorOps and backend helpers found in a third review: numpy integers where FE
takes them, UnHadamard under mixed precision, Average of one integer key, namedtuples in to_shape / to_type, and
concat / stack of nothing."""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.op.tensorop import Argmax, Average, Reshape, Resize3D, UnHadamard  # noqa: E402


def test_ops_take_numpy_integers_as_fastestimator_does() -> None:
    """``shape=(-1, np.prod(image_shape))`` is common FE code; torch's view, tf.reshape and interpolate take numpy
    integers, so FE's ops do (they were refused with a TypeError / ValueError)."""
    images = torch.zeros(2, 1, 4, 4)
    reshape = Reshape("x", "y", shape=(-1, np.prod((4, 4))))
    assert reshape.shape == (-1, 16) and all(type(size) is int for size in reshape.shape)
    assert tuple(reshape.forward([images], {})[0].shape) == (2, 16)
    assert Reshape("x", "y", shape=np.int64(32)).shape == 32
    argmax = Argmax("x", "y", axis=np.int64(1))
    assert argmax.axis == 1 and argmax.forward([torch.tensor([[0.1, 0.9], [0.8, 0.2]])], {})[0].tolist() == [1, 0]
    resize = Resize3D("x", "y", output_shape=(np.int64(4), 4, np.int32(4)))
    assert resize.output_shape == (4, 4, 4)
    assert tuple(resize.forward([torch.zeros(1, 1, 2, 2, 2)], {})[0].shape) == (1, 1, 4, 4, 4)
    assert tuple(fe.backend.resize_3d(tf.zeros((1, 2, 2, 2, 1)), (np.int64(3), 3, 3)).shape) == (1, 3, 3, 3, 1)
    for bad in (True, 2.0):  # still refused: a bool and a float are no sizes
        with pytest.raises(TypeError, match="Reshape shape must be an int or a tuple of ints"):
            Reshape("x", "y", shape=(-1, bad))
        with pytest.raises(TypeError, match="Argmax axis must be an int"):
            Argmax("x", "y", axis=bad)


@pytest.mark.parametrize("tensor", [torch.arange(10.0), tf.range(10.0), np.arange(10.0)], ids=["torch", "tf", "np"])
def test_percentile_takes_a_numpy_scalar(tensor: object) -> None:
    expected = np.asarray(fe.backend.percentile(tensor, 50))
    assert np.asarray(fe.backend.percentile(tensor, np.int64(50))).tolist() == expected.tolist()
    assert np.asarray(fe.backend.percentile(tensor, np.float32(50.0))).shape == expected.shape == (1,)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_unhadamard_scores_half_precision_codes_in_float32(framework: str) -> None:
    """With 30 classes (32-long codes) an exact match's inverse distance is ~76,000, past float16's 65,504: the
    probabilities were NaN under mixed precision. FE's float32 codebook promotes the predictions; so does fe_ray."""
    op = UnHadamard("code", "prob", n_classes=30)
    op.build(framework)
    codes = op.codes[:2]
    half = torch.tensor(codes).half() if framework == "torch" else tf.constant(codes, tf.float16)
    probs = np.asarray(fe.backend.to_number(op.forward([half], {})[0]))
    assert probs.dtype == np.float32 and not np.isnan(probs).any()
    np.testing.assert_allclose(probs.max(axis=-1), [0.99999, 0.99999], rtol=1e-5)
    assert probs.argmax(axis=-1).tolist() == [0, 1]


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_average_of_one_integer_key_is_a_float_mean(framework: str) -> None:
    """FE always divides the sum by the number of inputs, so one integer key gives floats too (it passed the
    integer tensor through)."""
    values = torch.tensor([1, 2]) if framework == "torch" else tf.constant([1, 2])
    one = Average("a", "m").forward([values], {})
    two = Average(["a", "b"], "m").forward([values, values], {})
    for mean in (one, two):
        assert "float" in str(mean.dtype)
        np.testing.assert_allclose(np.asarray(fe.backend.to_number(mean)), [1.0, 2.0])


def test_to_shape_and_to_type_keep_namedtuples() -> None:
    pair = collections.namedtuple("Pair", ["a", "b"])
    data = {"x": pair(np.ones((2, 3)), torch.ones(4, dtype=torch.int64))}
    shapes = fe.backend.to_shape(data)
    assert isinstance(shapes["x"], pair) and shapes["x"] == pair((2, 3), (4,))
    types = fe.backend.to_type(data)
    assert isinstance(types["x"], pair) and types["x"] == pair(np.dtype("float64"), torch.int64)


def test_concat_and_stack_of_nothing_give_none() -> None:
    assert fe.backend.concat([]) is None and fe.backend.stack([]) is None
    assert fe.backend.concat([torch.ones(1), torch.ones(2)]).shape == (3,)
