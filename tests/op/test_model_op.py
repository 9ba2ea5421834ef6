"""ModelOp: forward values, training flag, gradient blocking, intermediate layers and errors."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, weights  # noqa: E402

X = {"x": np.array([[1.0, 1.0, 1.0]], dtype=np.float32), "y": np.array([[1.0]], dtype=np.float32)}


def state(mode: str = "train", eager: bool = True) -> dict[str, Any]:
    return {"mode": mode, "epoch": 1, "ds_id": "", "warmup": False, "req_grad": mode == "train", "deferred": {},
            "eager": eager, "grad_reducer": None}


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_forward_value(framework: str) -> None:
    op = ModelOp(model=linear(framework), inputs="x", outputs="pred")
    op.build(framework)
    out = get_backend(framework).run_step([op], X, state("eval"), {"x"}, {"pred"})
    assert float(np.asarray(get_backend(framework).to_numpy(out["pred"])).reshape(-1)[0]) == pytest.approx(6.0)
    assert op.get_fe_models() == {op.model}


def test_torch_training_flag_follows_mode_and_trainable() -> None:
    model = linear("torch")
    op = ModelOp(model=model, inputs="x", outputs="pred")
    frozen = ModelOp(model=model, inputs="x", outputs="pred", trainable=False)
    for each in (op, frozen):
        each.build("torch")
    get_backend("torch").run_step([op], X, state("train"), {"x"}, {"pred"})
    assert model.training
    get_backend("torch").run_step([op], X, state("eval"), {"x"}, {"pred"})
    assert not model.training
    get_backend("torch").run_step([frozen], X, state("train"), {"x"}, {"pred"})
    assert not model.training


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_gradients_false_blocks_gradient(framework: str) -> None:
    model = linear(framework, lr=0.1)
    ops = [ModelOp(model=model, inputs="x", outputs="pred", gradients=False),
           MeanSquaredError(inputs=("pred", "y"), outputs="mse"), UpdateOp(model=model, loss_name="mse")]
    for op in ops:
        op.build(framework)
    # No gradient reaches the model, which FastEstimator refuses too (Keras' optimizers; torch's autograd).
    with pytest.raises(ValueError, match="no gradient for any trainable weight"):
        get_backend(framework).run_step(ops, X, state("train"), {"x", "y"}, {"pred"})
    np.testing.assert_array_equal(weights(model), [1, 2, 3])


def test_torch_intermediate_layers() -> None:
    import torch

    from tests.helpers.models import _attach

    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    model = _attach(net, "torch", "sgd", "seq", False)
    op = ModelOp(model=model, inputs="x", outputs=["pred", "hidden"], intermediate_layers="1")
    op.build("torch")
    out = get_backend("torch").run_step([op], X, state("eval"), {"x"}, {"pred", "hidden"})
    expected_hidden = torch.relu(net[0](torch.ones(1, 3))).detach()
    torch.testing.assert_close(out["hidden"], expected_hidden)
    torch.testing.assert_close(out["pred"], net[2](expected_hidden).detach())
    with pytest.raises(ValueError, match=r"entry 'nope' is not a layer of seq.*\['0', '1', '2'\]"):
        ModelOp(model=model, inputs="x", outputs=["p", "h"], intermediate_layers="nope").build("torch")


@pytest.mark.parametrize("eager", [False, True])
def test_tf_intermediate_layers(eager: bool) -> None:
    import keras

    from tests.helpers.models import _attach

    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="relu", name="hidden"),
                            keras.layers.Dense(1, name="head")])
    model = _attach(net, "tf", "sgd", "seq", False)
    op = ModelOp(model=model, inputs="x", outputs=["pred", "hidden"], intermediate_layers=["hidden"])
    op.build("tf")
    out = get_backend("tf").run_step([op], X, state("eval", eager=eager), {"x"}, {"pred", "hidden"})
    hidden = net.get_layer("hidden")(X["x"])
    np.testing.assert_allclose(out["hidden"].numpy(), hidden.numpy(), atol=1e-6)
    np.testing.assert_allclose(out["pred"].numpy(), net(X["x"]).numpy(), atol=1e-6)


def test_errors() -> None:
    import torch

    with pytest.raises(TypeError, match="fe_ray.build"):
        ModelOp(model=torch.nn.Linear(3, 1), inputs="x", outputs="y")
    with pytest.raises(ValueError, match=r"at least one key for the model's output\(s\) plus one per intermediate"):
        ModelOp(model=linear("torch"), inputs="x", outputs="y", intermediate_layers=["0"])
