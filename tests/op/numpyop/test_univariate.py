"""Minmax, ExpandDims and Onehot give the same result per sample and per batch (as pops)."""

import numpy as np
import pytest

from fe_ray.op.numpyop import forward_numpyop
from fe_ray.op.numpyop.univariate import ExpandDims, Minmax, Onehot


def test_minmax_per_sample_and_batch() -> None:
    batch = np.array([[0.0, 5.0, 10.0], [2.0, 2.0, 4.0]], dtype=np.float32)
    op = Minmax(inputs="x", outputs="x")
    np.testing.assert_allclose(op.forward(batch[0], {}), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(op.forward_batch(batch, {}), [[0.0, 0.5, 1.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(op.forward(np.full(3, 7.0), {}), [0.0, 0.0, 0.0])  # constant: no division by 0


def test_expand_dims_per_sample_and_batch() -> None:
    image = np.zeros((28, 28))
    assert ExpandDims(inputs="x", outputs="x", axis=0).forward(image, {}).shape == (1, 28, 28)
    assert ExpandDims(inputs="x", outputs="x").forward(image, {}).shape == (28, 28, 1)
    batch = np.zeros((4, 28, 28))
    assert ExpandDims(inputs="x", outputs="x", axis=0).forward_batch(batch, {}).shape == (4, 1, 28, 28)
    assert ExpandDims(inputs="x", outputs="x").forward_batch(batch, {}).shape == (4, 28, 28, 1)


def test_onehot_per_sample_batch_and_smoothing() -> None:
    op = Onehot(inputs="y", outputs="y", num_classes=3)
    np.testing.assert_array_equal(op.forward(np.int64(2), {}), [0, 0, 1])
    np.testing.assert_array_equal(op.forward_batch(np.array([0, 2]), {}), [[1, 0, 0], [0, 0, 1]])
    smooth = Onehot(inputs="y", outputs="y", num_classes=4, label_smoothing=0.2)
    np.testing.assert_allclose(smooth.forward(1, {}), [0.05, 0.85, 0.05, 0.05])
    with pytest.raises(ValueError, match="num_classes must be a positive int"):
        Onehot(inputs="y", outputs="y", num_classes=0)


def test_as_pops_through_forward_numpyop() -> None:
    data = {"x": np.array([[0.0, 4.0], [1.0, 3.0]]), "y": np.array([1, 0])}
    ops = [Minmax(inputs="x", outputs="x_scaled"), Onehot(inputs="y", outputs="y_hot", num_classes=2)]
    forward_numpyop(ops, data, {}, batched=True)
    np.testing.assert_allclose(data["x_scaled"], [[0.0, 1.0], [0.0, 1.0]])
    np.testing.assert_array_equal(data["y_hot"], [[0, 1], [1, 0]])
