"""FastEstimator's loss helpers (huber, smooth_l1_loss, l1_loss, hinge, focal_loss, dice_score, l2_regularization).

Every expected value comes from a numpy formula written out here (or FastEstimator's documented examples, which
these formulas reproduce); torch and TF must agree with it and with each other.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import fe_ray as fe  # noqa: E402
from tests.backend.tensor_helpers import make, to_numpy  # noqa: E402

LOSS_FRAMEWORKS = ["torch", "tf"]
ONE_HOT = [[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0]]
SCORES = [[0.1, 0.9, 0.05, 0.05], [0.1, 0.2, 0.0, 0.7], [0.0, 0.15, 0.8, 0.05], [1.0, 0.0, 0.0, 0.0]]


# ------------------------------------------------------------------------------------------- numpy references
def np_huber(y_true: np.ndarray, y_pred: np.ndarray, beta: float) -> np.ndarray:
    error = np.abs(y_pred - y_true)
    return np.where(error <= beta, 0.5 * error ** 2, beta * (error - 0.5 * beta))


def np_smooth_l1(y_true: np.ndarray, y_pred: np.ndarray, beta: float) -> np.ndarray:
    error = np.abs(y_pred - y_true)
    return np.where(error < beta, 0.5 * error ** 2 / beta, error - 0.5 * beta)


def np_focal(y_true: np.ndarray, prob: np.ndarray, gamma: float, alpha: float) -> np.ndarray:
    ce = -(y_true * np.log(prob) + (1 - y_true) * np.log(1 - prob))
    p_t = y_true * prob + (1 - y_true) * (1 - prob)
    weight = y_true * alpha + (1 - y_true) * (1 - alpha) if alpha >= 0 else 1.0
    return weight * (1 - p_t) ** gamma * ce


# ---------------------------------------------------------------------------------------- regression losses
@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_huber_matches_reference_and_fe_examples(framework: str) -> None:
    true, pred = np.array(ONE_HOT, dtype=np.float64), np.array(SCORES, dtype=np.float64)
    out = to_numpy(fe.backend.huber(make(framework, ONE_HOT), make(framework, SCORES, "float32"), beta=0.65), framework)
    assert out.dtype == np.float32 and out.shape == (4,)
    np.testing.assert_allclose(out, np_huber(true, pred, 0.65).mean(axis=-1), rtol=1e-5)
    np.testing.assert_allclose(out, [0.003125, 0.0175, 0.008125, 0.0], atol=1e-6)  # FE's example
    big = fe.backend.huber(make(framework, [[1], [3], [2], [0]]), make(framework, [[2.0], [0.0], [2.0], [1.0]]),
                           beta=0.65)
    np.testing.assert_allclose(to_numpy(big, framework), [0.43875, 1.73875, 0.0, 0.43875], rtol=1e-5)
    default = fe.backend.huber(make(framework, [[0.0, 0.0]]), make(framework, [[0.5, 3.0]], "float32"))
    np.testing.assert_allclose(to_numpy(default, framework), [(0.125 + 2.5) / 2], rtol=1e-6)  # beta defaults to 1


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_smooth_l1_and_l1_losses(framework: str) -> None:
    true, pred = np.array(ONE_HOT, dtype=np.float64), np.array(SCORES, dtype=np.float64)
    smooth = to_numpy(fe.backend.smooth_l1_loss(make(framework, ONE_HOT), make(framework, SCORES, "float32"),
                                              beta=0.65), framework)
    np.testing.assert_allclose(smooth, np_smooth_l1(true, pred, 0.65).mean(axis=-1), rtol=1e-5)
    big = fe.backend.smooth_l1_loss(make(framework, [[1], [3], [2], [0]]), make(framework, [[2.0], [0.0], [2.0],
                                                                                             [1.0]]), beta=0.65)
    np.testing.assert_allclose(to_numpy(big, framework), [0.675, 2.675, 0.0, 0.675], rtol=1e-5)  # FE's example
    l1 = to_numpy(fe.backend.l1_loss(make(framework, ONE_HOT), make(framework, SCORES, "float32")), framework)
    np.testing.assert_allclose(l1, [0.075, 0.15, 0.1, 0.0], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_hinge(framework: str) -> None:
    true = [[-1, 1, 1, -1], [1, 1, 1, 1], [-1, -1, 1, -1], [1, -1, -1, -1]]
    pred = [[0.1, 0.9, 0.05, 0.05], [0.1, -0.2, 0.0, -0.7], [0.0, 0.15, 0.8, 0.05], [1.0, -1.0, -1.0, -1.0]]
    out = to_numpy(fe.backend.hinge(make(framework, true), make(framework, pred, "float32")), framework)
    expected = np.maximum(1 - np.array(true) * np.array(pred), 0).mean(axis=-1)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(out, [0.8, 1.2, 0.85, 0.0], rtol=1e-6)  # FE's example


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_regression_losses_shapes_and_dtypes(framework: str) -> None:
    rng = np.random.default_rng(0)
    true, pred = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    out = to_numpy(fe.backend.huber(make(framework, true), make(framework, pred)), framework)  # float64 stays
    assert out.shape == (2, 3) and out.dtype == np.float64
    np.testing.assert_allclose(out, np_huber(true, pred, 1.0).mean(axis=-1), rtol=1e-12)
    flat = to_numpy(fe.backend.l1_loss(make(framework, [1, 2, 3]), make(framework, [1.5, 2.0, 0.0], "float16")),
                  framework)  # half precision computes (and returns) float32
    assert flat.dtype == np.float32
    # 1-d: torch averages into a scalar, TF's l1 keeps one loss per element (both as FastEstimator)
    np.testing.assert_allclose(flat, 3.5 / 3 if framework == "torch" else [0.5, 0.0, 3.0], rtol=1e-6)
    column = fe.backend.hinge(make(framework, [1, -1, 1]), make(framework, [[0.5], [0.5], [2.0]], "float32"))
    np.testing.assert_allclose(to_numpy(column, framework), [0.5, 1.5, 0.0])  # (N,) labels for (N, 1) scores


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_regression_losses_on_1d_input_follow_fastestimator(framework: str) -> None:
    """FastEstimator averages 1-d (batch,) input over its last axis, into a scalar: always with torch, and with
    TF's hinge and smooth L1; TF's l1 and huber add a last axis first and so keep one loss per element."""
    true, pred = [1.0, -1.0, 1.0, 1.0], [0.9, 0.2, 0.6, 0.3]
    error = np.abs(np.array(pred) - np.array(true))
    hinge = np.maximum(1 - np.array(true) * np.array(pred), 0)
    y_true, y_pred = make(framework, true), make(framework, pred, "float32")
    per_element = framework == "tf"
    expected = {"hinge": (fe.backend.hinge(y_true, y_pred), hinge, False),
                "l1": (fe.backend.l1_loss(y_true, y_pred), error, per_element),
                "huber": (fe.backend.huber(y_true, y_pred, beta=0.3), np_huber(np.array(true), np.array(pred), 0.3),
                          per_element),
                "smooth_l1": (fe.backend.smooth_l1_loss(y_true, y_pred, beta=0.3),
                              np_smooth_l1(np.array(true), np.array(pred), 0.3), False)}
    for name, (out, element, keep) in expected.items():
        out = to_numpy(out, framework)
        assert out.shape == ((4,) if keep else ()), name
        np.testing.assert_allclose(out, element if keep else element.mean(), rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(to_numpy(fe.backend.hinge(y_true, y_pred), framework), 0.6, rtol=1e-6)  # FE's value


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_regression_losses_reject_bad_arguments(framework: str) -> None:
    pred = make(framework, [[0.5, 0.5]], "float32")
    for func in (fe.backend.huber, fe.backend.smooth_l1_loss):
        with pytest.raises(ValueError, match=r"beta must be a positive number, got 0"):
            func(make(framework, [[0, 1]]), pred, beta=0)
    with pytest.raises(ValueError, match=r"one target per prediction.*reshape y_true to \(1, 2\)"):
        fe.backend.l1_loss(make(framework, [[0, 1, 1]]), pred)
    with pytest.raises(TypeError, match=r"huber needs y_pred as a torch or TensorFlow tensor, got ndarray"):
        fe.backend.huber(np.zeros(2), np.zeros(2))


# ------------------------------------------------------------------------------------------------ focal loss
FOCAL_TRUE = [[1], [1], [1], [0], [0], [0]]
FOCAL_PRED = [[0.97], [0.91], [0.73], [0.27], [0.09], [0.03]]


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_focal_loss_fe_examples(framework: str) -> None:
    true, pred = make(framework, FOCAL_TRUE), make(framework, FOCAL_PRED, "float32")
    reference = np_focal(np.array(FOCAL_TRUE, float), np.array(FOCAL_PRED, float), 2.0, 0.25).mean()
    out = to_numpy(fe.backend.focal_loss(true, pred), framework)
    assert out.shape == () and out.dtype == np.float32
    np.testing.assert_allclose(out, reference, rtol=1e-5)
    np.testing.assert_allclose(out, 0.003956, rtol=1e-3)  # FE's example
    plain = fe.backend.focal_loss(true, pred, gamma=0.0, alpha=-1)  # no focusing, no weighting: plain BCE
    np.testing.assert_allclose(to_numpy(plain, framework), 0.14649, rtol=1e-4)


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_focal_loss_reductions_and_normalization(framework: str) -> None:
    rng = np.random.default_rng(1)
    true = (rng.random((3, 4, 2)) > 0.6).astype(np.float32)
    true[2] = 0  # a sample without positives: normalised by 1, not 0
    logits = rng.normal(size=(3, 4, 2)).astype(np.float32)
    element = np_focal(true, 1 / (1 + np.exp(-logits.astype(np.float64))), 1.5, 0.4)
    positives = np.maximum(true.sum(axis=(1, 2)), 1)[:, None, None]
    y_true, y_pred = make(framework, true), make(framework, logits)

    def run(**kwargs: Any) -> np.ndarray:
        return to_numpy(fe.backend.focal_loss(y_true, y_pred, gamma=1.5, alpha=0.4, from_logits=True, **kwargs),
                      framework)

    np.testing.assert_allclose(run(), (element / positives).sum(axis=(1, 2)).mean(), rtol=1e-5)
    np.testing.assert_allclose(run(normalize=False, shape_reduction="mean", sample_reduction="none"),
                               element.mean(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(run(shape_reduction="none", sample_reduction="none"), element / positives, rtol=1e-5)
    np.testing.assert_allclose(run(normalize=False, sample_reduction="sum"), element.sum(), rtol=1e-5)
    probs = fe.backend.focal_loss(y_true, make(framework, 1 / (1 + np.exp(-logits))), gamma=1.5, alpha=0.4)
    np.testing.assert_allclose(to_numpy(probs, framework), run(), rtol=1e-4)  # probabilities agree with logits


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
def test_focal_loss_label_smoothing(framework: str) -> None:
    rng = np.random.default_rng(2)
    true = (rng.random((3, 5)) > 0.5).astype(np.float32)
    logits = rng.normal(size=(3, 5)).astype(np.float32)
    prob = 1 / (1 + np.exp(-logits.astype(np.float64)))
    smooth = true * (1 - 0.2) + 0.5 * 0.2  # labels squeezed towards 0.5: 1 -> 0.9, 0 -> 0.1
    element = np_focal(smooth, prob, 2.0, 0.25)
    positives = np.maximum(true.sum(axis=1), 1)[:, None]  # normalised by the unsmoothed positives
    y_true, y_pred = make(framework, true), make(framework, logits)
    out = fe.backend.focal_loss(y_true, y_pred, 2.0, 0.25, True, True, "sum", "none", 0.2)  # FastEstimator's order
    np.testing.assert_allclose(to_numpy(out, framework), (element / positives).sum(axis=1), rtol=1e-5)
    probs = fe.backend.focal_loss(y_true, make(framework, prob.astype(np.float32)), label_smoothing=0.2)
    np.testing.assert_allclose(to_numpy(probs, framework), (element / positives).sum(axis=1).mean(), rtol=1e-4)
    unsmoothed = fe.backend.focal_loss(y_true, y_pred, from_logits=True, label_smoothing=0.0)
    np.testing.assert_allclose(to_numpy(unsmoothed, framework), to_numpy(
        fe.backend.focal_loss(y_true, y_pred, from_logits=True), framework))
    assert not np.allclose(to_numpy(unsmoothed, framework), to_numpy(out, framework).mean())
    with pytest.raises(ValueError, match=r"label_smoothing must lie in \[0, 1\], got 1.5"):
        fe.backend.focal_loss(y_true, y_pred, label_smoothing=1.5)


def test_focal_loss_on_1d_torch_input_normalises_over_the_batch() -> None:
    """FastEstimator's torch path treats 1-d (batch,) input as one sample: the losses are divided by the batch's
    number of positives and shape_reduction 'sum' adds them up; its TF path keeps them element-wise."""
    true, pred = np.array([1.0, 0.0, 1.0, 0.0]), np.array([0.9, 0.2, 0.6, 0.3])
    element = np_focal(true, pred, 2.0, 0.25)

    def run(framework: str, **kwargs: Any) -> np.ndarray:
        return to_numpy(fe.backend.focal_loss(make(framework, true, "float32"), make(framework, pred, "float32"),
                                              **kwargs), framework)

    np.testing.assert_allclose(run("torch"), element.sum() / 2, rtol=1e-5)
    np.testing.assert_allclose(run("torch"), 0.02573, rtol=1e-3)  # FastEstimator's value (was 0.01287)
    np.testing.assert_allclose(run("torch", normalize=False, sample_reduction="none"), element.sum(), rtol=1e-5)
    np.testing.assert_allclose(run("torch", shape_reduction="mean", sample_reduction="none"), element / 2,
                               rtol=1e-5)
    np.testing.assert_allclose(run("tf"), element.mean(), rtol=1e-5)  # TF: unchanged
    np.testing.assert_allclose(run("tf", sample_reduction="none"), element, rtol=1e-5)


def test_tf_focal_loss_saturated_probabilities_match_keras2_and_stay_finite() -> None:
    """TF focal loss on probabilities of exactly 0 or 1 uses Keras 2's clipped cross entropy (FastEstimator's
    values) with finite gradients, and the logits behind a Keras sigmoid when there are any: one SGD step on a
    saturated model leaves finite weights (the unclipped log gave NaN gradients)."""
    prob = tf.Variable([[0.0], [1.0], [1e-4]])
    with tf.GradientTape() as tape:
        loss = fe.backend.focal_loss(tf.constant([[1.0], [0.0], [1.0]]), prob, sample_reduction="none")
    np.testing.assert_allclose(loss.numpy(), [3.8562372, 11.499929, 2.3018746], rtol=1e-6)  # FastEstimator's
    assert np.isfinite(tape.gradient(loss, prob).numpy()).all()

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid")])
    model.set_weights([np.full((2, 1), 10.0, np.float32), np.zeros(1, np.float32)])
    x, y = tf.constant([[1.0, 1.0], [0.1, -0.1]]), tf.constant([[1.0], [0.0]])
    with tf.GradientTape() as tape:
        loss = fe.backend.focal_loss(y, model(x))
    keras.optimizers.SGD(0.1).apply_gradients(zip(tape.gradient(loss, model.trainable_weights),
                                                  model.trainable_weights))
    weights = np.concatenate([w.ravel() for w in model.get_weights()])
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights, [9.99888134, 10.00111866, -0.01118576], rtol=1e-5)  # FastEstimator's step


def test_tf_cross_entropy_from_logits_on_a_keras_activation_uses_the_logits_behind_it() -> None:
    """Keras 2 (FastEstimator 1.7's) computes a cross entropy asked for ``from_logits=True`` on a sigmoid / softmax
    output from the logits behind the activation, with a warning; applying the activation again (Keras 3) gave
    FastEstimator's ALOCC a different loss from the first step."""
    x = tf.constant([[1.0, 2.0], [0.3, -0.4]])
    binary = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid")])
    binary.set_weights([np.array([[0.5], [-1.0]], np.float32), np.array([0.2], np.float32)])
    logits = x.numpy() @ np.array([[0.5], [-1.0]]) + 0.2
    y = np.array([[1.0], [0.0]])
    expected = np.mean(y * np.log1p(np.exp(-logits)) + (1 - y) * np.log1p(np.exp(logits)))
    with pytest.warns(UserWarning, match="from_logits=True, but the prediction is the output of a Keras"):
        loss = fe.backend.binary_crossentropy(y_pred=binary(x), y_true=tf.constant(y, tf.float32), from_logits=True)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
    softmax = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="softmax")])
    labels = tf.constant([0, 2])
    with pytest.warns(UserWarning, match="sparse cross entropy got from_logits=True"):
        twice = fe.backend.sparse_categorical_crossentropy(y_pred=softmax(x), y_true=labels, from_logits=True)
    np.testing.assert_allclose(float(twice), float(fe.backend.sparse_categorical_crossentropy(
        y_pred=softmax(x), y_true=labels)), rtol=1e-6)


@pytest.mark.parametrize("framework", LOSS_FRAMEWORKS)
@pytest.mark.parametrize("kwargs, message", [
    ({"gamma": -1.0}, r"gamma must be a number >= 0, got -1\.0"), ({"gamma": None}, r"gamma .* got None"),
    ({"alpha": 1.5}, r"alpha must lie in \[0, 1\] or be -1"),
    ({"shape_reduction": "avg"}, r"unknown shape_reduction 'avg'; valid choices are \['none', 'mean', 'sum'\]"),
    ({"sample_reduction": "max"}, r"unknown sample_reduction 'max'; valid choices")])
def test_focal_loss_rejects_bad_arguments(framework: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fe.backend.focal_loss(make(framework, FOCAL_TRUE), make(framework, FOCAL_PRED, "float32"), **kwargs)


# ------------------------------------------------------------------------------------------------ dice score
DICE_TRUE = np.array([[[[0, 1, 1], [1, 0, 1], [1, 0, 1]], [[0, 1, 1], [1, 0, 1], [1, 0, 1]],
                       [[0, 1, 1], [1, 0, 1], [1, 0, 1]]]])
DICE_PRED = np.array([[[[0, 1, 0], [1, 0, 0], [1, 0, 1]], [[0, 1, 1], [1, 0, 1], [0, 0, 0]],
                       [[0, 0, 1], [1, 0, 1], [1, 0, 1]]]])


def np_dice(pred: np.ndarray, true: np.ndarray, axes: tuple[int, ...], soft: bool = False) -> np.ndarray:
    denominator = (pred ** 2).sum(axes) + (true ** 2).sum(axes) if soft else pred.sum(axes) + true.sum(axes)
    return 2 * (pred * true).sum(axes) / (denominator + 1e-6)


@pytest.mark.parametrize("framework", ["torch", "tf", "np"])
def test_dice_score_fe_examples(framework: str) -> None:
    pred, true = make(framework, DICE_PRED), make(framework, DICE_TRUE)
    # Channels: axis 1 for torch, the last axis for TF / numpy, so the same array gives permuted scores.
    expected = [0.8, 0.8, 10 / 11] if framework == "torch" else [10 / 11, 0.8, 0.8]
    out = to_numpy(fe.backend.dice_score(pred, true), framework)
    assert out.shape == (1, 3) and out.dtype == np.float32  # integer input: float32
    np.testing.assert_allclose(out, [expected], rtol=1e-5)
    np.testing.assert_allclose(to_numpy(fe.backend.dice_score(pred, true, soft_dice=True), framework), [expected],
                               rtol=1e-5)  # 0/1 masks: squares change nothing
    np.testing.assert_allclose(to_numpy(fe.backend.dice_score(pred, true, channel_average=True), framework),
                               [0.836363], rtol=1e-5)
    np.testing.assert_allclose(to_numpy(fe.backend.dice_score(pred, true, sample_average=True), framework), expected,
                               rtol=1e-5)
    both = fe.backend.dice_score(pred, true, sample_average=True, channel_average=True)
    np.testing.assert_allclose(to_numpy(both, framework), 0.836363, rtol=1e-5)


@pytest.mark.parametrize("framework", ["torch", "tf", "np"])
def test_dice_score_options_match_reference(framework: str) -> None:
    rng = np.random.default_rng(2)
    pred = rng.random((2, 4, 5, 3)).astype(np.float32)  # channels last: (N, H, W, C)
    true = (rng.random((2, 4, 5, 3)) > 0.5).astype(np.float32)
    true[1, ..., 2] = 0
    if framework == "torch":  # the same data channels first
        pred_in, true_in = pred.transpose(0, 3, 1, 2), true.transpose(0, 3, 1, 2)
    else:
        pred_in, true_in = pred, true
    axes = (1, 2)

    def run(**kwargs: Any) -> np.ndarray:
        return to_numpy(fe.backend.dice_score(make(framework, pred_in), make(framework, true_in), **kwargs), framework)

    np.testing.assert_allclose(run(), np_dice(pred, true, axes), rtol=1e-5)
    np.testing.assert_allclose(run(soft_dice=True), np_dice(pred, true, axes, soft=True), rtol=1e-5)
    np.testing.assert_allclose(run(threshold=0.5), np_dice((pred > 0.5).astype(np.float32), true, axes), rtol=1e-5)
    winners = np.where(pred >= pred.max(axis=-1, keepdims=True), pred, 0)
    np.testing.assert_allclose(run(mask_overlap=False), np_dice(winners, true, axes), rtol=1e-5)
    weights = [0.5, 1.0, 2.0]
    np.testing.assert_allclose(run(channel_weights=weights), np_dice(pred, true, axes) * weights, rtol=1e-5)
    np.testing.assert_allclose(run(channel_weights=make(framework, weights, "float32"), channel_average=True),
                               (np_dice(pred, true, axes) * weights).mean(axis=-1), rtol=1e-5)
    empty_pred = pred.copy()
    empty_pred[1, ..., 2] = 0  # target and prediction both empty there
    empty_in = empty_pred.transpose(0, 3, 1, 2) if framework == "torch" else empty_pred
    scores = to_numpy(fe.backend.dice_score(make(framework, empty_in), make(framework, true_in), empty_nan=True),
                    framework)
    assert math.isnan(scores[1, 2]) and not np.isnan(np.delete(scores.ravel(), 5)).any()
    zero = to_numpy(fe.backend.dice_score(make(framework, empty_in), make(framework, true_in)), framework)
    assert zero[1, 2] == 0.0


@pytest.mark.parametrize("framework", ["torch", "tf", "np"])
def test_dice_score_on_2d_input_scores_each_element(framework: str) -> None:
    """(batch, C) input has no spatial axes: each element is scored on its own, as FastEstimator does for TF."""
    pred = np.array([[0.9, 0.2, 0.7], [0.1, 0.8, 0.4]], np.float32)
    true = np.array([[1, 0, 1], [0, 1, 1]], np.float32)
    out = to_numpy(fe.backend.dice_score(make(framework, pred), make(framework, true)), framework)
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, 2 * pred * true / (pred + true + 1e-6), rtol=1e-5)
    soft = fe.backend.dice_score(make(framework, pred), make(framework, true), soft_dice=True, empty_nan=True)
    np.testing.assert_allclose(to_numpy(soft, framework), 2 * pred * true / (pred ** 2 + true ** 2 + 1e-6),
                               rtol=1e-5)
    mean = fe.backend.dice_score(make(framework, pred), make(framework, true), sample_average=True,
                                 channel_average=True)
    np.testing.assert_allclose(to_numpy(mean, framework), 0.5385356, rtol=1e-5)  # FastEstimator's (TF) value


def test_dice_score_rejects_flat_input_and_unsupported_types() -> None:
    with pytest.raises(ValueError, match=r"y_pred of shape \[4\] needs at least 2 axes"):
        fe.backend.dice_score(np.ones(4), np.ones(4))
    with pytest.raises(TypeError, match=r"dice_score: y_pred has unsupported type builtins\.list"):
        fe.backend.dice_score([[[1.0]]], np.ones((1, 1, 1)))


# ------------------------------------------------------------------------------------------ l2 regularization
def test_l2_regularization_torch_and_keras() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model[1].bias.requires_grad_(False)  # frozen weights are left out
    expected = sum(float((p.detach() ** 2).sum()) for p in model.parameters() if p.requires_grad) / 2
    penalty = fe.backend.l2_regularization(model)
    assert isinstance(penalty, torch.Tensor) and penalty.shape == ()
    np.testing.assert_allclose(float(penalty.detach()), 0.01 * expected, rtol=1e-6)
    np.testing.assert_allclose(float(fe.backend.l2_regularization(model, beta=0.5).detach()), 0.5 * expected,
                               rtol=1e-6)
    penalty.backward()  # it is a loss term: gradients reach the weights (d/dw of 0.01 * w**2 / 2 = 0.01 * w)
    np.testing.assert_allclose(model[0].weight.grad.numpy(), 0.01 * model[0].weight.detach().numpy(), rtol=1e-6)

    keras.utils.set_random_seed(0)
    kmodel = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    expected = sum(float(np.sum(np.square(w.numpy()))) for w in kmodel.trainable_weights) / 2
    out = fe.backend.l2_regularization(kmodel, beta=0.1)
    assert tf.is_tensor(out) and out.dtype == tf.float32
    np.testing.assert_allclose(float(out), 0.1 * expected, rtol=1e-6)


def test_l2_regularization_rejects_non_models() -> None:
    for bad in (torch.ones(3), np.ones(3), [torch.nn.Linear(1, 1)]):
        with pytest.raises(TypeError, match=r"l2_regularization needs a torch nn\.Module or a Keras model"):
            fe.backend.l2_regularization(bad)


# ------------------------------------------------------------------------------ gradients and traced graphs
def test_torch_losses_give_gradients() -> None:
    pred = torch.tensor([[0.2, 0.8], [0.6, 0.4]], requires_grad=True)
    true = torch.tensor([[0, 1], [1, 0]])
    loss = fe.backend.huber(true, pred).mean() + fe.backend.focal_loss(true, pred) - \
        fe.backend.dice_score(pred[:, :, None], true[:, :, None]).mean()
    loss.backward()
    assert pred.grad is not None and torch.isfinite(pred.grad).all() and pred.grad.abs().sum() > 0


def test_tf_losses_trace_with_unknown_batch() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None, 2], tf.int32)])
    def step(pred: tf.Tensor, true: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return fe.backend.smooth_l1_loss(true, pred), fe.backend.focal_loss(true, pred, from_logits=True)

    pred, true = np.array([[0.5, -2.0], [3.0, 0.0]], np.float32), np.array([[1, 0], [0, 1]])
    smooth, focal = step(tf.constant(pred), tf.constant(true, tf.int32))
    np.testing.assert_allclose(smooth.numpy(), np_smooth_l1(true, pred, 1.0).mean(axis=-1), rtol=1e-6)
    expected = (np_focal(true, 1 / (1 + np.exp(-pred.astype(float))), 2.0, 0.25).sum(axis=1)).mean()
    np.testing.assert_allclose(focal.numpy(), expected, rtol=1e-5)
