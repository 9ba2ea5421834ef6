"""ModelOp behaves like FastEstimator 1.7's: layer indexes, nested Keras layers, multi-input calls, multi-output models.

Each group covers one divergence fe_ray used to have: ``intermediate_layers`` entries given as ints (indexes into
``named_modules()`` / Keras' recursive layer list), layers nested inside Keras sub-models (also in a tf.function
step and while training), several input keys to models taking one or several arguments, and models returning
several outputs alongside intermediate layers.
"""

from __future__ import annotations

import os
from typing import Any

import cloudpickle
import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import _attach  # noqa: E402

X = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, -1.0]], dtype=np.float32)


def state(mode: str = "eval", eager: bool = True) -> dict[str, Any]:
    return {"mode": mode, "epoch": 1, "ds_id": "", "warmup": False, "req_grad": mode == "train", "deferred": {},
            "eager": eager, "grad_reducer": None}


def run(ops: list[Any], framework: str, batch: dict[str, Any], outputs: set[str], mode: str = "eval",
        eager: bool = True) -> dict[str, Any]:
    for op in ops:
        op.build(framework)
    out = get_backend(framework).run_step(ops, batch, state(mode, eager), set(batch), outputs)
    return {key: np.asarray(get_backend(framework).to_numpy(out[key])) for key in outputs}


# ------------------------------------------------------------------------------------------------ torch models
def torch_seq() -> Any:
    """Sequential(Linear(3, 2), ReLU, Linear(2, 1)); the first layer gives negative values the ReLU removes."""
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]]))
        net[0].bias.zero_()
        net[2].weight.copy_(torch.tensor([[1.0, 2.0]]))
        net[2].bias.zero_()
    return _attach(net, "torch", "sgd", "seq", False)


def torch_first_layer(x: np.ndarray) -> np.ndarray:
    return x @ np.array([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]], dtype=np.float32).T


# ------------------------------------------------------------------------------------------------ keras models
def keras_seq() -> Any:
    import keras

    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="hidden"),
                            keras.layers.Dense(1, name="head")])
    return _attach(net, "tf", "sgd", "kseq", False)


def keras_nested_model() -> Any:
    """A functional model whose first layer is another functional model (holding the layer "inner_hidden")."""
    import keras

    inp = keras.Input((3,))
    inner = keras.Model(inp, keras.layers.Dense(2, name="inner_out")(keras.layers.Dense(4, name="inner_hidden")(inp)),
                        name="inner")
    outer_in = keras.Input((3,))
    return keras.Model(outer_in, keras.layers.Dense(1, name="outer_head")(inner(outer_in)), name="outer")


def keras_nested() -> Any:
    return _attach(keras_nested_model(), "tf", "sgd", "nested", False)


def keras_subclassed() -> Any:
    import keras

    class Sub(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = keras.layers.Dense(2, name="sub_hidden")
            self.head = keras.layers.Dense(1, name="sub_head")

        def call(self, x: Any) -> Any:
            return self.head(self.hidden(x))

    net = Sub()
    net(X)
    return _attach(net, "tf", "sgd", "sub", False)


def layer_of(model: Any, name: str) -> Any:
    return next(layer for layer in model._flatten_layers(include_self=False) if layer.name == name)


# ---------------------------------------------------------------------- 1. int / str intermediate_layers entries
def test_torch_int_entries_index_named_modules() -> None:
    model = torch_seq()  # named_modules: 0 the Sequential itself, 1 Linear "0", 2 ReLU "1", 3 Linear "2"
    op = ModelOp(model=model, inputs="x", outputs=["pred", "whole", "lin", "relu"], intermediate_layers=[0, 1, "1"])
    out = run([op], "torch", {"x": X}, {"pred", "whole", "lin", "relu"})
    np.testing.assert_allclose(out["lin"], torch_first_layer(X), atol=1e-6)  # index 1: the Linear, not the ReLU
    np.testing.assert_allclose(out["relu"], np.maximum(torch_first_layer(X), 0), atol=1e-6)
    np.testing.assert_allclose(out["whole"], out["pred"], atol=1e-6)  # index 0: the model itself
    neg = ModelOp(model=model, inputs="x", outputs=["pred", "last"], intermediate_layers=-1)
    np.testing.assert_allclose(run([neg], "torch", {"x": X}, {"pred", "last"})["last"], out["pred"], atol=1e-6)


def test_torch_bad_entries_name_the_choices() -> None:
    model = torch_seq()
    with pytest.raises(ValueError, match=r"entry 4 .*'0', '1', '2'.*\[-4, 3\]"):
        ModelOp(model=model, inputs="x", outputs=["p", "h"], intermediate_layers=4).build("torch")
    with pytest.raises(ValueError, match=r"entry 'nope' .*'0', '1', '2'.*\[-4, 3\]"):
        ModelOp(model=model, inputs="x", outputs=["p", "h"], intermediate_layers="nope").build("torch")


@pytest.mark.parametrize("entry", [True, 1.0, None, ("0",)])
def test_entries_must_be_str_or_int(entry: Any) -> None:
    with pytest.raises(TypeError, match="intermediate_layers entries must be"):
        ModelOp(model=torch_seq(), inputs="x", outputs=["p", "h"], intermediate_layers=["0", entry])


@pytest.mark.parametrize("eager", [True, False])
def test_tf_int_entries_index_the_recursive_layer_list(eager: bool) -> None:
    model = keras_seq()  # _flatten_layers: 0 the InputLayer, 1 "hidden", 2 "head"
    op = ModelOp(model=model, inputs="x", outputs=["pred", "hidden", "head"], intermediate_layers=[1, -1])
    out = run([op], "tf", {"x": X}, {"pred", "hidden", "head"}, eager=eager)
    np.testing.assert_allclose(out["hidden"], model.get_layer("hidden")(X).numpy(), atol=1e-6)
    np.testing.assert_allclose(out["head"], out["pred"], atol=1e-6)

    nested = keras_nested()  # recursive: the nested model's layers have indexes too
    from fe_ray.backend.tf import nested_layers

    names = [layer.name for layer in nested_layers(nested)]
    op = ModelOp(model=nested, inputs="x", outputs=["pred", "h"], intermediate_layers=names.index("inner_hidden"))
    out = run([op], "tf", {"x": X}, {"pred", "h"}, eager=eager)
    np.testing.assert_allclose(out["h"], layer_of(nested, "inner_hidden")(X).numpy(), atol=1e-6)


def test_tf_int_entries_number_nested_layers_as_fastestimator() -> None:
    """tf.keras 2's order (FastEstimator's): each layer, then the layers nested in it in their own order, a nested
    Sequential's input layer first. Keras 3's recursive walk lists a nested model's layers last-first."""
    import keras

    from fe_ray.backend.tf import nested_layers

    inner = keras.Sequential([keras.layers.Dense(5, name="a1"), keras.layers.Dense(4, name="a2"),
                              keras.layers.Dense(6, name="a3")], name="inner")
    inputs = keras.Input((4,))
    model = fe.build(lambda: keras.Model(inputs, keras.layers.Dense(3, name="out")(inner(inputs))), "adam")
    names = [layer.name for layer in nested_layers(model)]
    assert names[1:] == ["inner", names[2], "a1", "a2", "a3", "out"] and names[2].startswith("input_layer")
    op = ModelOp(model=model, inputs="x", outputs=["p", "f3", "f4"], intermediate_layers=[3, 4])
    out = run([op], "tf", {"x": np.ones((2, 4), np.float32)}, {"p", "f3", "f4"})
    assert out["f3"].shape == (2, 5) and out["f4"].shape == (2, 4)  # a1's and a2's outputs


def test_tf_bad_entries_name_the_choices() -> None:
    model = keras_seq()
    with pytest.raises(ValueError, match=r"entry 3 .*'hidden', 'head'.*\[-3, 2\]"):
        ModelOp(model=model, inputs="x", outputs=["p", "h"], intermediate_layers=3).build("tf")
    with pytest.raises(ValueError, match=r"entry 'nope' .*'hidden', 'head'.*\[-3, 2\]"):
        ModelOp(model=model, inputs="x", outputs=["p", "h"], intermediate_layers="nope").build("tf")


# ------------------------------------------------------------------------- 2. TF layers nested in sub-models
@pytest.mark.parametrize("eager", [True, False])
@pytest.mark.parametrize("kind", ["nested", "subclassed"])
def test_tf_nested_layer_capture(kind: str, eager: bool) -> None:
    model, layer = (keras_nested(), "inner_hidden") if kind == "nested" else (keras_subclassed(), "sub_hidden")
    op = ModelOp(model=model, inputs="x", outputs=["pred", "h"], intermediate_layers=layer)
    out = run([op], "tf", {"x": X}, {"pred", "h"}, eager=eager)
    np.testing.assert_allclose(out["h"], layer_of(model, layer)(X).numpy(), atol=1e-6)
    np.testing.assert_allclose(out["pred"], model(X).numpy(), atol=1e-6)


def test_tf_nested_capture_trains_in_a_graph_step() -> None:
    import tensorflow as tf

    lr = 0.1
    model = fe.build(keras_nested_model, optimizer_fn=lambda: tf.keras.optimizers.SGD(learning_rate=lr))
    hidden, head = layer_of(model, "inner_hidden"), layer_of(model, "outer_head")
    target = np.ones((2, 4), dtype=np.float32)
    with tf.GradientTape() as tape:  # the update the captured output's loss must produce
        loss = tf.reduce_mean(tf.square(hidden(X) - target))
    expected = hidden.kernel.numpy() - lr * tape.gradient(loss, hidden.kernel).numpy()
    head_before = head.kernel.numpy().copy()
    network = fe.Network([ModelOp(model=model, inputs="x", outputs=["pred", "h"], intermediate_layers="inner_hidden"),
                          MeanSquaredError(inputs=("h", "t"), outputs="mse"), UpdateOp(model=model, loss_name="mse")])
    with network(mode="train", epoch=1):  # not eager: the step runs as a tf.function
        out = network.run_step({"x": X, "t": target})
    assert float(out["mse"]) == pytest.approx(float(loss), rel=1e-5)
    np.testing.assert_allclose(hidden.kernel.numpy(), expected, atol=1e-6)
    np.testing.assert_array_equal(head.kernel.numpy(), head_before)  # the loss does not depend on the head
    with network(mode="eval", epoch=1):
        out = network.run_step({"x": X, "t": target})
    np.testing.assert_allclose(np.asarray(out["h"]), hidden(X).numpy(), atol=1e-6)


def test_torch_capture_trains() -> None:
    model = torch_seq()
    first, last = model[0].weight.detach().clone(), model[2].weight.detach().clone()
    ops = [ModelOp(model=model, inputs="x", outputs=["pred", "h"], intermediate_layers=1),
           MeanSquaredError(inputs=("h", "t"), outputs="mse"), UpdateOp(model=model, loss_name="mse")]
    run(ops, "torch", {"x": X, "t": np.zeros((2, 2), dtype=np.float32)}, {"mse"}, mode="train")
    assert not np.allclose(model[0].weight.detach().numpy(), first.numpy())
    np.testing.assert_array_equal(model[2].weight.detach().numpy(), last.numpy())


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_capture_is_idempotent_and_pickles(framework: str) -> None:
    from fe_ray.distributed.serialization import dumps_ops, loads_ops

    model, entry = (torch_seq(), 1) if framework == "torch" else (keras_nested(), "inner_hidden")
    op = ModelOp(model=model, inputs="x", outputs=["pred", "h"], intermediate_layers=entry)
    cloudpickle.dumps(op)  # before build
    other = ModelOp(model=model, inputs="x", outputs=["pred2", "h2"], intermediate_layers=entry)
    layer = model[0] if framework == "torch" else layer_of(model, "inner_hidden")
    op.build(framework)
    wrapped = layer._forward_hooks.copy() if framework == "torch" else layer.call
    op.build(framework)
    other.build(framework)
    if framework == "torch":
        assert list(layer._forward_hooks.values()) == list(wrapped.values()) and len(wrapped) == 1
    else:
        assert layer.call is wrapped
    out = run([op, other], framework, {"x": X}, {"pred", "h", "pred2", "h2"})
    np.testing.assert_allclose(out["h"], out["h2"], atol=1e-6)
    # As the distributed network ships ops to replicas: built ops and their models pickle, and rebuild there.
    loaded = loads_ops(dumps_ops([op], [model]))[0]
    again = run([loaded], framework, {"x": X}, {"pred", "h"})
    if framework == "torch":  # the hook travelled with the pickled module and was found again, not doubled
        assert len(loaded.model[0]._forward_hooks) == 1
    np.testing.assert_allclose(again["h"], out["h"], atol=1e-6)
    np.testing.assert_allclose(again["pred"], out["pred"], atol=1e-6)


# ------------------------------------------------------------------ 3. several input keys to a model
def torch_list_model() -> Any:
    import torch

    class TakesList(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 1, bias=False)
            with torch.no_grad():
                self.lin.weight.copy_(torch.tensor([[1.0, 2.0, 3.0]]))

        def forward(self, xs: list[Any]) -> Any:
            return self.lin(xs[0] - xs[1])

    return _attach(TakesList(), "torch", "sgd", "takes_list", False)


def torch_two_arg_model() -> Any:
    import torch

    class TakesTwo(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 1, bias=False)
            with torch.no_grad():
                self.lin.weight.copy_(torch.tensor([[1.0, 2.0, 3.0]]))

        def forward(self, a: Any, b: Any) -> Any:
            return self.lin(a - b)

    return _attach(TakesTwo(), "torch", "sgd", "takes_two", False)


def keras_two_arg_model() -> Any:
    import keras

    class TakesTwo(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.lin = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="lin")

        def call(self, a: Any, b: Any, training: Any = None) -> Any:
            return self.lin(a - b)

    return _attach(TakesTwo(), "tf", "sgd", "ktakes_two", False)


def keras_list_model() -> Any:
    import keras

    class TakesList(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.lin = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="lin")

        def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
            return self.lin(inputs[0] - inputs[1])

    return _attach(TakesList(), "tf", "sgd", "ktakes_list", False)


def keras_functional_two_inputs() -> Any:
    import keras

    a, b = keras.Input((3,)), keras.Input((3,))
    out = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="lin")(keras.layers.Subtract()([a, b]))
    return _attach(keras.Model([a, b], out), "tf", "sgd", "kfunc_two", False)


B = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=np.float32)


@pytest.mark.parametrize("make", [torch_list_model, torch_two_arg_model])
@pytest.mark.parametrize("layers", [None, "lin"])
def test_torch_several_inputs(make: Any, layers: Any) -> None:
    outputs = ["pred"] if layers is None else ["pred", "h"]
    op = ModelOp(model=make(), inputs=["a", "b"], outputs=outputs, intermediate_layers=layers)
    out = run([op], "torch", {"a": X, "b": B}, set(outputs))
    np.testing.assert_allclose(out["pred"], (X - B) @ np.array([[1.0], [2.0], [3.0]]), atol=1e-6)


@pytest.mark.parametrize("eager", [True, False])
@pytest.mark.parametrize("make", [keras_two_arg_model, keras_list_model, keras_functional_two_inputs])
@pytest.mark.parametrize("layers", [None, "lin"])
def test_tf_several_inputs(make: Any, layers: Any, eager: bool) -> None:
    outputs = ["pred"] if layers is None else ["pred", "h"]
    op = ModelOp(model=make(), inputs=["a", "b"], outputs=outputs, intermediate_layers=layers)
    out = run([op], "tf", {"a": X, "b": B}, set(outputs), eager=eager)
    np.testing.assert_allclose(out["pred"], (X - B).sum(axis=1, keepdims=True), atol=1e-6)


# ------------------------------------------------------------------ 4. several model outputs + intermediate layers
def torch_two_heads() -> Any:
    import torch

    class TwoHeads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Linear(3, 2)
            self.head_a = torch.nn.Linear(2, 1)
            self.head_b = torch.nn.Linear(2, 3)

        def forward(self, x: Any) -> Any:
            body = self.body(x)
            return self.head_a(body), self.head_b(body)

    return _attach(TwoHeads(), "torch", "sgd", "two_heads", False)


def keras_two_heads() -> Any:
    import keras

    inp = keras.Input((3,))
    body = keras.layers.Dense(2, name="body")(inp)
    model = keras.Model(inp, [keras.layers.Dense(1, name="head_a")(body), keras.layers.Dense(3, name="head_b")(body)])
    return _attach(model, "tf", "sgd", "ktwo_heads", False)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_several_model_outputs_then_intermediate_layers(framework: str) -> None:
    model = torch_two_heads() if framework == "torch" else keras_two_heads()
    op = ModelOp(model=model, inputs="x", outputs=["a", "b", "body"], intermediate_layers="body")
    out = run([op], framework, {"x": X}, {"a", "b", "body"})
    assert out["a"].shape == (2, 1) and out["b"].shape == (2, 3) and out["body"].shape == (2, 2)
    body = model.body if framework == "torch" else model.get_layer("body")
    expected = body(get_backend(framework).to_tensor(X))
    np.testing.assert_allclose(out["body"], np.asarray(get_backend(framework).to_numpy(expected)), atol=1e-6)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_output_count_is_checked_at_run_time(framework: str) -> None:
    model = torch_two_heads() if framework == "torch" else keras_two_heads()
    op = ModelOp(model=model, inputs="x", outputs=["a", "body"], intermediate_layers="body")
    with pytest.raises(ValueError, match=r"returned 2 output\(s\).*1 intermediate layer.*3 output keys"):
        run([op], framework, {"x": X}, {"a", "body"})
    with pytest.raises(ValueError, match="at least one key for the model's output"):
        ModelOp(model=model, inputs="x", outputs=["body"], intermediate_layers="body")
