"""CrossEntropy and MeanSquaredError against hand-computed numpy values, in both frameworks."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy, MeanSquaredError  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
PROBS = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3]], dtype=np.float32)
LOGITS = np.array([[2.0, 0.5, -1.0], [0.0, 1.0, 3.0]], dtype=np.float32)


def run(op: Any, framework: str, pred: Any, true: Any) -> np.ndarray:
    backend = get_backend(framework)
    op.build(framework)
    out = op.forward([backend.to_tensor(np.asarray(pred)), backend.to_tensor(np.asarray(true))], {"mode": "train"})
    return np.asarray(backend.to_numpy(out))


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_binary_probabilities_and_logits(framework: str) -> None:
    pred, true = np.array([[0.8], [0.3]], np.float32), np.array([[1], [0]], np.float32)
    expected = [-np.log(0.8), -np.log(0.7)]
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), framework, pred, true)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    logits = np.log(pred / (1 - pred))
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=True), framework, logits, true)
    assert float(got) == pytest.approx(np.mean(expected), rel=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("labels", [np.array([0, 2]), np.array([[0], [2]])], ids=["flat", "trailing1"])
def test_sparse(framework: str, labels: np.ndarray) -> None:
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), framework, PROBS, labels)
    np.testing.assert_allclose(got, [-np.log(0.7), -np.log(0.3)], rtol=1e-5)
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=True), framework, LOGITS, labels)
    expected = -np.mean([log_softmax(LOGITS)[0, 0], log_softmax(LOGITS)[1, 2]])
    assert float(got) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_categorical_one_hot_and_soft(framework: str) -> None:
    one_hot = np.array([[1, 0, 0], [0, 0, 1]], np.float32)
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), framework, PROBS, one_hot)
    np.testing.assert_allclose(got, [-np.log(0.7), -np.log(0.3)], rtol=1e-5)
    soft = np.array([[0.5, 0.5, 0], [0, 0.25, 0.75]], np.float32)
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=True, average_loss=False), framework,
              LOGITS, soft)
    np.testing.assert_allclose(got, -(soft * log_softmax(LOGITS)).sum(axis=-1), rtol=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_class_weights(framework: str) -> None:
    op = CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False, class_weights={0: 2.0, 2: 0.5})
    got = run(op, framework, PROBS, np.array([0, 2]))
    np.testing.assert_allclose(got, [-2.0 * np.log(0.7), -0.5 * np.log(0.3)], rtol=1e-5)
    op = CrossEntropy(inputs=("p", "y"), outputs="ce", class_weights={1: 3.0})  # binary: class of y_true
    got = run(op, framework, np.array([[0.8], [0.3]], np.float32), np.array([[1], [0]], np.float32))
    assert float(got) == pytest.approx(np.mean([-3.0 * np.log(0.8), -np.log(0.7)]), rel=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("from_logits", [True, False], ids=["logits", "probs"])
def test_per_position_class_axis(framework: str, from_logits: bool) -> None:
    """A class axis after several sample axes (segmentation-like (N, H, C)), every form's variant: per position,
    averaged, and class-weighted (torch flattens the positions for its fused kernels and must restore the shape)."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 5, 4)).astype(np.float32)
    probs = np.exp(log_softmax(logits))
    pred = logits if from_logits else probs
    labels = rng.integers(0, 4, (2, 5))
    one_hot = np.eye(4, dtype=np.float32)[labels]
    expected = -np.take_along_axis(log_softmax(logits), labels[..., None], axis=-1)[..., 0]
    for true in (labels, one_hot):
        op = CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=from_logits, average_loss=False)
        np.testing.assert_allclose(run(op, framework, pred, true), expected, rtol=1e-4)
        op = CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=from_logits)
        assert float(run(op, framework, pred, true)) == pytest.approx(expected.mean(), rel=1e-4)
        op = CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=from_logits, class_weights={1: 3.0})
        weights = np.where(labels == 1, 3.0, 1.0)
        assert float(run(op, framework, pred, true)) == pytest.approx((weights * expected).mean(), rel=1e-4)


def test_form_inference_and_override() -> None:
    op = CrossEntropy(inputs=("p", "y"), outputs="ce")
    assert op.resolve_form(np.zeros((4, 1)), np.zeros((4, 1))) == "binary"
    assert op.resolve_form(np.zeros((4, 3)), np.zeros((4,))) == "sparse"
    assert op.resolve_form(np.zeros((4, 3)), np.zeros((4, 1))) == "sparse"
    assert op.resolve_form(np.zeros((4, 3)), np.zeros((4, 3))) == "categorical"
    assert op.resolve_form(np.zeros((4, 5, 3)), np.zeros((4, 5))) == "sparse"
    forced = CrossEntropy(inputs=("p", "y"), outputs="ce", form="categorical")
    assert forced.resolve_form(np.zeros((4, 3)), np.zeros((4,))) == "categorical"
    assert op.mode == {"train", "eval", "test"} and op.pred_key == "p" and op.true_key == "y"


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match=r"'multi'.*\['binary', 'sparse', 'categorical'\]"):
        CrossEntropy(inputs=("p", "y"), outputs="ce", form="multi")
    with pytest.raises(ValueError, match="class_weights"):
        CrossEntropy(inputs=("p", "y"), outputs="ce", class_weights={"cat": 1.0})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="prediction_key, ground_truth_key"):
        CrossEntropy(inputs="p", outputs="ce")  # type: ignore[arg-type]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mean_squared_error(framework: str) -> None:
    pred, true = np.array([[1, 2], [3, 4]], np.float32), np.ones((2, 2), np.float32)
    got = run(MeanSquaredError(inputs=("p", "y"), outputs="mse", average_loss=False), framework, pred, true)
    np.testing.assert_allclose(got, [0.5, 6.5])
    got = run(MeanSquaredError(inputs=("p", "y"), outputs="mse"), framework, pred, true)
    assert float(got) == pytest.approx(3.5)
