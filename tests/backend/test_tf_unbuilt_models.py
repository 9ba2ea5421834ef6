"""TF models that are not built when fe.build returns them (a Sequential without an Input, a subclassed model
model_fn does not call), layers frozen inside nested models, and gradients of watched tensors a final does not
reach, in graph mode with a smaller last batch."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.op.tensorop.gradient import GradientOp, Watch  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402


def sequential() -> Any:
    return keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(1)])


def test_a_snapshot_builds_a_copy_that_never_ran() -> None:
    """With replicas the driver's copy of such a model never runs, so it had no weights when the replicas' were
    synced back at the end of the first epoch ("Snapshot has 4 weights but model 'model' has 0")."""
    backend = get_backend("tf")
    trained = fe.build(sequential, optimizer_fn="sgd", model_name="trained")
    trained(np.ones((2, 3), np.float32))
    driver = fe.build(sequential, optimizer_fn="sgd", model_name="driver")
    assert not driver.weights
    backend.set_state(driver, backend.get_state(trained))
    assert [tuple(w.shape) for w in driver.weights] == [(3, 4), (4,), (4, 1), (1,)]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(driver(x)), np.asarray(trained(x)), rtol=1e-6)


def test_merge_grad_of_a_model_without_weights_yet_names_the_fix() -> None:
    """The gradient sums are made when the Network is, one per weight: an unbuilt model got none and Keras failed
    with "not enough values to unpack"."""
    model = fe.build(sequential, optimizer_fn="sgd")
    ops = [ModelOp(model=model, inputs="x", outputs="p"), MeanSquaredError(inputs=("p", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse", merge_grad=2)]
    with pytest.raises(ValueError, match=r"merge_grad>1\) needs model .* built .* keras.Input"):
        fe.Network(ops)


def test_the_gradient_of_a_watched_tensor_the_final_does_not_reach_is_zero_on_a_smaller_batch() -> None:
    """The zeros were made from the source's static shape, which the relaxed retrace of a smaller batch leaves
    partly unknown: "Cannot convert a partially known TensorShape"."""
    model = fe.build(lambda: keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]), optimizer_fn=None)
    network = fe.Network([Watch(inputs=("x", "z")), ModelOp(model=model, inputs="x", outputs="p"),
                          GradientOp(finals=("p", "p"), inputs=("x", "z"), outputs=("gx", "gz"))])
    for rows in (8, 5):
        with network(mode="eval", epoch=1):
            out = network.run_step({"x": np.ones((rows, 4), np.float32), "z": np.ones((rows, 2), np.float32)})
        assert np.asarray(out["gz"]).shape == (rows, 2) and not np.asarray(out["gz"]).any()
        assert np.asarray(out["gx"]).shape == (rows, 4)


def test_freezing_a_layer_inside_a_nested_model_retraces_the_graph() -> None:
    """The graph bakes in the trainable weights; its cache key looked at the top-level layers only, so a layer frozen
    inside a nested model kept training in graph mode (not in eager mode)."""
    def model_fn() -> Any:
        inner_in = keras.Input((4,))
        backbone = keras.Model(inner_in, keras.layers.Dense(5, name="inner")(inner_in), name="backbone")
        outer_in = keras.Input((4,))
        return keras.Model(outer_in, keras.layers.Dense(1)(backbone(outer_in)))

    model = fe.build(model_fn, optimizer_fn="sgd")
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="p"),
                          MeanSquaredError(inputs=("p", "y"), outputs="mse"), UpdateOp(model=model, loss_name="mse")])
    batch = {"x": np.ones((4, 4), np.float32), "y": np.full((4, 1), 3.0, np.float32)}
    with network(mode="train", epoch=1):
        network.run_step(batch)
    inner = model.get_layer("backbone").get_layer("inner")
    inner.trainable = False
    frozen = [np.array(w) for w in inner.weights]
    with network(mode="train", epoch=2):
        network.run_step(batch)
    for before, after in zip(frozen, inner.weights):
        np.testing.assert_array_equal(before, np.asarray(after))
    assert tf.executing_eagerly()
