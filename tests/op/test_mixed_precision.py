"""Mixed-precision UpdateOp steps: TF loss scaling (LossScaleOptimizer) and torch autocast."""

from __future__ import annotations

import os

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
