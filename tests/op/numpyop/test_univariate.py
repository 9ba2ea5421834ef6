"""Minmax, ExpandDims and Onehot give the same result per sample and per batch (as pops). As FastEstimator's, they
take and give lists (in_list / out_list), whatever their keys."""

from typing import Any

import numpy as np
import pytest

from fe_ray.op.numpyop import NumpyOp, forward_numpyop
from fe_ray.op.numpyop.univariate import ExpandDims, Minmax, Onehot


def test_minmax_ops_take_lists_and_combine_with_list_ops_in_one_of() -> None:
    """FastEstimator sets in_list / out_list on Minmax, ExpandDims and Onehot: a OneOf of one of them and ToFloat
    (a list op too) was refused, and a direct call returned a batch axis it did not have."""
    from fe_ray.op.numpyop.meta import OneOf
    from fe_ray.op.numpyop.univariate import ToFloat

    for op in (Minmax("x", "x"), ExpandDims("x", "x"), Onehot("y", "y", num_classes=2)):
        assert (op.in_list, op.out_list) == (True, True)
    OneOf(Minmax("x", "x"), ToFloat("x", "x", max_value=255))
    assert [a.shape for a in ExpandDims("x", "x").forward([np.zeros((2, 2))], {})] == [(2, 2, 1)]


def test_minmax_computes_integers_in_float64_and_onehot_smooths_exactly() -> None:
    big = np.array([16777217, 16777218, 0, 33554435])  # past float32's 24-bit mantissa
    assert Minmax("x", "x").forward([big], {})[0][1] == np.float32(0.5)  # 0.49999994 when computed in float32
    smooth = Onehot("y", "y", num_classes=2, label_smoothing=0.2).forward([1], {})[0]
    assert smooth.tolist() == [np.float32(0.1), np.float32(0.9)]  # 0.90000004 when computed in float32


def test_minmax_per_sample_and_batch() -> None:
    batch = np.array([[0.0, 5.0, 10.0], [2.0, 2.0, 4.0]], dtype=np.float32)
    op = Minmax(inputs="x", outputs="x")
    np.testing.assert_allclose(op.forward([batch[0]], {})[0], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(op.forward_batch([batch], {})[0], [[0.0, 0.5, 1.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(op.forward([np.full(3, 7.0)], {})[0], [0.0, 0.0, 0.0])  # constant: no division by 0


def test_minmax_to_a_new_range() -> None:
    batch = np.array([[0.0, 5.0, 10.0], [2.0, 2.0, 4.0]], dtype=np.float32)
    op = Minmax(inputs="x", outputs="x", new_min=-1.0, new_max=3.0)
    out = op.forward([batch[0]], {})[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [-1.0, 1.0, 3.0])  # 0.5 of the way from -1 to 3 is 1
    np.testing.assert_allclose(op.forward_batch([batch], {})[0], [[-1.0, 1.0, 3.0], [-1.0, -1.0, 3.0]])
    np.testing.assert_allclose(op.forward([np.full(3, 7.0)], {})[0], [-1.0, -1.0, -1.0])  # constant: new_min
    positional = Minmax("x", "x", None, None, 1e-7, 10.0, 20.0)  # FastEstimator's positional order
    np.testing.assert_allclose(positional.forward([np.array([1.0, 3.0])], {})[0], [10.0, 20.0])
    for new_min, new_max in ((1.0, 1.0), (2.0, 0.0)):
        with pytest.raises(ValueError, match="new_max > new_min"):
            Minmax(inputs="x", outputs="x", new_min=new_min, new_max=new_max)


def test_expand_dims_per_sample_and_batch() -> None:
    image = np.zeros((28, 28))
    assert ExpandDims(inputs="x", outputs="x", axis=0).forward([image], {})[0].shape == (1, 28, 28)
    assert ExpandDims(inputs="x", outputs="x").forward([image], {})[0].shape == (28, 28, 1)
    batch = np.zeros((4, 28, 28))
    assert ExpandDims(inputs="x", outputs="x", axis=0).forward_batch([batch], {})[0].shape == (4, 1, 28, 28)
    assert ExpandDims(inputs="x", outputs="x").forward_batch([batch], {})[0].shape == (4, 28, 28, 1)


def test_onehot_per_sample_batch_and_smoothing() -> None:
    op = Onehot(inputs="y", outputs="y", num_classes=3)
    np.testing.assert_array_equal(op.forward([np.int64(2)], {})[0], [0, 0, 1])
    np.testing.assert_array_equal(op.forward_batch([np.array([0, 2])], {})[0], [[1, 0, 0], [0, 0, 1]])
    smooth = Onehot(inputs="y", outputs="y", num_classes=4, label_smoothing=0.2)
    np.testing.assert_allclose(smooth.forward([1], {})[0], [0.05, 0.85, 0.05, 0.05])
    with pytest.raises(ValueError, match="num_classes must be a positive int"):
        Onehot(inputs="y", outputs="y", num_classes=0)


def test_as_pops_through_forward_numpyop() -> None:
    data = {"x": np.array([[0.0, 4.0], [1.0, 3.0]]), "y": np.array([1, 0])}
    ops = [Minmax(inputs="x", outputs="x_scaled"), Onehot(inputs="y", outputs="y_hot", num_classes=2)]
    forward_numpyop(ops, data, {}, batched=True)
    np.testing.assert_allclose(data["x_scaled"], [[0.0, 1.0], [0.0, 1.0]])
    np.testing.assert_array_equal(data["y_hot"], [[0, 1], [1, 0]])


def test_onehot_of_label_arrays_and_of_masks_in_a_batch() -> None:
    """A multi-element label (a mask, a label list) gets one vector per element, per sample and as a pop, as in
    FastEstimator; only a single label collapses to one vector."""
    op = Onehot(inputs="y", outputs="y", num_classes=3)
    mask = np.array([[0, 1], [2, 2]])
    expected = np.eye(3, dtype=np.float32)[mask]
    np.testing.assert_array_equal(op.forward([mask], {})[0], expected)  # (2, 2, 3): it kept the first label only
    np.testing.assert_array_equal(op.forward([np.array([0, 2])], {})[0], [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(op.forward([np.array([[1]])], {})[0], [0, 1, 0])  # one label, whatever its shape
    masks = np.stack([mask, mask[::-1]])
    np.testing.assert_array_equal(op.forward_batch([masks], {})[0], np.stack([op.forward([m], {})[0] for m in masks]))
    np.testing.assert_array_equal(op.forward_batch([np.array([[2], [0]])], {})[0], [[0, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("labels, match", [(np.array(1.7), r"integer class labels, got dtype float64 \(e.g. \[1.7\]"),
                                           (np.array(5), r"got label 5, outside \[0, 3\)"),
                                           (np.array([0, -1]), r"got label -1, outside \[0, 3\)")])
def test_onehot_rejects_labels_it_cannot_encode(labels: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Onehot(inputs="y", outputs="y", num_classes=3).forward([labels], {})[0]


def test_lambda_op_runs_once_on_a_whole_batch() -> None:
    """As FastEstimator's LambdaOp.forward_batch: a pop's (or a post-Batch op's) function sees the whole batch."""
    from fe_ray.op.numpyop import LambdaOp

    data = {"p": np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1]]), "q": np.array([[1.0, 3.0], [2.0, 2.0]])}
    ops = [LambdaOp(lambda p: np.argmax(p, axis=-1), inputs="p", outputs="label"),
           LambdaOp(np.argmax, inputs="p", outputs="flat_argmax"),
           LambdaOp(lambda q: q / q.sum(), inputs="q", outputs="q_norm"),
           LambdaOp(lambda p, q: (p.max(), q.min()), inputs=("p", "q"), outputs=("p_max", "q_min")),
           LambdaOp(lambda: np.zeros((2, 4)), outputs="noise")]
    forward_numpyop(ops, data, {}, batched=True)
    np.testing.assert_array_equal(data["label"], [1, 0])
    assert data["flat_argmax"] == 1  # over the flattened batch, as numpy's own argmax
    np.testing.assert_allclose(data["q_norm"].sum(), 1.0)  # scaled by the batch's sum, not each row's
    assert data["p_max"] == 0.9 and data["q_min"] == 1.0
    assert data["noise"].shape == (2, 4)  # no inputs: called once


def test_an_input_less_op_without_its_own_forward_batch_names_the_fix() -> None:
    class Constant(NumpyOp):
        def forward(self, data: Any, state: dict[str, Any]) -> Any:
            return np.ones(3)

    with pytest.raises(ValueError, match=r"Constant reads no key, so its default forward_batch cannot split a batch "
                                         r"into samples .*override forward_batch"):
        forward_numpyop([Constant(outputs="c")], {"x": np.zeros((2, 3))}, {}, batched=True)


def test_channel_transpose_takes_negative_axes_as_np_transpose_does() -> None:
    from fe_ray.op.numpyop.univariate import ChannelTranspose

    assert ChannelTranspose("x", "x", axes=(-1, 0, 1)).forward([np.zeros((4, 5, 3))], {})[0].shape == (3, 4, 5)
    with pytest.raises(ValueError, match="permutation"):
        ChannelTranspose("x", "x", axes=(0, 0, 1))

