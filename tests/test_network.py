"""In-process Network behaviour with exact values, for both frameworks."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend, to_number  # noqa: E402
from fe_ray.op.numpyop import LambdaOp as NumpyLambda  # noqa: E402
from fe_ray.op.numpyop import NumpyOp  # noqa: E402
from fe_ray.op.tensorop import LambdaOp  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.schedule import EpochScheduler  # noqa: E402
from fe_ray.slicer import ChunkSlicer  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
LR = 0.01


def linear_model_fn(framework: str, weights: tuple[float, ...] = (1.0, 2.0, 3.0)) -> Any:
    """A bias-free 3->1 linear model with the given weights."""
    if framework == "torch":
        import torch

        def make() -> Any:
            model = torch.nn.Linear(3, 1, bias=False)
            with torch.no_grad():
                model.weight.copy_(torch.tensor([weights]))
            return model
        return make
    import keras

    def make_tf() -> Any:
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False)])
        model.set_weights([np.array(weights, dtype=np.float32).reshape(3, 1)])
        return model
    return make_tf


def sgd(framework: str, lr: float = LR) -> Any:
    if framework == "torch":
        import torch
        return lambda params: torch.optim.SGD(params, lr=lr)
    import keras
    return lambda: keras.optimizers.SGD(learning_rate=lr)


def weights_of(model: Any) -> np.ndarray:
    state = model.state_dict() if hasattr(model, "state_dict") and not hasattr(model, "get_weights") else None
    if state is not None:
        return next(iter(state.values())).detach().cpu().numpy().reshape(-1).copy()
    return np.asarray(model.get_weights()[0]).reshape(-1).copy()


def linear_network(framework: str, merge_grad: int = 1, **net_kwargs: Any) -> tuple[Any, Any]:
    model = fe.build(linear_model_fn(framework), optimizer_fn=sgd(framework))
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse", merge_grad=merge_grad)]
    return fe.Network(ops, **net_kwargs), model


def batch(x: list[list[float]], y: list[float]) -> dict[str, np.ndarray]:
    return {"x": np.array(x, dtype=np.float32), "y": np.array(y, dtype=np.float32).reshape(-1, 1)}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_exact_forward_loss_pop_and_sgd_update(framework: str) -> None:
    network, model = linear_network(framework, pops=NumpyLambda(lambda p: p + 1, inputs="y_pred",
                                                               outputs="y_plus"))
    assert type(network).__name__ == {"torch": "TorchNetwork", "tf": "TFNetwork"}[framework]
    with network(mode="eval", epoch=1, ds_id=""):
        out = network.run_step(batch([[1, 1, 1]], [1]))
    assert float(to_number(out["y_pred"]).reshape(-1)[0]) == pytest.approx(6.0)
    assert float(to_number(out["mse"])) == pytest.approx(25.0)
    assert float(np.asarray(out["y_plus"]).reshape(-1)[0]) == pytest.approx(7.0)
    np.testing.assert_allclose(weights_of(model), [1, 2, 3])  # eval never updates
    with network(mode="train", epoch=1, ds_id=""):
        network.run_step(batch([[1, 1, 1]], [1]))
    # d/dw (w.x - y)^2 = 2 * (6 - 1) * x = [10, 10, 10]
    np.testing.assert_allclose(weights_of(model), np.array([1, 2, 3]) - LR * 10, atol=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_network_classes_take_fastestimators_postprocessing_keyword(framework: str) -> None:
    """FastEstimator's TorchNetwork / TFNetwork / BaseNetwork call the pops ``postprocessing``; the factory's ``pops``
    is taken as a keyword too, and both at once is a TypeError."""
    from fe_ray.network import BaseNetwork, TFNetwork, TorchNetwork

    cls = TorchNetwork if framework == "torch" else TFNetwork
    pop = NumpyLambda(lambda p: p + 1, inputs="y_pred", outputs="y_plus")
    _, model = linear_network(framework)
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred")]
    for network in (cls(ops, postprocessing=pop), cls(ops, pops=pop), cls(ops, [pop]),
                    BaseNetwork(framework, None, ops, postprocessing=pop)):
        assert network.postprocessing == [pop]
    with pytest.raises(TypeError, match="as postprocessing= or as pops=, not both"):
        cls(ops, postprocessing=pop, pops=pop)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_merge_grad_two_steps(framework: str) -> None:
    network, model = linear_network(framework, merge_grad=2)
    b1, b2 = batch([[1, 1, 1]], [1]), batch([[1, 0, 2]], [0])
    g1 = 2 * (6 - 1) * np.array([1, 1, 1])
    g2 = 2 * (1 * 1 + 3 * 2 - 0) * np.array([1, 0, 2])
    with network(mode="train", epoch=1, ds_id=""):
        network.run_step(b1)
        np.testing.assert_allclose(weights_of(model), [1, 2, 3])
        network.run_step(b2)
    np.testing.assert_allclose(weights_of(model), np.array([1, 2, 3]) - LR * (g1 + g2) / 2, atol=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_chunk_slicer_matches_unsliced(framework: str) -> None:
    rng = np.random.default_rng(0)
    data = batch(rng.normal(size=(7, 3)).tolist(), rng.normal(size=7).tolist())
    plain, _ = linear_network(framework)
    sliced, _ = linear_network(framework, slicers=ChunkSlicer(n_chunks=3, slice=["x", "y"],
                                                               unslice=["x", "y", "y_pred"]))
    with plain(mode="eval", epoch=1, ds_id="", desired_output_keys={"y_pred"}):
        expected = to_number(plain.run_step(data)["y_pred"])
    with sliced(mode="eval", epoch=1, ds_id="", desired_output_keys={"y_pred"}):
        got = to_number(sliced.run_step(data)["y_pred"])
    np.testing.assert_allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize("num_replicas", [None, 2])
def test_a_framework_argument_is_named_not_a_python_error(num_replicas: int | None) -> None:
    """The framework comes from the models; with replicas it was a bare 'got multiple values' TypeError."""
    model = fe.build(linear_model_fn("torch"), optimizer_fn=sgd("torch"))
    ops = [fe.op.tensorop.model.ModelOp(model=model, inputs="x", outputs="y_pred")]
    with pytest.raises(TypeError, match=r"takes no framework argument.*framework='torch'.*Drop it"):
        fe.Network(ops, num_replicas=num_replicas, framework="torch")


def test_sliced_but_not_unsliced_names_keys_and_context() -> None:
    network, _ = linear_network("torch", slicers=ChunkSlicer(n_chunks=2, slice=["x", "y"]))
    with pytest.raises(ValueError, match=r"un-sliced during .*'mode': 'eval', 'epoch': 3.*\['mse', 'y_pred'\]"):
        network(mode="eval", epoch=3, ds_id="")


def test_tf_static_and_eager_agree() -> None:
    results = []
    for eager in (False, True):
        network, model = linear_network("tf")
        with network(mode="train", epoch=1, ds_id="", eager=eager):
            for step in range(3):
                out = network.run_step(batch([[1, step, 1], [0, 1, 2]], [1, 2]))
        results.append((float(to_number(out["mse"])), weights_of(model)))
    assert results[0][0] == pytest.approx(results[1][0], abs=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-6)


def test_tf_runs_static_graph_by_default() -> None:
    import tensorflow as tf

    seen = []
    network, _ = linear_network("tf")
    network.ops.insert(0, LambdaOp(lambda x: seen.append(tf.executing_eagerly()) or x, inputs="x", outputs="x"))
    with network(mode="eval", epoch=1, ds_id=""):
        network.run_step(batch([[1, 1, 1]], [1]))
    with network(mode="eval", epoch=1, ds_id="", eager=True):
        network.run_step(batch([[1, 1, 1]], [1]))
    assert seen[0] is False and seen[-1] is True


def scheduled_tf_run(eager: bool) -> tuple[int, np.ndarray]:
    """Four epochs of one training and one evaluation step each, with the optimizer switching at epoch 3; returns
    how often the ops were traced and the final weights."""
    traces: list[int] = []
    model = fe.build(linear_model_fn("tf"), optimizer_fn=EpochScheduler({1: sgd("tf", 0.1), 3: sgd("tf", 0.5)}))
    network = fe.Network([LambdaOp(lambda x: traces.append(1) or x, inputs="x", outputs="x"),
                          ModelOp(model=model, inputs="x", outputs="y_pred"),
                          MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                          UpdateOp(model=model, loss_name="mse")])
    for epoch in range(1, 5):
        for mode in ("train", "eval"):
            with network(mode=mode, epoch=epoch, ds_id="", eager=eager):
                network.run_step(batch([[1, epoch, 1], [0, 1, 2]], [1, 2]))
    return len(traces), weights_of(model)


def test_tf_contexts_reuse_the_graph_traced_for_the_same_setup() -> None:
    traces, graph_weights = scheduled_tf_run(eager=False)
    _, eager_weights = scheduled_tf_run(eager=True)
    assert traces == 4  # train and eval, with each of the two optimizers: not once per context (8)
    np.testing.assert_allclose(graph_weights, eager_weights, atol=1e-6)


def test_tf_step_functions_kept_per_network_are_bounded() -> None:
    from fe_ray.backend import tf_step

    network, _ = linear_network("tf")
    for ds_id in range(tf_step.MAX_STEP_FNS + 3):  # each ds_id is another setup, so another function
        with network(mode="eval", epoch=1, ds_id=f"set{ds_id}"):
            network.run_step(batch([[1, 1, 1]], [1]))
    kept = network.backend_cache[tf_step.STEP_FN_KEY]
    kept_ids = [dict(fixed[1])["ds_id"] for _ops, _outputs, fixed in kept]  # the run_step key's fixed-state part
    assert kept_ids == [f"set{n}" for n in range(3, tf_step.MAX_STEP_FNS + 3)]  # the least recently used went


def test_torch_defer_lets_chained_models_train() -> None:
    import torch

    model_a = fe.build(lambda: torch.nn.Linear(3, 3), optimizer_fn=sgd("torch"), model_name="a")
    model_b = fe.build(lambda: torch.nn.Linear(3, 1), optimizer_fn=sgd("torch"), model_name="b")
    ops = [ModelOp(model=model_a, inputs="x", outputs="h"),
           ModelOp(model=model_b, inputs="h", outputs="y_pred"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="loss_b"),
           LambdaOp(lambda h: (h ** 2).mean(), inputs="h", outputs="loss_a"),
           UpdateOp(model=model_b, loss_name="loss_b"),
           UpdateOp(model=model_a, loss_name="loss_b")]
    network = fe.Network(ops)
    before = [p.detach().clone() for p in model_a.parameters()]
    with network(mode="train", epoch=1, ds_id=""):
        network.run_step(batch([[1, 2, 3]], [1]))
    assert any(not torch.equal(b, p) for b, p in zip(before, model_a.parameters()))
    # An earlier update that is not deferred changes model B before model A's gradient (through B) is taken.
    ops[4] = UpdateOp(model=model_b, loss_name="loss_b")
    ops.insert(5, LambdaOp(lambda x: x, inputs="x", outputs="x_copy"))  # breaks the trailing-update chain
    network = fe.Network(ops)
    with network(mode="train", epoch=1, ds_id=""), pytest.raises(RuntimeError, match="defer=True"):
        network.run_step(batch([[1, 2, 3]], [1]))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_optimizer_scheduler_switches_by_epoch(framework: str) -> None:
    model = fe.build(linear_model_fn(framework), optimizer_fn=EpochScheduler({1: sgd(framework, 0.1),
                                                                              3: sgd(framework, 0.5)}))
    first, second = model.optimizer.get_current_value(1), model.optimizer.get_current_value(3)
    assert first is not second and model.current_optimizer is first
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                          UpdateOp(model=model, loss_name="mse")])
    for epoch, expected in ((1, first), (2, first), (3, second), (4, second)):
        with network(mode="train", epoch=epoch, ds_id=""):
            assert model.current_optimizer is expected
    assert model.optimizer in network.get_scheduled_items("train")


def test_scheduled_items_follow_fastestimators_order() -> None:
    # FastEstimator lists ops, then (in train) every model's optimizer, None included, then pops and slicers.
    trained = fe.build(linear_model_fn("torch"), optimizer_fn="sgd")
    frozen = fe.build(linear_model_fn("torch"), optimizer_fn=None)
    ops = [ModelOp(model=trained, inputs="x", outputs="y_pred"), ModelOp(model=frozen, inputs="x", outputs="y_2"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"), UpdateOp(model=trained, loss_name="mse")]
    pops = [fe.op.numpyop.LambdaOp(fn=lambda x: x, inputs="mse", outputs="mse")]
    network = fe.Network(ops, pops=pops)
    assert network.get_scheduled_items("train") == [*ops, trained.optimizer, None, *pops]
    assert network.get_scheduled_items("eval") == [*ops, *pops]


def test_build_names_and_weights_path(tmp_path: Any) -> None:
    models = fe.build(lambda: [linear_model_fn("torch")(), linear_model_fn("torch")()], optimizer_fn=["adam", "sgd"])
    names = [m.model_name for m in models]
    assert len(set(names)) == 2 and all(n.startswith("model") for n in names)
    assert all(m.fe_compiled and m.mixed_precision is False for m in models)
    path = get_backend("torch").save_model(models[0], str(tmp_path), model_name="saved")
    loaded = fe.build(linear_model_fn("torch", (0.0, 0.0, 0.0)), optimizer_fn="sgd", weights_path=path)
    np.testing.assert_allclose(weights_of(loaded), [1, 2, 3])


def test_get_loss_keys_and_transform() -> None:
    network, model = linear_network("torch")
    assert network.get_loss_keys() == {"mse"}
    out = network.transform(batch([[1, 1, 1]], [1]), mode="infer")
    assert float(to_number(out["y_pred"]).reshape(-1)[0]) == pytest.approx(6.0)
    assert "mse" not in out  # losses default to mode "!infer"
    outs = network.transform([batch([[1, 1, 1]], [1]), batch([[0, 0, 1]], [1])], mode="eval")
    assert [float(to_number(o["mse"])) for o in outs] == pytest.approx([25.0, 4.0])
    np.testing.assert_allclose(weights_of(model), [1, 2, 3])


# ---------------------------------------------------------------- clear errors
def test_error_non_tensor_op_in_ops() -> None:
    model = fe.build(linear_model_fn("torch"), optimizer_fn="sgd")
    with pytest.raises(TypeError, match="Network ops must be TensorOps, but op #1 is a NumpyOp"):
        fe.Network([ModelOp(model=model, inputs="x", outputs="y"), NumpyOp(inputs="x", outputs="x")])


def test_error_numpy_op_given_a_model() -> None:
    model = fe.build(linear_model_fn("torch"), optimizer_fn="sgd")
    with pytest.raises(TypeError, match="ModelOp"):
        NumpyLambda(model, inputs="x", outputs="y")

    class HoldsModel(NumpyOp):
        def __init__(self) -> None:
            super().__init__(inputs="x", outputs="y")
            self.net = model

    with pytest.raises(TypeError, match=r"HoldsModel.net holds a model"):
        fe.Network([ModelOp(model=model, inputs="x", outputs="y")], pops=HoldsModel())


def test_error_mixed_frameworks() -> None:
    torch_model = fe.build(linear_model_fn("torch"), optimizer_fn="sgd")
    tf_model = fe.build(linear_model_fn("tf"), optimizer_fn="sgd")
    with pytest.raises(ValueError, match="cannot mix frameworks"):
        fe.Network([ModelOp(model=torch_model, inputs="x", outputs="a"), ModelOp(model=tf_model, inputs="x",
                                                                                outputs="b")])


def test_error_duplicate_model_names() -> None:
    m1 = fe.build(linear_model_fn("torch"), optimizer_fn="sgd", model_name="Twin")
    m2 = fe.build(linear_model_fn("torch"), optimizer_fn="sgd", model_name="twin")
    with pytest.raises(ValueError, match=r"unique names.*\['twin'\]"):
        fe.Network([ModelOp(model=m1, inputs="x", outputs="a"), ModelOp(model=m2, inputs="x", outputs="b")])


def test_error_missing_input_key_names_key_and_op() -> None:
    network, _ = linear_network("torch")
    with network(mode="train", epoch=1, ds_id=""), pytest.raises(KeyError, match=r"'y' needed by MeanSquaredError"):
        network.run_step({"x": np.ones((1, 3), dtype=np.float32)})


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_error_unknown_optimizer_string(framework: str) -> None:
    with pytest.raises(ValueError, match="adamw2.*adam"):
        fe.build(linear_model_fn(framework), optimizer_fn="adamw2")


def test_error_mixed_precision_with_gradients_key() -> None:
    model = fe.build(linear_model_fn("torch"), optimizer_fn="sgd", mixed_precision=True)
    with pytest.raises(ValueError, match="[Mm]ixed.precision"):
        UpdateOp(model=model, loss_name="mse", gradients="grads")


def test_pops_receive_float32_from_torch_mixed_precision_on_cpu() -> None:
    # CPU autocast computes in bfloat16, which numpy lacks: a pop used to fail with "unsupported ScalarType".
    model = fe.build(linear_model_fn("torch"), optimizer_fn="sgd", mixed_precision=True)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred")],
                         pops=NumpyLambda(lambda pred: pred * 2.0, inputs="y_pred", outputs="y_double"))
    out = network.transform({"x": np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)}, mode="infer")
    assert str(out["y_pred"].dtype) == "torch.bfloat16"
    assert out["y_double"].dtype == np.float32
    np.testing.assert_array_equal(out["y_double"], [[2.0], [4.0]])


def test_error_bad_num_replicas() -> None:
    network_ops = linear_network("torch")[0].ops
    with pytest.raises(ValueError, match="num_replicas must be a positive int"):
        fe.Network(network_ops, num_replicas=0)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"mode": "training", "epoch": 1}, ValueError, r"Unknown mode 'training'; valid modes are \['train'"),
    ({"mode": "train", "epoch": "one"}, ValueError, r"epoch must be an int >= 1, got 'one'"),
    ({"mode": "train", "epoch": 0}, ValueError, r"epoch must be an int >= 1, got 0"),
    ({"mode": "train", "epoch": 1, "ds_id": None}, TypeError, r"ds_id must be a str .*got None")])
def test_bad_context_arguments_are_named(kwargs: dict, error: type, match: str) -> None:
    network, _ = linear_network("torch")
    with pytest.raises(error, match=match):
        network(**kwargs)
    with network(mode="train", epoch=np.int64(2)):  # numpy ints are ints
        assert network.ctx_state["epoch"] == 2


def test_transform_of_a_pipeline_runs_every_batch_in_order_and_updates_only_in_train_mode() -> None:
    from fe_ray.dataset import NumpyDataset

    x = np.arange(15, dtype=np.float32).reshape(5, 3) / 10
    data = NumpyDataset({"x": x, "y": np.zeros((5, 1), np.float32)})
    pipeline = fe.Pipeline(train_data=data, eval_data=data, batch_size=2, shuffle_seed=3)  # fits shuffle train data
    for mode in ("eval", "train"):
        network, model = linear_network("torch")
        outs = network.transform(pipeline, mode=mode)
        assert [len(out["x"]) for out in outs] == [2, 2, 1]
        np.testing.assert_array_equal(np.concatenate([to_number(out["x"]) for out in outs]), x)
        # The first batch meets the initial weights; the UpdateOps run (and change them) in train mode only.
        np.testing.assert_allclose(to_number(outs[0]["y_pred"]).reshape(-1), x[:2] @ [1, 2, 3], rtol=1e-6)
        assert np.array_equal(weights_of(model), [1, 2, 3]) == (mode == "eval")


def test_error_mixed_precision_and_full_precision_models_in_one_network() -> None:
    full = fe.build(linear_model_fn("torch"), optimizer_fn="sgd", model_name="full")
    mixed = fe.build(linear_model_fn("torch"), optimizer_fn="sgd", model_name="mixed", mixed_precision=True)
    with pytest.raises(ValueError, match="Cannot mix full-precision and mixed-precision models.*same mixed_precision"):
        fe.Network([ModelOp(model=full, inputs="x", outputs="a"), ModelOp(model=mixed, inputs="x", outputs="b")])


def test_error_slicers_must_be_slicers() -> None:
    ops = linear_network("torch")[0].ops
    with pytest.raises(TypeError, match="Network slicers must be Slicers, got str"):
        fe.Network(ops, slicers="x")


def test_a_network_is_configured_before_and_entered_once() -> None:
    network, _ = linear_network("torch")
    with pytest.raises(ValueError, match=r"Configure the network before entering it: `with network\(mode="):
        with network:
            pass
    with network(mode="train", epoch=1):
        with pytest.raises(ValueError, match="cannot configure a Network while it is in use"):
            network(mode="eval", epoch=1)
        with pytest.raises(ValueError, match="already in use"):
            network.__enter__()
    with network(mode="eval", epoch=1):  # usable again once the context is left
        assert network.ctx_state["mode"] == "eval"


def test_loading_a_network_state_of_another_configuration_names_what_differs() -> None:
    from fe_ray.slicer import ChunkSlicer, MeanUnslicer

    sliced = linear_network("torch", slicers=[ChunkSlicer(n_chunks=2, slice=["x", "y"], unslice="y_pred"),
                                              MeanUnslicer(unslice="mse")])[0]
    plain = linear_network("torch")[0]
    with pytest.raises(ValueError, match=r"Checkpoint has 0 network slicers but this Network has 2: saved \[\] vs "
                                         r"current \['ChunkSlicer', 'MeanUnslicer'\]"):
        sliced.load_state_dict(plain.state_dict())
    state = plain.state_dict()
    state["ops"][0]["type"] = "LambdaOp"
    with pytest.raises(ValueError, match="Network ops #0 is a ModelOp but the checkpoint holds a LambdaOp"):
        plain.load_state_dict(state)


def test_run_step_outside_context() -> None:
    network, _ = linear_network("torch")
    with pytest.raises(ValueError, match="inside `with network"):
        network.run_step(batch([[1, 1, 1]], [1]))


def test_a_context_that_fails_to_start_leaves_the_network_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure entering a context (a distributed network's dead replica, a placement error, Ctrl-C) must free
    the network: its recovery, or the user's retry, enters again."""
    network, _ = linear_network("torch")
    failures = [RuntimeError("replica died while configuring")]
    enter = network._enter_context

    def failing_enter() -> None:
        if failures:
            raise failures.pop()
        enter()

    monkeypatch.setattr(network, "_enter_context", failing_enter)
    with pytest.raises(RuntimeError, match="configuring"):
        with network(mode="train", epoch=1):
            pass
    assert not network.ctx_lock.locked() and network.ctx_state == {}
    with network(mode="infer", epoch=1):
        out = network.run_step(batch([[1, 1, 1]], [1]))
    assert float(to_number(out["y_pred"]).reshape(-1)[0]) == pytest.approx(6.0)


def test_an_unsliced_output_no_trace_asked_for_is_still_unsliced() -> None:
    """A slicer un-slices every key it names (FastEstimator's minibatches keep all the ops' outputs): a key no trace
    wants ("mse" here) must not be dropped before un-slicing, which failed with "minibatch(es) [0, 1] lack it"."""
    from fe_ray.slicer import MeanUnslicer

    network, _ = linear_network("torch", slicers=[ChunkSlicer(n_chunks=2, slice=["x", "y"], unslice=["y_pred"]),
                                                  MeanUnslicer(unslice="mse")])
    data = batch([[1, 1, 1], [2, 0, 1], [0, 1, 0], [1, 2, 3]], [1, 0, 2, 1])
    with network(mode="eval", epoch=1, ds_id="", desired_output_keys={"y_pred"}):
        out = network.run_step(data)
    np.testing.assert_allclose(to_number(out["y_pred"]).reshape(-1), [6, 5, 2, 14])
    assert "mse" in out


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_per_batch_constant_of_another_length_rides_along_with_the_samples(framework: str) -> None:
    """FastEstimator runs a batch whose keys differ in leading length (here a 3-element scale next to 2 samples);
    fe_ray refused it as a ragged batch."""
    network, _ = linear_network(framework)
    network = fe.Network([*network.ops, LambdaOp(lambda p, s: p * s[-1], inputs=("y_pred", "scale"),
                                                 outputs="scaled")])
    data = {**batch([[1, 1, 1], [0, 0, 1]], [1, 1]), "scale": np.array([1.0, 2.0, 10.0], dtype=np.float32)}
    with network(mode="eval", epoch=1, ds_id=""):
        out = network.run_step(data)
    np.testing.assert_allclose(to_number(out["scaled"]).reshape(-1), [60.0, 30.0])


def test_a_torch_training_step_makes_no_more_python_calls_than_it_needs() -> None:
    """The Network's own per-step cost (issue 5): a ModelOp -> CrossEntropy -> UpdateOp training step calls 50 of
    fe_ray's functions (it called 70 before the step's fast paths: nested walks of flat batches, moves of CPU tensors
    to the CPU, no-op contexts, empty pop lists). A change that needs more calls per step raises this bound, saying
    why."""
    import sys

    import torch

    from fe_ray.op.tensorop.loss import CrossEntropy

    package = os.path.dirname(fe.__file__) + os.sep
    model = fe.build(lambda: torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softmax(dim=-1)), "adam")
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"), UpdateOp(model=model, loss_name="ce")])
    data = {"x": np.ones((2, 4), np.float32), "y": np.array([0, 2])}
    calls: list[str] = []

    def count(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(package):
            calls.append(frame.f_code.co_name)

    with network(mode="train", epoch=1):
        network.run_step(data)  # the context's first step
        before = weights_of(model)
        sys.setprofile(count)
        try:
            out = network.run_step(data)
        finally:
            sys.setprofile(None)
    assert not np.array_equal(weights_of(model), before) and set(out) == {"x", "y", "y_pred", "ce"}
    assert len(calls) <= 50, sorted(calls)
