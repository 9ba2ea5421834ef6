"""MixLoss (FastEstimator's loss for MixUp / CutMix batches) with fe_ray's MixUpBatch / CutMixBatch, in in-process
torch and TF Networks (TF traced as a tf.function, and eagerly), checked against hand computations of
``lam * loss(y) + (1 - lam) * loss(roll(y, 1))`` and of the SGD update it drives."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.network import TFNetwork, TorchNetwork  # noqa: E402
from fe_ray.op.tensorop.augmentation import CutMixBatch, MixUpBatch  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy, MeanSquaredError, MixLoss, SuperLoss  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, weights  # noqa: E402

RUNS = [("torch", False), ("tf", False), ("tf", True)]  # (framework, eager)
W0 = np.array([1.0, 2.0, 3.0])
X = np.array([[0.5, 0.2, 0.5], [0.5, 0.5, 0.3], [0.1, 0.9, 0.4], [0.7, 0.3, 0.2]], np.float32)
Y = np.array([[3.0], [0.0], [1.0], [2.0]], np.float32)


def network_of(framework: str, ops: list[Any]) -> Any:
    return TorchNetwork(ops) if framework == "torch" else TFNetwork(ops)


def numpy_of(value: Any) -> np.ndarray:
    return np.asarray(get_backend(value).to_numpy(value))


def step(network: Any, batch: dict[str, Any], mode: str = "train", eager: bool = False) -> dict[str, np.ndarray]:
    with network(mode=mode, epoch=1, eager=eager):
        return {key: numpy_of(value) for key, value in network.run_step(batch).items()}


def log_softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = logits - logits.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def test_fe_module_paths_and_defaults() -> None:
    assert fe.op.tensorop.loss.MixLoss is MixLoss and fe.op.tensorop.loss.mix_loss.MixLoss is MixLoss
    base = CrossEntropy(inputs=("pred", "y"), outputs="ce", mode="train", ds_id="ds1")
    op = MixLoss(loss=base, lam="lam")
    assert op.inputs == ["lam", "pred", "y"] and op.outputs == ["ce"] and op.average_loss is True
    assert (op.mode, op.ds_id) == ({"train"}, {"ds1"})
    assert (op.pred_key, op.true_key) == ("pred", "y")
    assert base.average_loss is False  # the wrapped loss gives one loss per sample
    assert MixLoss(loss=CrossEntropy(inputs=("p", "y"), outputs="l"), lam="lam", average_loss=False).average_loss \
        is False


@pytest.mark.parametrize("framework,eager", RUNS)
def test_mixup_training_step_matches_hand_computation(framework: str, eager: bool) -> None:
    """MixUp of the inputs only; the mixed prediction is scored against y and against y rolled by one sample, and the
    SGD step follows the gradient of that weighted mean."""
    lr = 0.05
    model = linear(framework, lr=lr)
    ops = [MixUpBatch(inputs="x", outputs=["x_mix", "lam"], alpha=0.7, shared_beta=True),
           ModelOp(model=model, inputs="x_mix", outputs="pred"),
           MixLoss(loss=MeanSquaredError(inputs=("pred", "y"), outputs="mse", mode="train"), lam="lam"),
           UpdateOp(model=model, loss_name="mse")]
    out = step(network_of(framework, ops), {"x": X, "y": Y}, eager=eager)
    lam = float(out["lam"])
    assert 0.5 <= lam <= 1.0
    x_mix = lam * X + (1 - lam) * np.roll(X, 1, axis=0)
    np.testing.assert_allclose(out["x_mix"], x_mix, rtol=1e-6)
    pred = x_mix @ W0
    y, y_rolled = Y[:, 0], np.roll(Y[:, 0], 1)
    expected = np.mean(lam * (pred - y) ** 2 + (1 - lam) * (pred - y_rolled) ** 2)
    np.testing.assert_allclose(out["mse"], expected, rtol=1e-5)
    # FastEstimator's form for a shared lam: lam * mean(loss(y)) + (1 - lam) * mean(loss(rolled y)).
    np.testing.assert_allclose(out["mse"], lam * np.mean((pred - y) ** 2) + (1 - lam) * np.mean(
        (pred - y_rolled) ** 2), rtol=1e-5)
    grad = np.mean((lam * 2 * (pred - y) + (1 - lam) * 2 * (pred - y_rolled))[:, None] * x_mix, axis=0)
    np.testing.assert_allclose(weights(model), W0 - lr * grad, rtol=1e-5)


@pytest.mark.parametrize("framework,eager", RUNS)
def test_per_sample_lambda_weighs_each_samples_loss(framework: str, eager: bool) -> None:
    """MixUpBatch(shared_beta=False) writes lam shaped (N, 1, 1, 1) for images; each sample's cross entropy takes its
    own lam. Sparse labels: no one-hot encoding needed."""
    rng = np.random.default_rng(3)
    images = rng.random((4, 2, 2, 3), dtype=np.float32)
    logits = rng.normal(size=(4, 5)).astype(np.float32)
    labels = np.array([1, 4, 0, 2], np.int64)
    ops = [MixUpBatch(inputs="img", outputs=["img_mix", "lam"], shared_beta=False),
           MixLoss(loss=CrossEntropy(inputs=("logits", "y"), outputs="ce", from_logits=True), lam="lam",
                   average_loss=False),
           MixLoss(loss=CrossEntropy(inputs=("logits", "y"), outputs="ce_mean", from_logits=True), lam="lam")]
    out = step(network_of(framework, ops), {"img": images, "logits": logits, "y": labels}, eager=eager)
    lam = out["lam"].reshape(-1)
    assert out["lam"].shape == (4, 1, 1, 1) and len(set(lam.tolist())) == 4
    log_p = log_softmax(logits.astype(np.float64))
    own, other = -log_p[np.arange(4), labels], -log_p[np.arange(4), np.roll(labels, 1)]
    expected = lam * own + (1 - lam) * other
    assert out["ce"].shape == (4,)
    np.testing.assert_allclose(out["ce"], expected, rtol=1e-5)
    np.testing.assert_allclose(out["ce_mean"], expected.mean(), rtol=1e-5)


@pytest.mark.parametrize("framework,eager", RUNS)
def test_cutmix_lambda_with_one_hot_labels(framework: str, eager: bool) -> None:
    rng = np.random.default_rng(4)
    layout = (4, 3, 8, 8) if framework == "torch" else (4, 8, 8, 3)
    images = rng.random(layout, dtype=np.float32)
    probs = rng.dirichlet(np.ones(3), size=4).astype(np.float32)
    onehot = np.eye(3, dtype=np.float32)[[2, 0, 1, 1]]
    ops = [CutMixBatch(inputs="img", outputs=["img_mix", "lam"]),
           MixLoss(loss=CrossEntropy(inputs=("p", "y"), outputs="ce", mode="train"), lam="lam")]
    out = step(network_of(framework, ops), {"img": images, "p": probs, "y": onehot}, eager=eager)
    lam = float(out["lam"])
    own = -np.sum(onehot * np.log(probs), axis=-1)
    other = -np.sum(np.roll(onehot, 1, axis=0) * np.log(probs), axis=-1)
    np.testing.assert_allclose(out["ce"], np.mean(lam * own + (1 - lam) * other), rtol=1e-5)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_runs_only_in_the_wrapped_loss_modes(framework: str) -> None:
    ops = [MixUpBatch(inputs="x", outputs=["x", "lam"]),
           MixLoss(loss=MeanSquaredError(inputs=("x", "y"), outputs="mse", mode="train"), lam="lam")]
    out = step(network_of(framework, ops), {"x": np.ones((2, 1), np.float32), "y": np.ones((2, 1), np.float32)},
               mode="eval")
    assert "mse" not in out and "lam" not in out


def test_state_passes_through_to_the_wrapped_loss() -> None:
    plain = MixLoss(loss=CrossEntropy(inputs=("p", "y"), outputs="ce"), lam="lam")
    assert plain.state_dict() == {}
    plain.load_state_dict({})
    wrapped = MixLoss(loss=SuperLoss(CrossEntropy(inputs=("p", "y"), outputs="ce")), lam="lam")
    state = wrapped.state_dict()
    assert set(state) == {"loss"} and set(state["loss"]) == {"tau", "initialized"}
    state["loss"]["tau"]["train"] = 1.5
    wrapped.load_state_dict(state)
    assert wrapped.state_dict()["loss"]["tau"]["train"] == 1.5
    with pytest.raises(ValueError, match="only the wrapped loss's state"):
        wrapped.load_state_dict({"lam": 1})


def test_argument_errors() -> None:
    with pytest.raises(TypeError, match="wraps a LossOp"):
        MixLoss(loss=MixUpBatch(inputs="x", outputs=["x", "lam"]), lam="lam")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lam must be the key"):
        MixLoss(loss=CrossEntropy(inputs=("p", "y"), outputs="ce"), lam=["lam"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="single output key"):
        MixLoss(loss=SuperLoss(CrossEntropy(inputs=("p", "y"), outputs="ce"), output_confidence="c"), lam="lam")
