"""UpdateOp driven through the backends' run_step with hand-built states (no Network)."""

from __future__ import annotations

import os
import pickle
import re
import warnings
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.op.tensorop import LambdaOp  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, tf_dense, torch_linear, weights  # noqa: E402

LR = 0.1
W0 = np.array([1.0, 2.0, 3.0])
# (framework, eager): TF is exercised both as a traced graph and eagerly.
MODES = [("torch", False), ("tf", False), ("tf", True)]
IDS = ["torch", "tf-graph", "tf-eager"]


def new_state(eager: bool = False, reducer: Any = None, warmup: bool = False) -> dict[str, Any]:
    return {"mode": "train", "epoch": 1, "ds_id": "", "warmup": warmup, "req_grad": True, "deferred": {},
            "eager": eager, "grad_reducer": reducer}


def batch(x: list[float], y: float) -> dict[str, np.ndarray]:
    return {"x": np.array([x], dtype=np.float32), "y": np.array([[y]], dtype=np.float32)}


def mse_grad(w: np.ndarray, x: list[float], y: float) -> np.ndarray:
    return 2 * (w @ np.array(x) - y) * np.array(x)


def chain(model: Any, framework: str, **update_kwargs: Any) -> list[Any]:
    ops = [ModelOp(model=model, inputs="x", outputs="pred"), MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse", **update_kwargs)]
    for op in ops:
        op.build(framework)
    return ops


def step(framework: str, ops: list[Any], data: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    return get_backend(framework).run_step(ops, data, state, set(data), {"pred", "mse"})


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_single_step_update(framework: str, eager: bool) -> None:
    model = linear(framework, lr=LR)
    out = step(framework, chain(model, framework), batch([1, 1, 1], 1), new_state(eager))
    assert float(get_backend(framework).to_numpy(out["mse"])) == pytest.approx(25.0)
    np.testing.assert_allclose(weights(model), W0 - LR * mse_grad(W0, [1, 1, 1], 1), atol=1e-5)


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_merge_grad_two(framework: str, eager: bool) -> None:
    model = linear(framework, lr=LR)
    ops = chain(model, framework, merge_grad=2)
    state = new_state(eager)
    step(framework, ops, batch([1, 1, 1], 1), state)
    np.testing.assert_array_equal(weights(model), W0)  # accumulated only
    step(framework, ops, batch([1, 0, 2], 0), state)
    mean = (mse_grad(W0, [1, 1, 1], 1) + mse_grad(W0, [1, 0, 2], 0)) / 2
    np.testing.assert_allclose(weights(model), W0 - LR * mean, atol=1e-5)
    assert ops[2].state_dict()["step"] == 2
    np.testing.assert_array_equal(np.concatenate(ops[2].state_dict()["grad_sum"], axis=None), 0)


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_a_network_built_again_starts_its_accumulation_afresh(framework: str, eager: bool) -> None:
    """As in FastEstimator, building the op into another Network restarts merge_grad's count: the first Network's
    half-accumulated step no longer makes the second one's first step update (a numpy merge_grad is taken too)."""
    model = linear(framework, lr=LR)
    ops = chain(model, framework, merge_grad=np.int64(2))
    step(framework, ops, batch([1, 1, 1], 1), new_state(eager))
    assert ops[2].state_dict()["step"] == 1
    for op in ops:  # what a new fe.Network(ops) does
        op.build(framework)
    assert ops[2].state_dict()["step"] == 0
    step(framework, ops, batch([1, 0, 2], 0), new_state(eager))
    np.testing.assert_array_equal(weights(model), W0)  # accumulated only


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_merge_grad_checkpoint_resumes_exactly(framework: str, eager: bool) -> None:
    first, second = batch([1, 1, 1], 1), batch([1, 0, 2], 0)
    reference = linear(framework, lr=LR)
    ref_ops = chain(reference, framework, merge_grad=2)
    step(framework, ref_ops, first, new_state(eager))
    snapshot = pickle.loads(pickle.dumps(ref_ops[2].state_dict()))
    assert snapshot["step"] == 1
    step(framework, ref_ops, second, new_state(eager))
    # A new op restored mid-accumulation (before build, as when a Network is re-created) finishes the same update.
    resumed = linear(framework, lr=LR)
    ops = [ModelOp(model=resumed, inputs="x", outputs="pred"), MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
           UpdateOp(model=resumed, loss_name="mse", merge_grad=2)]
    ops[2].load_state_dict(snapshot)
    for op in ops:
        op.build(framework)
    step(framework, ops, second, new_state(eager))
    np.testing.assert_array_equal(weights(resumed), weights(reference))
    with pytest.raises(ValueError, match="different configuration"):
        ops[2].load_state_dict({"step": 0})
    # Sums of another model's weights (one array where this model has one weight matrix too many or too few).
    wrong = {**snapshot, "grad_sum": list(snapshot["grad_sum"]) * 2}
    with pytest.raises(ValueError, match=rf"Checkpoint holds {2 * len(snapshot['grad_sum'])} accumulated gradients "
                                         rf"but model 'linear' has {len(snapshot['grad_sum'])} trainable weights"):
        ops[2].load_state_dict(wrong)


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_gradients_key(framework: str, eager: bool) -> None:
    model = linear(framework, lr=LR)
    grad = np.array([1.0, -2.0, 4.0], dtype=np.float32)
    shaped = grad.reshape(1, 3) if framework == "torch" else grad.reshape(3, 1)
    op = UpdateOp(model=model, loss_name="mse", gradients="grads")
    op.build(framework)
    assert op.inputs == ["grads"] and op.get_fe_loss_keys() == {"mse"}
    get_backend(framework).run_step([op], {"grads": [shaped]}, new_state(eager), {"grads"}, set())
    np.testing.assert_allclose(weights(model), W0 - LR * grad, atol=1e-6)
    # As in FastEstimator, ready-made gradients need no loss key: loss_name=None logs no loss.
    unnamed = UpdateOp(model=model, loss_name=None, gradients="grads")
    unnamed.build(framework)
    assert unnamed.get_fe_loss_keys() == set() and model.loss_name == {"mse"}
    get_backend(framework).run_step([unnamed], {"grads": [shaped]}, new_state(eager), {"grads"}, set())
    np.testing.assert_allclose(weights(model), W0 - 2 * LR * grad, atol=1e-6)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_mixed_precision_with_gradients_key_rejected(framework: str) -> None:
    model = (torch_linear if framework == "torch" else tf_dense)("sgd", mixed_precision=True)
    with pytest.raises(ValueError, match="mixed-precision.*'grads'"):
        UpdateOp(model=model, loss_name="mse", gradients="grads")


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_grad_reducer_result_is_applied(framework: str, eager: bool) -> None:
    calls: list[tuple[str, list[np.ndarray]]] = []
    backend = get_backend(framework)

    def reducer(model: Any, gradients: list[Any]) -> list[Any]:
        # Eager values even when the step is a traced TF graph (the backend routes the call through numpy).
        calls.append((model.model_name, [np.array(backend.to_numpy(g)) for g in gradients]))
        return [g * 0 + 0.5 for g in gradients]

    model = linear(framework, lr=LR, name="reduced")
    state = new_state(eager, reducer=reducer)
    ops = chain(model, framework)
    step(framework, ops, batch([1, 1, 1], 1), state)
    step(framework, ops, batch([1, 1, 1], 1), state)
    assert [name for name, _ in calls] == ["reduced", "reduced"]
    np.testing.assert_allclose(calls[0][1][0].reshape(-1), mse_grad(W0, [1, 1, 1], 1), atol=1e-5)
    np.testing.assert_allclose(weights(model), W0 - 2 * LR * 0.5, atol=1e-6)


@pytest.mark.parametrize("transformed", [False, True], ids=["as written", "transformed"])
@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_a_gradient_ops_gradients_are_reduced_once(framework: str, eager: bool, transformed: bool) -> None:
    """GradientOp reduces its gradients w.r.t. the weights itself; UpdateOp applies those as they are, and reduces
    again only a list some op made from them (reducing gradients equal on every replica leaves them as they are)."""
    from fe_ray.op.tensorop.gradient import GradientOp

    calls: list[list[np.ndarray]] = []
    backend = get_backend(framework)

    def reducer(model: Any, gradients: list[Any]) -> list[Any]:
        calls.append([np.array(backend.to_numpy(g)) for g in gradients])
        return [g * 0 + 0.5 for g in gradients]

    model = linear(framework, lr=LR, name="reduced")
    ops = [ModelOp(model=model, inputs="x", outputs="pred"), MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
           GradientOp(finals="mse", model=model, outputs="grads")]
    if transformed:
        ops.append(LambdaOp(lambda grads: [g * 4 for g in grads], inputs="grads", outputs="grads"))
    ops.append(UpdateOp(model=model, loss_name="mse", gradients="grads"))
    for op in ops:
        op.build(framework)
    step(framework, ops, batch([1, 1, 1], 1), new_state(eager, reducer=reducer))
    assert len(calls) == (2 if transformed else 1)
    np.testing.assert_allclose(calls[0][0].reshape(-1), mse_grad(W0, [1, 1, 1], 1), atol=1e-5)
    if transformed:
        np.testing.assert_allclose(calls[1][0].reshape(-1), [2.0, 2.0, 2.0])  # the GradientOp's 0.5s, times 4
    np.testing.assert_allclose(weights(model), W0 - LR * 0.5, atol=1e-6)


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_warmup_skips_update(framework: str, eager: bool) -> None:
    model = linear(framework, lr=LR)
    step(framework, chain(model, framework), batch([1, 1, 1], 1), new_state(eager, warmup=True))
    np.testing.assert_array_equal(weights(model), W0)


@pytest.mark.parametrize("eager", [False, True])
def test_tf_model_losses_are_added(eager: bool) -> None:
    import keras

    model = tf_dense(lambda: keras.optimizers.SGD(LR))
    regularized = keras.Sequential([keras.Input((3,)), keras.layers.Dense(
        1, use_bias=False, kernel_regularizer=keras.regularizers.L2(0.5))])
    regularized.set_weights(model.get_weights())
    for attr in ("model_name", "optimizer", "current_optimizer", "mixed_precision", "fe_compiled"):
        setattr(regularized, attr, getattr(model, attr))
    step("tf", chain(regularized, "tf"), batch([1, 1, 1], 1), new_state(eager))
    # d/dw of 0.5 * sum(w^2) is w.
    np.testing.assert_allclose(weights(regularized), W0 - LR * (mse_grad(W0, [1, 1, 1], 1) + W0), atol=1e-5)


def gan_like_ops(defer_first: bool) -> tuple[list[Any], Any, Any]:
    """G feeds D; D is updated first, then G's gradient flows back through D."""
    import torch

    generator = torch_linear(lambda p: torch.optim.SGD(p, lr=LR), name="gen", in_features=3, out_features=3)
    critic = torch_linear(lambda p: torch.optim.SGD(p, lr=LR), name="critic")
    ops = [ModelOp(model=generator, inputs="x", outputs="h"), ModelOp(model=critic, inputs="h", outputs="pred"),
           MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
           UpdateOp(model=critic, loss_name="mse", defer=defer_first), UpdateOp(model=generator, loss_name="mse")]
    ops[3].fe_retain_graph(True)
    for op in ops:
        op.build("torch")
    return ops, generator, critic


def test_torch_inplace_error_suggests_defer() -> None:
    ops, _, _ = gan_like_ops(defer_first=False)
    with pytest.raises(RuntimeError, match=r"'gen'.*Consider setting defer=True"):
        step("torch", ops, batch([1, 2, 3], 1), new_state())


def test_torch_deferred_update_lets_both_models_train() -> None:
    ops, generator, critic = gan_like_ops(defer_first=True)
    before = [weights(generator), weights(critic)]
    step("torch", ops, batch([1, 2, 3], 1), new_state())
    assert not np.allclose(weights(generator), before[0]) and not np.allclose(weights(critic), before[1])


def test_constructor_errors_and_bookkeeping() -> None:
    import torch

    with pytest.raises(TypeError, match="fe_ray.build"):
        UpdateOp(model=torch.nn.Linear(3, 1), loss_name="mse")
    model = torch_linear()
    with pytest.raises(ValueError, match="merge_grad must be a positive int"):
        UpdateOp(model=model, loss_name="mse", merge_grad=0)
    with pytest.raises(TypeError, match=r"UpdateOp gradients must be one key \(a str\) holding the gradients, or "
                                        r"None, got \['g1', 'g2'\]"):
        UpdateOp(model=model, loss_name="mse", gradients=["g1", "g2"])
    op = UpdateOp(model=model, loss_name="mse")
    assert model.loss_name == {"mse"} and op.get_fe_models() == {model} and op.mode == {"train"}
    assert op.fe_retain_graph() is False and op.fe_retain_graph(True) is True
    assert op.state_dict() == {}
    with pytest.raises(ValueError, match="'tf' and 'torch'"):
        op.build("jax")
    lambda_op = LambdaOp(lambda x: x, inputs="x", outputs="x")
    assert lambda_op.fe_retain_graph() is None


def two_head_tf_model(optimizer_def: Any) -> Any:
    """A functional Keras model with two bias-free Dense heads "a" and "b" on one input, built like fe_ray.build."""
    import keras

    from tests.helpers.models import _attach

    inputs = keras.Input((3,))
    heads = [keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name=name)(inputs) for name in "ab"]
    return _attach(keras.Model(inputs, heads), "tf", optimizer_def, "two_heads", False)


@pytest.mark.parametrize("eager", [False, True])
def test_tf_weights_the_loss_does_not_reach_stay_unchanged(eager: bool) -> None:
    import keras

    # AdamW decays every weight it is handed: a zero gradient for head "b" would still shrink it (Keras skips None).
    model = two_head_tf_model(lambda: keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5))
    ops = [ModelOp(model=model, inputs="x", outputs=["pa", "pb"]), MeanSquaredError(inputs=("pa", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse")]
    for op in ops:
        op.build("tf")
    reduced: list[int] = []

    def reducer(model: Any, gradients: list[Any]) -> list[Any]:
        reduced.append(len(gradients))  # replicas all-reduce a full list, zeros for the head the loss misses
        return gradients

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        get_backend("tf").run_step(ops, batch([1, 1, 1], 1), new_state(eager, reducer), {"x", "y"}, {"mse"})
    kernel_a, kernel_b = (np.asarray(w).reshape(-1) for w in model.get_weights())
    assert reduced == [2] and not np.allclose(kernel_a, 1.0)
    np.testing.assert_array_equal(kernel_b, [1.0, 1.0, 1.0])
    assert any(re.search(r"'two_heads'.*'mse'.*b/kernel.*not updated", str(w.message)) for w in caught)


def test_torch_weights_the_loss_does_not_reach_stay_unchanged() -> None:
    import torch

    from tests.helpers.models import _attach

    class TwoHeads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(3, 1, bias=False)
            self.b = torch.nn.Linear(3, 1, bias=False)
            for head in (self.a, self.b):
                torch.nn.init.ones_(head.weight)

        def forward(self, x: Any) -> Any:
            return self.a(x), self.b(x)

    # AdamW decays every parameter that has a gradient: a zero gradient for head b would shrink it (torch's
    # optimizers skip a parameter whose grad is None, as FastEstimator leaves it).
    model = _attach(TwoHeads(), "torch", lambda params: torch.optim.AdamW(params, lr=0.1, weight_decay=0.5),
                    "two_heads", False)
    ops = [ModelOp(model=model, inputs="x", outputs=["pa", "pb"]), MeanSquaredError(inputs=("pa", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse")]
    for op in ops:
        op.build("torch")
    get_backend("torch").run_step(ops, batch([1, 1, 1], 1), new_state(), {"x", "y"}, {"mse"})
    assert not np.allclose(model.a.weight.detach().numpy(), 1.0)
    np.testing.assert_array_equal(model.b.weight.detach().numpy(), [[1.0, 1.0, 1.0]])
    assert model.b.weight.grad is None


def test_tf_loss_that_reaches_no_weight_is_refused() -> None:
    model = tf_dense("sgd", name="frozen_teacher")
    ops = [ModelOp(model=model, inputs="x", outputs="pred", gradients=False),
           MeanSquaredError(inputs=("pred", "y"), outputs="mse"), UpdateOp(model=model, loss_name="mse")]
    for op in ops:
        op.build("tf")
    with pytest.raises(ValueError, match=r"no gradient for any trainable weight of model 'frozen_teacher'.*'mse'"):
        get_backend("tf").run_step(ops, batch([1, 1, 1], 1), new_state(eager=True), {"x", "y"}, {"mse"})
    np.testing.assert_array_equal(weights(model), W0)


def test_update_of_a_model_without_optimizer_is_named() -> None:
    model = tf_dense(None, name="no_opt")
    with pytest.raises(ValueError, match=r"'no_opt'.*no optimizer.*optimizer_fn"):
        step("tf", chain(model, "tf"), batch([1, 1, 1], 1), new_state(eager=True))


@pytest.mark.parametrize("loss_name", [None, ["ce", "mse"]])
def test_a_loss_name_that_is_not_one_key_is_named(loss_name: Any) -> None:
    with pytest.raises(TypeError, match=r"loss_name must be one key.*None only with gradients=.*"
                                        + re.escape(repr(loss_name))):
        UpdateOp(model=tf_dense(), loss_name=loss_name)


class _ShareReducer:
    """A replica's reducer as GradientOp sees it: only its share of the batch matters here."""

    def __init__(self, share: float) -> None:
        self.share = share

    def __call__(self, model: Any, gradients: list[Any], prescaled: bool = False) -> list[Any]:
        return list(gradients)

    def loss_share(self) -> float:
        return self.share


@pytest.mark.parametrize(("framework", "eager"), MODES, ids=IDS)
def test_gradients_wrt_the_batch_of_a_mean_are_the_whole_batchs_on_replicas(framework: str, eager: bool) -> None:
    """A replica's scalar loss is the mean over its slice: d(loss)/dx of a sample was n_total / n_local times one
    process's. GradientOp scales it by the replica's share of the batch; a final of per-sample values (summed by
    both frameworks) needs no scaling."""
    from fe_ray.op.tensorop.gradient import GradientOp, Watch

    def gradients(reducer: Any) -> tuple[np.ndarray, np.ndarray]:
        model = linear(framework, lr=LR, name="watched")
        ops = [Watch(inputs="x"), ModelOp(model=model, inputs="x", outputs="pred"),
               MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
               MeanSquaredError(inputs=("pred", "y"), outputs="se", average_loss=False),
               GradientOp(inputs=("x", "x"), finals=("mse", "se"), outputs=("g_mean", "g_each"))]
        for op in ops:
            op.build(framework)
        data = {"x": np.array([[1, 1, 1], [1, 2, 0]], dtype=np.float32), "y": np.array([[1], [0]], dtype=np.float32)}
        out = get_backend(framework).run_step(ops, data, new_state(eager, reducer=reducer), set(data),
                                              {"g_mean", "g_each"})
        return tuple(np.array(get_backend(framework).to_numpy(out[key])) for key in ("g_mean", "g_each"))

    alone_mean, alone_each = gradients(None)
    slice_mean, slice_each = gradients(_ShareReducer(0.25))
    np.testing.assert_allclose(slice_mean, 0.25 * alone_mean, rtol=1e-6)
    np.testing.assert_allclose(slice_each, alone_each, rtol=1e-6)
    assert np.abs(alone_mean).max() > 0
