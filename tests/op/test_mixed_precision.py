"""Mixed-precision UpdateOp steps: TF loss scaling (LossScaleOptimizer) and torch autocast."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402
from tests.helpers.models import tf_dense, tf_sgd, torch_linear, torch_sgd, weights  # noqa: E402
from tests.op.test_update_op import W0, batch, chain, mse_grad, new_state, step  # noqa: E402

X = [0.01, 0.01, 0.01]  # small values: a 2**15 loss scale must not overflow float16 gradients


@pytest.mark.parametrize("eager", [False, True])
def test_tf_loss_scaled_step_matches_float32_update(eager: bool) -> None:
    import keras

    backend = get_backend("tf")
    backend.set_mixed_precision_policy(True)
    try:
        model = tf_dense(tf_sgd(0.1), mixed_precision=True)
        assert model.layers[0].compute_dtype == "float16"
        step("tf", chain(model, "tf"), batch(X, 0), new_state(eager))
    finally:
        backend.set_mixed_precision_policy(False)
    assert keras.mixed_precision.global_policy().name == "float32"
    assert float(model.current_optimizer.dynamic_scale.numpy()) == 2.0 ** 15  # finite gradients: step not skipped
    np.testing.assert_allclose(weights(model), W0 - 0.1 * mse_grad(W0, X, 0), atol=2e-6)


def test_torch_autocast_step_on_cpu() -> None:
    model = torch_linear(torch_sgd(0.1), mixed_precision=True)
    ops = chain(model, "torch")
    out = get_backend("torch").run_step(ops, batch([1, 1, 1], 1), new_state(), {"x", "y"}, {"pred"},
                                        device="cpu", mixed_precision=True)
    assert out["pred"].device.type == "cpu"
    np.testing.assert_allclose(weights(model), W0 - 0.1 * mse_grad(W0, [1, 1, 1], 1), atol=5e-2)  # bfloat16 compute


def test_build_sets_the_keras_policy_for_its_model_fn_only() -> None:
    """A mixed-precision build must not turn later builds (or the user's own Keras code) to float16, and a torch
    build must not touch Keras at all; a policy the user set stays set after fe.build."""
    import keras

    import fe_ray as fe
    from tests.test_network import linear_model_fn

    mixed = fe.build(linear_model_fn("tf"), optimizer_fn="sgd", mixed_precision=True)
    assert mixed.layers[-1].compute_dtype == "float16"
    assert keras.mixed_precision.global_policy().name == "float32"
    plain = fe.build(linear_model_fn("tf"), optimizer_fn="sgd")
    assert plain.layers[-1].compute_dtype == "float32" and not plain.mixed_precision
    fe.build(linear_model_fn("torch"), optimizer_fn="sgd", mixed_precision=True)
    assert keras.mixed_precision.global_policy().name == "float32"
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        fe.build(linear_model_fn("tf"), optimizer_fn="sgd", mixed_precision=True)
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    finally:
        keras.mixed_precision.set_global_policy("float32")


class ShareReducer:
    """A stand-in for the distributed all-reduce: records how UpdateOp calls it and returns the gradients as they
    are (one process, so the prescaled sum is the identity)."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.calls: list[tuple[bool, list[np.ndarray]]] = []

    def loss_share(self) -> float:
        return self.share

    def __call__(self, model: Any, gradients: list[Any], prescaled: bool = False) -> list[Any]:
        self.calls.append((prescaled, [np.array(get_backend(model_framework(model)).to_numpy(g)) for g in gradients]))
        return list(gradients)


def model_framework(model: Any) -> str:
    return "tf" if hasattr(model, "get_weights") else "torch"


def loss_scaled_model(framework: str) -> tuple[Any, float]:
    """A model whose UpdateOp scales its loss, and that scale. Torch's GradScaler runs on the CPU too, so the torch
    path is tested here with one (fe_ray gives the optimizer one only on CUDA)."""
    if framework == "tf":
        backend = get_backend("tf")
        backend.set_mixed_precision_policy(True)
        try:
            model = tf_dense(tf_sgd(0.1), mixed_precision=True)
        finally:
            backend.set_mixed_precision_policy(False)
        return model, 2.0 ** 15  # Keras' initial scale (its variable exists only once the optimizer is built)
    import torch

    model = torch_linear(torch_sgd(0.1))
    model.current_optimizer.scaler = torch.amp.GradScaler("cpu")
    return model, float(model.current_optimizer.scaler.get_scale())


@pytest.mark.parametrize(("framework", "eager"), [("torch", False), ("tf", False), ("tf", True)],
                         ids=["torch", "tf-graph", "tf-eager"])
def test_loss_scaled_update_weights_the_loss_by_the_reducers_share(framework: str, eager: bool) -> None:
    """A replica's slice-mean loss times the loss scale overflows float16 where the whole batch's does not, so a
    loss-scaled model's UpdateOp multiplies the loss by the reducer's share of the batch before the backward pass
    and asks the reducer only to sum. The share is read on every step, also from a traced TF graph."""
    model, scale = loss_scaled_model(framework)
    assert get_backend(framework).uses_loss_scaling(model)
    reducer = ShareReducer(share=0.25)
    ops = chain(model, framework)
    state = new_state(eager, reducer=reducer)
    step(framework, ops, batch(X, 0), state)
    reducer.share = 0.5
    step(framework, ops, batch(X, 0), state)
    assert [prescaled for prescaled, _ in reducer.calls] == [True, True]
    first = reducer.calls[0][1][0].reshape(-1)  # still scaled: the optimizer unscales when applying
    np.testing.assert_allclose(first, 0.25 * scale * mse_grad(W0, X, 0), rtol=2e-3)
    w1 = W0 - 0.1 * 0.25 * mse_grad(W0, X, 0)
    np.testing.assert_allclose(reducer.calls[1][1][0].reshape(-1), 0.5 * scale * mse_grad(w1, X, 0), rtol=2e-3)
    np.testing.assert_allclose(weights(model), w1 - 0.1 * 0.5 * mse_grad(w1, X, 0), atol=1e-5)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_loss_scaled_update_calls_a_two_argument_reducer_as_before(framework: str) -> None:
    """A reducer without loss_share() (a user's own) gets the scaled gradients of the plain mean loss."""
    model, scale = loss_scaled_model(framework)
    seen: list[np.ndarray] = []

    def reducer(model: Any, gradients: list[Any]) -> list[Any]:
        seen.append(np.array(get_backend(framework).to_numpy(gradients[0])).reshape(-1))
        return list(gradients)

    step(framework, chain(model, framework), batch(X, 0), new_state(reducer=reducer))
    np.testing.assert_allclose(seen[0], scale * mse_grad(W0, X, 0), rtol=2e-3)
    np.testing.assert_allclose(weights(model), W0 - 0.1 * mse_grad(W0, X, 0), atol=1e-5)
