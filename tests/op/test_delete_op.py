"""fe.op.tensorop.Delete inside a Network (torch and TF, eager and traced), and numpy Delete among the pops: deleted
keys are not returned, later ops cannot read them, and the Network's output keys leave them out."""

from __future__ import annotations

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.op.numpyop import Delete as NumpyDelete
from fe_ray.op.numpyop import LambdaOp as NumpyLambda
from fe_ray.op.tensorop import Delete, LambdaOp
from fe_ray.op.tensorop.model import ModelOp
from tests.test_network import linear_model_fn

BATCH = {"x": np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], dtype="float32")}


@pytest.mark.parametrize("framework, eager", [("torch", True), ("tf", True), ("tf", False)])
def test_deleted_keys_are_not_returned_and_later_ops_still_run(framework: str, eager: bool) -> None:
    model = fe.build(model_fn=linear_model_fn(framework), optimizer_fn=None)
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="pred"),
                              LambdaOp(fn=lambda p: p * 2.0, inputs="pred", outputs="double"),
                              Delete("pred"),
                              LambdaOp(fn=lambda d: d + 1.0, inputs="double", outputs="shifted")])
    _, _, outputs = network.get_io_keys("eval", 1)
    assert outputs == {"double", "shifted"}
    with network(mode="eval", epoch=1, eager=eager):
        result = network.run_step(BATCH)
    assert "pred" not in result
    np.testing.assert_allclose(np.asarray(fe.backend.to_number(result["shifted"])).reshape(-1), [3.0, 11.0])


def test_an_op_after_delete_cannot_read_the_key() -> None:
    model = fe.build(model_fn=linear_model_fn("torch"), optimizer_fn=None)
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="pred"), Delete("pred"),
                              LambdaOp(fn=lambda p: p, inputs="pred", outputs="again")])
    with network(mode="eval", epoch=1), pytest.raises(KeyError, match="pred"):
        network.run_step(BATCH)


def test_numpy_delete_among_the_pops_drops_the_key_from_the_outputs() -> None:
    model = fe.build(model_fn=linear_model_fn("torch"), optimizer_fn=None)
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="pred")],
                         pops=[NumpyLambda(fn=lambda p: p + 1, inputs="pred", outputs="plus"), NumpyDelete("pred")])
    with network(mode="eval", epoch=1):
        result = network.run_step(BATCH)
    assert "pred" not in result and "plus" in result
    assert fe.op.tensorop.Delete is Delete


def test_a_pipeline_delete_of_a_missing_key_raises_as_fastestimator() -> None:
    """FastEstimator's Delete reads its keys, so a key that is not there (misspelled, or never written in this mode)
    raises KeyError; fe_ray skipped it silently."""
    data = fe.dataset.NumpyDataset({"x": np.ones((4, 2), np.float32), "y": np.arange(4)})
    pipeline = fe.Pipeline(train_data=data, batch_size=2, ops=[NumpyDelete("y")])
    assert set(pipeline.get_results()) == {"x"}
    pipeline = fe.Pipeline(train_data=data, batch_size=2, ops=[NumpyDelete("zz")])
    with pytest.raises(KeyError, match="'zz' is not in the data"):
        pipeline.get_results()


def test_ops_and_slicers_without_modes_hold_empty_sets_as_fastestimator() -> None:
    """FastEstimator's ops, traces and slicers hold ``mode`` / ``ds_id`` as sets, empty for "every mode"; user code
    such as ``"train" in op.mode`` must not meet None."""
    from fe_ray.slicer import MeanUnslicer

    for item in (NumpyLambda(fn=lambda x: x, inputs="x", outputs="x"), LambdaOp(fn=lambda x: x, inputs="x",
                                                                             outputs="x"),
                 MeanUnslicer(unslice="x")):
        assert item.mode == set() and item.ds_id == set() and "train" not in item.mode
    assert NumpyLambda(fn=lambda x: x, inputs="x", outputs="x", mode="!eval", ds_id="a").mode == \
        {"train", "test", "infer"}
