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


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


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
def test_segmentation_class_axis(framework: str, from_logits: bool) -> None:
    """Segmentation-like predictions with the class axis where each framework keeps it, as in FastEstimator:
    torch (N, C, H, W), TF (N, H, W, C). Sparse and categorical give one loss per pixel, a mean over all pixels,
    and per-pixel class weights. Sparse labels (N, H, W) are inferred; same-shape one-hot targets need
    form="categorical" (FastEstimator infers binary for them)."""
    rng = np.random.default_rng(0)
    class_axis = 1 if framework == "torch" else -1
    logits = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)  # channels-first
    labels = rng.integers(0, 3, (2, 4, 5))
    log_probs = log_softmax(logits, axis=1)
    expected = -np.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]
    one_hot = np.moveaxis(np.eye(3, dtype=np.float32)[labels], -1, 1)
    if class_axis == -1:
        logits, one_hot = np.moveaxis(logits, 1, -1), np.moveaxis(one_hot, 1, -1)
    pred = logits if from_logits else np.exp(log_softmax(logits, axis=class_axis))
    weights = np.where(labels == 1, 3.0, 1.0)
    for true, form in ((labels, None), (labels[:, None] if framework == "torch" else labels[..., None], None),
                       (labels, "sparse"), (one_hot, "categorical")):
        op = CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=from_logits, average_loss=False, form=form)
        np.testing.assert_allclose(run(op, framework, pred, true), expected, rtol=1e-4)
        op = CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=from_logits, form=form)
        assert float(run(op, framework, pred, true)) == pytest.approx(expected.mean(), rel=1e-4)
        op = CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=from_logits, form=form, class_weights={1: 3.0})
        assert float(run(op, framework, pred, true)) == pytest.approx((weights * expected).mean(), rel=1e-4)


def test_form_inference_and_override() -> None:
    """FastEstimator's rule: only a 2-D (N, C>1) prediction is sparse / categorical, everything else binary; plus
    sparse for rank > 2 predictions against class indices (which binary cannot take), on each framework's axis."""
    import tensorflow as tf
    import torch

    op = CrossEntropy(inputs=("p", "y"), outputs="ce")
    assert op.resolve_form(np.zeros((4, 1)), np.zeros((4, 1))) == "binary"
    assert op.resolve_form(np.zeros((4,)), np.zeros((4,))) == "binary"
    assert op.resolve_form(np.zeros((4, 3)), np.zeros((4,))) == "sparse"
    assert op.resolve_form(np.zeros((4, 3)), np.zeros((4, 1))) == "sparse"
    assert op.resolve_form(np.zeros((4, 3)), np.zeros((4, 3))) == "categorical"
    assert op.resolve_form(np.zeros((4, 5, 3)), np.zeros((4, 5))) == "sparse"
    assert op.resolve_form(np.zeros((4, 5, 3)), np.zeros((4, 5, 3))) == "binary"  # multi-label, as FastEstimator
    assert op.resolve_form(torch.zeros(2, 3, 4, 5), torch.zeros(2, 4, 5)) == "sparse"
    assert op.resolve_form(torch.zeros(2, 3, 4, 5), torch.zeros(2, 1, 4, 5)) == "sparse"
    assert op.resolve_form(torch.zeros(2, 3, 4, 5), torch.zeros(2, 3, 4, 5)) == "binary"
    assert op.resolve_form(torch.zeros(2, 1, 4, 5), torch.zeros(2, 4, 5)) == "binary"
    assert op.resolve_form(tf.zeros((2, 4, 5, 3)), tf.zeros((2, 4, 5, 1))) == "sparse"
    assert op.resolve_form(tf.zeros((2, 4, 5, 1)), tf.zeros((2, 4, 5))) == "binary"
    forced = CrossEntropy(inputs=("p", "y"), outputs="ce", form="categorical")
    assert forced.resolve_form(np.zeros((4, 3)), np.zeros((4,))) == "categorical"
    assert forced.resolve_form(torch.zeros(2, 3, 4, 5), torch.zeros(2, 3, 4, 5)) == "categorical"
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


def bce_reference(p: np.ndarray, y: np.ndarray, log_floor: float | None = None, eps: float = 0.0,
                  log_eps: float = 0.0) -> np.ndarray:
    """Element-wise binary cross entropy in float64: torch's BCE (logs floored at ``log_floor``) or Keras 2's
    (FastEstimator's TF formula: ``p`` clipped to [eps, 1 - eps] in float32, ``log_eps`` added inside the logs)."""
    p32 = np.clip(np.asarray(p, np.float32), np.float32(eps), np.float32(1 - eps))
    q32 = np.float32(1) - p32  # in float32, as Keras computes 1 - p
    p, q = p32.astype(np.float64) + log_eps, q32.astype(np.float64) + log_eps
    y = np.asarray(y, np.float64)
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(p), np.log(q)
    if log_floor is not None:
        log_p, log_q = np.maximum(log_p, log_floor), np.maximum(log_q, log_floor)
    return -(y * log_p + (1 - y) * log_q)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_dimensional_prediction_is_binary(framework: str) -> None:
    """F1: a squeezed sigmoid output (N,) with labels (N,) is binary (FastEstimator's rule), one loss per sample."""
    pred, true = np.array([0.9, 0.2, 0.7, 0.4], np.float32), np.array([1, 0, 1, 1])
    expected = bce_reference(pred, true)
    assert CrossEntropy(inputs=("p", "y"), outputs="ce").resolve_form(pred, true) == "binary"
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce"), framework, pred, true)
    assert float(got) == pytest.approx(expected.mean(), rel=1e-5)  # 0.4004 (was 3.7437, as categorical)
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), framework, pred, true)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    logits = np.log(pred / (1 - pred))
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", from_logits=True), framework, logits, true)
    assert float(got) == pytest.approx(expected.mean(), rel=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_half_precision_losses_compute_in_float32(dtype: str) -> None:
    """F2: saturated half-precision probabilities (1 - 1e-7 rounds to 1 in half precision) give FastEstimator's
    float32 values, not NaN / inf, and every loss is float32."""
    import torch

    half = getattr(torch, dtype)
    p32 = np.array([[1.0], [0.0], [0.999], [0.0], [1.0]], np.float32)
    y = np.array([[1], [0], [1], [1], [0]])
    p = torch.tensor(p32, dtype=half)
    expected = bce_reference(p.float().numpy(), y, log_floor=-100.0)[:, 0]  # [0, 0, ~0.001, 100, 100]
    op = CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False)
    op.build("torch")
    out = op.forward([p, torch.tensor(y)], {})
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)  # was [nan, nan, ., 16.1, inf]
    probs = torch.tensor([[0.1, 0.8, 0.1], [0.9, 0.05, 0.05]], dtype=half)
    for true in (torch.tensor([1, 0]), torch.tensor([[0, 1, 0], [1, 0, 0]])):
        out = op.forward([probs, true], {})
        assert out.dtype == torch.float32
        np.testing.assert_allclose(out.numpy(), -np.log(probs.float().numpy()[[0, 1], [1, 0]]), rtol=1e-5)
    mse = MeanSquaredError(inputs=("p", "y"), outputs="mse")
    mse.build("torch")
    assert mse.forward([torch.tensor([[300.0, 0.0]], dtype=half), torch.zeros(1, 2)], {}).dtype == torch.float32


def test_torch_binary_under_autocast_is_finite() -> None:
    """F2: a bfloat16 sigmoid output under CPU autocast (torch mixed_precision) gives a finite float32 loss and
    finite gradients."""
    import torch

    linear = torch.nn.Linear(2, 1)
    with torch.no_grad():
        linear.weight.fill_(10.0)
        linear.bias.fill_(0.0)
    x = torch.tensor([[1.0, 1.0], [-1.0, -1.0], [0.2, 0.1]])
    y = torch.tensor([[1.0], [0.0], [1.0]])
    op = CrossEntropy(inputs=("p", "y"), outputs="ce")
    op.build("torch")
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        pred = torch.sigmoid(linear(x))
        assert pred.dtype == torch.bfloat16
        loss = op.forward([pred, y], {})
    assert loss.dtype == torch.float32
    expected = bce_reference(pred.detach().float().numpy(), y.numpy(), log_floor=-100.0).mean()
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)  # was nan
    loss.backward()
    assert torch.isfinite(linear.weight.grad).all()


def test_tf_half_precision_losses_compute_in_float32() -> None:
    """F2: float16 predictions give Keras 2's float32 values (epsilon clipping in float32), not inf / NaN."""
    import keras
    import tensorflow as tf

    p = tf.constant([[1.0], [0.0], [1.0], [0.999]], tf.float16)
    y = tf.constant([[0], [1], [1], [1]])
    op = CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False)
    op.build("tf")
    out = op.forward([p, y], {})
    assert out.dtype == tf.float32
    p32 = tf.cast(p, tf.float32).numpy()
    np.testing.assert_allclose(out.numpy(), bce_reference(p32, y.numpy(), eps=1e-7, log_eps=1e-7)[:, 0], rtol=1e-4,
                               atol=1e-6)
    probs = tf.constant([[1.0, 0.0], [0.0, 1.0]], tf.float16)
    out = op.forward([probs, tf.constant([0, 0])], {})
    assert out.dtype == tf.float32
    reference = keras.losses.sparse_categorical_crossentropy(tf.constant([0, 0]), tf.cast(probs, tf.float32))
    np.testing.assert_allclose(out.numpy(), reference.numpy(), rtol=1e-5)
    mse = MeanSquaredError(inputs=("p", "y"), outputs="mse")
    mse.build("tf")
    assert mse.forward([tf.constant([[300.0, 0.0]], tf.float16), tf.zeros((1, 2))], {}).dtype == tf.float32


def test_torch_probability_formulas_match_fastestimator() -> None:
    """F4: torch's probability path uses FastEstimator's torch formulas: BCE with logs floored at -100, and
    -log of the given probability for sparse / categorical (no renormalisation; p = 0 on the true class is inf,
    while p = 0 on a class with zero target costs nothing and keeps the gradient finite)."""
    import torch

    p, y = np.array([[0.0], [1.0], [0.5]], np.float32), np.array([[1], [0], [1]])
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "torch", p, y)
    np.testing.assert_allclose(got, bce_reference(p, y, log_floor=-100.0)[:, 0], rtol=1e-6)  # was [16.1, 15.9, .69]
    probs = np.array([[0.5, 0.5, 0.5], [0.2, 0.2, 0.2]], np.float32)  # e.g. sigmoid outputs: rows do not sum to 1
    expected = [-np.log(0.5), -np.log(0.2)]  # was [1.0986, 1.0986] (renormalised)
    for true in (np.array([0, 1]), np.array([[1, 0, 0], [0, 1, 0]])):
        got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "torch", probs, true)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    zeros = np.array([[0.0, 1.0, 0.0], [0.2, 0.7, 0.1]], np.float32)
    for true in (np.array([0, 1]), np.array([[1, 0, 0], [0, 1, 0]])):
        got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "torch", zeros, true)
        assert got[0] == np.inf and got[1] == pytest.approx(-np.log(0.7), rel=1e-6)
    pred = torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.7, 0.1]], requires_grad=True)
    for true in (torch.tensor([1, 1]), torch.tensor([[0, 1, 0], [0, 1, 0]])):
        pred.grad = None
        loss = CrossEntropy(inputs=("p", "y"), outputs="ce").forward([pred, true], {})
        loss.backward()
        assert float(loss.detach()) == pytest.approx(-np.log(0.7) / 2, rel=1e-6) and torch.isfinite(pred.grad).all()
    binary = torch.tensor([[0.0], [1.0]], requires_grad=True)
    CrossEntropy(inputs=("p", "y"), outputs="ce").forward([binary, torch.tensor([[1], [0]])], {}).backward()
    assert torch.isfinite(binary.grad).all()


def test_tf_probability_formulas_match_keras() -> None:
    """F4 (TF side): TF keeps Keras' formulas: probabilities clipped to [1e-7, 1 - 1e-7] (binary: Keras 2's, with
    1e-7 inside the logs too), categorical rows renormalised."""
    p, y = np.array([[0.0], [1.0], [0.5]], np.float32), np.array([[1], [0], [1]])
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "tf", p, y)
    np.testing.assert_allclose(got, bce_reference(p, y, eps=1e-7, log_eps=1e-7)[:, 0], rtol=1e-5)
    probs = np.array([[0.5, 0.5, 0.5], [0.2, 0.2, 0.2]], np.float32)
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "tf", probs,
              np.array([[1, 0, 0], [0, 1, 0]]))
    np.testing.assert_allclose(got, [np.log(3.0), np.log(3.0)], rtol=1e-5)


def test_tf_binary_probabilities_use_keras2_formula() -> None:
    """TF binary cross entropy on raw probabilities (no sigmoid to recover logits from) is Keras 2's, as in
    FastEstimator 1.7: -log(clip(p) + 1e-7), not Keras 3's -log(clip(p)); torch keeps torch's BCE."""
    p, y = np.array([[0.0], [1.0], [1e-4]], np.float32), np.array([[1], [0], [1]])
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "tf", p, y)
    np.testing.assert_allclose(got, [15.424949, 15.333239, 9.209341], rtol=1e-6)  # FastEstimator's values
    got = run(CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False), "torch", p, y)
    np.testing.assert_allclose(got, [100.0, 100.0, -np.log(1e-4)], rtol=1e-5)  # torch's BCE, unchanged


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("shape", [(2, 3, 3, 1), (2, 1, 3, 3), (2, 4)], ids=["NHW1", "N1HW", "N4-multilabel"])
def test_binary_per_sample_losses_for_any_rank(framework: str, shape: tuple[int, ...]) -> None:
    """F5: binary with average_loss=False gives one loss per sample, (N,): the mean over the sample's elements
    (class weights apply per element first), as FastEstimator."""
    rng = np.random.default_rng(1)
    pred = rng.uniform(0.05, 0.95, shape).astype(np.float32)
    true = (rng.uniform(size=shape) > 0.5).astype(np.float32)
    elementwise = bce_reference(pred, true)
    expected = elementwise.reshape(shape[0], -1).mean(axis=1)
    op = CrossEntropy(inputs=("p", "y"), outputs="ce", average_loss=False, form="binary")
    got = run(op, framework, pred, true)
    assert got.shape == (shape[0],)  # was (2, 3, 3) / (2, 1, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    op = CrossEntropy(inputs=("p", "y"), outputs="ce", form="binary", class_weights={1: 2.0})
    weighted = (np.where(true == 1, 2.0, 1.0) * elementwise).reshape(shape[0], -1).mean(axis=1)
    assert float(run(op, framework, pred, true)) == pytest.approx(weighted.mean(), rel=1e-5)
