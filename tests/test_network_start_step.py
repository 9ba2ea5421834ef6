"""Network.start_step / finish_step: a step answered before its trailing weight updates, then finished."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import to_number  # noqa: E402
from fe_ray.op.tensorop import LambdaOp  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.slicer import ChunkSlicer  # noqa: E402
from tests.helpers.ops import BrokenUpdate  # noqa: E402
from tests.test_network import batch, linear_model_fn, sgd, weights_of  # noqa: E402


def network_of(framework: str = "torch", after: Callable[[Any], list[Any]] = lambda model: [],
               update: type[UpdateOp] = UpdateOp, **kwargs: Any) -> tuple[Any, Any]:
    model = fe.build(linear_model_fn(framework), sgd(framework))
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
           update(model=model, loss_name="mse"), *after(model)]
    return fe.Network(ops, **kwargs), model


BATCHES = [batch([[1.0, 0.0, 2.0], [0.5, 1.0, -1.0]], [1.0, 2.0]),
           batch([[0.0, 1.0, 1.0], [2.0, 0.5, 0.0]], [0.0, -1.0]),
           batch([[1.0, 1.0, 1.0], [-1.0, 0.0, 3.0]], [3.0, 0.5])]


def test_the_outputs_come_before_the_update_and_finish_step_applies_it() -> None:
    network, model = network_of()
    twin, twin_model = network_of()
    with network(mode="train", epoch=1), twin(mode="train", epoch=1):
        for data in BATCHES:
            before = weights_of(model)
            early = network.start_step(data)
            np.testing.assert_array_equal(weights_of(model), before)  # not updated yet
            whole = twin.run_step(data)
            assert sorted(early) == sorted(whole)
            for key in ("y_pred", "mse"):
                np.testing.assert_array_equal(np.asarray(to_number(early[key])), np.asarray(to_number(whole[key])))
            network.finish_step()
            np.testing.assert_array_equal(weights_of(model), weights_of(twin_model))  # bit for bit
            network.finish_step()  # nothing left: a second call changes nothing
            np.testing.assert_array_equal(weights_of(model), weights_of(twin_model))


@pytest.mark.parametrize("settle", ["next run_step", "next start_step", "state_dict", "leaving the context"])
def test_whatever_uses_the_network_next_finishes_the_step_first(settle: str) -> None:
    network, model = network_of()
    twin, twin_model = network_of()
    with twin(mode="train", epoch=1):
        twin.run_step(BATCHES[0])
        after_one = weights_of(twin_model)
        twin.run_step(BATCHES[1])
    with network(mode="train", epoch=1):
        network.start_step(BATCHES[0])
        if settle == "next run_step":
            network.run_step(BATCHES[1])
        elif settle == "next start_step":
            network.start_step(BATCHES[1])
            network.finish_step()
        elif settle == "state_dict":
            network.state_dict()
    if settle in ("state_dict", "leaving the context"):
        np.testing.assert_array_equal(weights_of(model), after_one)
    else:
        np.testing.assert_array_equal(weights_of(model), weights_of(twin_model))


def trailing_output(model: Any) -> list[Any]:
    return [LambdaOp(lambda y: y * 2, inputs="y_pred", outputs="twice")]  # written after the UpdateOp


@pytest.mark.parametrize("case", ["tf", "slicers", "an op writes a key after the update", "eval"])
def test_the_whole_step_runs_where_nothing_can_wait(case: str) -> None:
    framework = "tf" if case == "tf" else "torch"
    kwargs: dict[str, Any] = {}
    if case == "slicers":
        kwargs["slicers"] = ChunkSlicer(n_chunks=2, slice=["x", "y"], unslice=["x", "y", "y_pred"])
    after = trailing_output if case.startswith("an op") else (lambda model: [])
    network, model = network_of(framework, after=after, **kwargs)
    twin, twin_model = network_of(framework, after=after, **kwargs)
    context = {"mode": "eval" if case == "eval" else "train", "epoch": 1, "desired_output_keys": {"y_pred"}}
    with network(**context), twin(**context):
        early = network.start_step(BATCHES[0])
        whole = twin.run_step(BATCHES[0])
        np.testing.assert_array_equal(weights_of(model), weights_of(twin_model))  # already updated (or not at all)
        np.testing.assert_allclose(np.asarray(to_number(early["y_pred"])), np.asarray(to_number(whole["y_pred"])))
        network.finish_step()
        np.testing.assert_array_equal(weights_of(model), weights_of(twin_model))
    if case == "eval":
        np.testing.assert_array_equal(weights_of(model), np.array([1.0, 2.0, 3.0], np.float32))


def test_an_error_in_the_update_is_raised_by_finish_step_and_the_answer_was_given() -> None:
    network, _ = network_of(update=BrokenUpdate)
    with network(mode="train", epoch=1):
        out = network.start_step(BATCHES[0])
        assert np.isfinite(float(to_number(out["mse"])))
        with pytest.raises(RuntimeError, match="the update broke"):
            network.finish_step()
        network.finish_step()  # raised once: the step is over
    with pytest.raises(RuntimeError, match="the update broke"):  # the same error from any call that finishes it
        with network(mode="train", epoch=1):
            network.start_step(BATCHES[0])
    with network(mode="train", epoch=1):  # a failed exit left the network usable
        network.start_step(BATCHES[0])
        with pytest.raises(RuntimeError, match="the update broke"):
            network.run_step(BATCHES[1])


def test_start_step_outside_a_context_is_refused() -> None:
    network, _ = network_of()
    with pytest.raises(ValueError, match="start_step must be called inside"):
        network.start_step(BATCHES[0])
