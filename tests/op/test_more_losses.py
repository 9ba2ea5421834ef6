"""Hinge, L1_Loss, FocalLoss, DiceLoss, L2Regularizaton and SuperLoss against hand-computed numpy values, in both
frameworks (TF also inside a tf.function), and in tiny in-process Networks that train with them."""

from __future__ import annotations

import os
from typing import Any

import cloudpickle
import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import cast, get_backend  # noqa: E402
from fe_ray.network import Network  # noqa: E402
from fe_ray.op.tensorop.loss import (  # noqa: E402
    CrossEntropy,
    DiceLoss,
    FocalLoss,
    Hinge,
    L1_Loss,
    L2Regularizaton,
    MeanSquaredError,
    SuperLoss,
)
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, weights  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
PRED = np.array([[0.5, -2.0, 1.5], [2.0, 0.3, -0.2]], np.float32)
TRUE = np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.5]], np.float32)


def run(op: Any, framework: str, *arrays: np.ndarray, state: dict[str, Any] | None = None,
        graph: bool = False) -> Any:
    """Build ``op`` and run it on ``arrays`` (as tensors of ``framework``); TF optionally inside a tf.function."""
    backend = get_backend(framework)
    op.build(framework)
    state = {"mode": "train", "warmup": False} if state is None else state
    tensors = [backend.to_tensor(np.asarray(a)) for a in arrays]
    data = tensors if op.in_list else tensors[0]
    if graph:
        import tensorflow as tf

        out = tf.function(lambda *t: op.forward(list(t) if op.in_list else t[0], state))(*tensors)
    else:
        out = op.forward(data, state)
    return [np.asarray(backend.to_numpy(o)) for o in out] if isinstance(out, list) else np.asarray(
        backend.to_numpy(out))


# ----------------------------------------------------------------------------------------------- hinge / L1 family
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hinge(framework: str) -> None:
    labels = np.array([[1, -1, 1], [-1, 1, -1]], np.float32)
    # max(1 - y * p, 0): [[0.5, 0, 0], [3, 0.7, 0.8]]
    expected = np.array([0.5 / 3, 4.5 / 3])
    np.testing.assert_allclose(run(Hinge(("p", "y"), "h", average_loss=False), framework, PRED, labels), expected,
                               rtol=1e-6)
    assert float(run(Hinge(("p", "y"), "h"), framework, PRED, labels)) == pytest.approx(expected.mean(), rel=1e-6)


def l1_family_reference(pred: np.ndarray, true: np.ndarray, loss_type: str, beta: float) -> np.ndarray:
    err = np.abs(pred.astype(np.float64) - true)
    if loss_type == "L1":
        element = err
    elif loss_type == "Smooth":
        element = np.where(err < beta, 0.5 * err ** 2 / beta, err - 0.5 * beta)
    else:
        element = np.where(err <= beta, 0.5 * err ** 2, beta * (err - 0.5 * beta))
    return element.mean(axis=-1)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("loss_type", ["L1", "Smooth", "Huber"])
@pytest.mark.parametrize("beta", [1.0, 0.4])
def test_l1_loss_types(framework: str, loss_type: str, beta: float) -> None:
    expected = l1_family_reference(PRED, TRUE, loss_type, beta)
    op = L1_Loss(("p", "y"), "l1", average_loss=False, loss_type=loss_type, beta=beta)
    np.testing.assert_allclose(run(op, framework, PRED, TRUE), expected, rtol=1e-6)
    op = L1_Loss(("p", "y"), "l1", loss_type=loss_type, beta=beta)
    assert float(run(op, framework, PRED, TRUE)) == pytest.approx(expected.mean(), rel=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_1d_predictions_follow_fastestimator(framework: str) -> None:
    """(batch,) predictions: FastEstimator averages them over the last axis into one scalar even with
    average_loss=False, except TF's L1 and Huber kinds, which keep one loss per element; SuperLoss wrapping L1_Loss
    follows (torch: a single loss, its own running threshold, so 0)."""
    pred, true = np.array([0.9, 0.2, 0.6, 0.3], np.float32), np.array([1.0, -1.0, 1.0, 1.0], np.float32)
    per_element = framework == "tf"
    hinge = run(Hinge(("p", "y"), "h", average_loss=False), framework, pred, true)
    assert hinge.shape == () and float(hinge) == pytest.approx(0.6, rel=1e-6)
    for loss_type in ("L1", "Huber", "Smooth"):
        expected = l1_family_reference(pred[:, None], true[:, None], loss_type, 0.3)
        got = run(L1_Loss(("p", "y"), "l", average_loss=False, loss_type=loss_type, beta=0.3), framework, pred,
                  true)
        keep = per_element and loss_type != "Smooth"
        np.testing.assert_allclose(got, expected if keep else expected.mean(), rtol=1e-5, err_msg=loss_type)
    super_loss = run(SuperLoss(L1_Loss(("p", "y"), "s"), average_loss=False), framework, pred, true)
    np.testing.assert_allclose(super_loss, [-0.58707, 0.52956, -0.21116, 0.09762] if per_element else 0.0,
                               atol=1e-5)  # FastEstimator's values


def test_l1_defaults_and_huber_values() -> None:
    op = L1_Loss(inputs=("p", "y"), outputs="l1")
    assert (op.loss_type, op.beta, op.average_loss, op.mode) == ("L1", 1.0, True, {"train", "eval", "test"})
    # errors 0.5 and 3 with beta 1: Huber 0.125 and 2.5, Smooth 0.125 and 2.5 (equal at beta 1); beta 2: Huber
    # 0.125 and 4, Smooth 0.0625 and 2.
    pred, true = np.array([[0.5, 3.0]], np.float32), np.zeros((1, 2), np.float32)
    assert float(run(L1_Loss(("p", "y"), "l", loss_type="Huber", beta=2.0), "torch", pred, true)) == \
        pytest.approx((0.125 + 4.0) / 2)
    assert float(run(L1_Loss(("p", "y"), "l", loss_type="Smooth", beta=2.0), "tf", pred, true)) == \
        pytest.approx((0.0625 + 2.0) / 2)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_half_precision_predictions_give_float32_losses(framework: str) -> None:
    backend = get_backend(framework)
    pred = cast(backend.to_tensor(np.array([[300.0, -0.25]], np.float32)), "float16")
    true = backend.to_tensor(np.zeros((1, 2), np.float32))
    for op in (Hinge(("p", "y"), "h"), L1_Loss(("p", "y"), "l", loss_type="Huber"), FocalLoss(("p", "y"), "f"),
               DiceLoss(("p", "y"), "d")):
        op.build(framework)
        if isinstance(op, (FocalLoss, DiceLoss)):  # probabilities / masks
            args = [cast(backend.to_tensor(np.full((1, 2, 2), 0.75, np.float32)), "float16"),
                    backend.to_tensor(np.ones((1, 2, 2), np.float32))]
        else:
            args = [pred, true]
        out = op.forward(args, {"mode": "train"})
        assert "float32" in str(out.dtype), type(op).__name__
        assert np.isfinite(np.asarray(backend.to_numpy(out))).all()


# ----------------------------------------------------------------------------------------------------- focal loss
def focal_reference(p: np.ndarray, y: np.ndarray, gamma: float, alpha: float, normalize: bool, shape: str,
                    sample: str) -> np.ndarray:
    p, y = p.astype(np.float64), y.astype(np.float64)
    ce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    p_t = np.where(y == 1, p, 1 - p)
    loss = ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = loss * np.where(y == 1, alpha, 1 - alpha)
    axes = tuple(range(1, loss.ndim))
    if normalize:
        loss = loss / np.maximum(y.sum(axis=axes, keepdims=True), 1)
    if shape != "none":
        loss = loss.sum(axis=axes) if shape == "sum" else loss.mean(axis=axes)
    if sample != "none":
        loss = loss.sum() if sample == "sum" else loss.mean()
    return loss


FOCAL_P = np.array([[0.9, 0.2, 0.6, 0.05], [0.3, 0.7, 0.1, 0.5]], np.float32)
FOCAL_Y = np.array([[1, 0, 1, 0], [0, 0, 1, 1]], np.float32)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(("gamma", "alpha", "normalize", "shape", "sample"), [
    (2.0, 0.25, True, "sum", "mean"), (0.0, -1, False, "mean", "sum"), (1.5, 0.6, True, "none", "none"),
    (2.0, 0.25, False, "sum", "none")])
def test_focal_loss(framework: str, gamma: float, alpha: float, normalize: bool, shape: str, sample: str) -> None:
    expected = focal_reference(FOCAL_P, FOCAL_Y, gamma, alpha, normalize, shape, sample)
    op = FocalLoss(("p", "y"), "f", gamma=gamma, alpha=alpha, normalize=normalize, shape_reduction=shape,
                   sample_reduction=sample)
    np.testing.assert_allclose(run(op, framework, FOCAL_P, FOCAL_Y), expected, rtol=1e-5)
    logits = np.log(FOCAL_P / (1 - FOCAL_P))
    op = FocalLoss(("p", "y"), "f", gamma=gamma, alpha=alpha, normalize=normalize, shape_reduction=shape,
                   sample_reduction=sample, from_logits=True)
    np.testing.assert_allclose(run(op, framework, logits, FOCAL_Y), expected, rtol=1e-5)


def test_focal_loss_defaults_and_per_sample_switch() -> None:
    op = FocalLoss(inputs=("p", "y"), outputs="f")
    assert (op.gamma, op.alpha, op.sample_reduction, op.shape_reduction, op.from_logits, op.normalize) == \
        (2.0, 0.25, "mean", "sum", False, True)
    op.average_loss = False  # what SuperLoss does: per-sample losses whatever sample_reduction says
    per_sample = focal_reference(FOCAL_P, FOCAL_Y, 2.0, 0.25, True, "sum", "none")
    np.testing.assert_allclose(run(op, "torch", FOCAL_P, FOCAL_Y), per_sample, rtol=1e-5)


# ------------------------------------------------------------------------------------------------------ dice loss
def dice_reference(pred: np.ndarray, true: np.ndarray, soft: bool, weights_: list[float] | None, eps: float = 1e-6,
                   sample_average: bool = True, channel_average: bool = True) -> np.ndarray:
    """Channels-last reference: one score per (sample, channel) over the spatial axes."""
    pred, true = pred.astype(np.float64), true.astype(np.float64)
    num = (pred * true).sum(axis=(1, 2))
    den = (pred ** 2).sum(axis=(1, 2)) + (true ** 2).sum(axis=(1, 2)) if soft else pred.sum(axis=(1, 2)) + true.sum(
        axis=(1, 2))
    dice = 2 * num / (den + eps)
    if weights_ is not None:
        dice = dice * np.asarray(weights_)
    if channel_average:
        dice = dice.mean(axis=-1)
    if sample_average:
        dice = dice.mean(axis=0)
    return -dice


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("soft", [False, True])
def test_dice_loss(framework: str, soft: bool) -> None:
    rng = np.random.default_rng(3)
    pred = rng.uniform(size=(2, 4, 5, 3)).astype(np.float32)  # channels last
    true = (rng.uniform(size=(2, 4, 5, 3)) > 0.5).astype(np.float32)
    to_layout = (lambda a: np.moveaxis(a, -1, 1)) if framework == "torch" else (lambda a: a)
    expected = dice_reference(pred, true, soft, None)
    got = run(DiceLoss(("p", "y"), "d", soft_dice=soft), framework, to_layout(pred), to_layout(true))
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    # Per-sample, per-channel, with channel 2 weighted 3 (channels 0 and 1 weigh 1).
    expected = dice_reference(pred, true, soft, [1.0, 1.0, 3.0], sample_average=False, channel_average=False)
    op = DiceLoss(("p", "y"), "d", soft_dice=soft, average_loss=False, channel_average=False,
                  channel_weights={2: 3.0})
    np.testing.assert_allclose(run(op, framework, to_layout(pred), to_layout(true)), expected, rtol=1e-5)
    assert expected.shape == (2, 3)


def test_dice_loss_perfect_overlap_is_minus_one() -> None:
    mask = np.zeros((1, 1, 4, 4), np.float32)
    mask[0, 0, 1:3, 1:3] = 1
    assert float(run(DiceLoss(("p", "y"), "d"), "torch", mask, mask)) == pytest.approx(-1.0, abs=1e-6)


# ---------------------------------------------------------------------------------------------- L2 regularisation
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_l2_regularization_adds_half_sum_of_squares(framework: str) -> None:
    model = linear(framework)  # weights [1, 2, 3]: sum of squares 14
    op = L2Regularizaton(inputs="ce", outputs="total", model=model, beta=0.5)
    assert not op.in_list and op.mode == set()
    assert float(run(op, framework, np.float32(1.25))) == pytest.approx(1.25 + 0.5 * 7.0, rel=1e-6)
    assert float(run(L2Regularizaton("ce", "total", model), framework, np.float32(0.0))) == pytest.approx(0.07)


# ---------------------------------------------------------------------------------------------------- super loss
def lambertw_reference(z: np.ndarray) -> np.ndarray:
    """Principal-branch Lambert W by bisection on w * exp(w) = z, w in [-1, 50] (independent of fe_ray's)."""
    lo, hi = np.full_like(z, -1.0, dtype=np.float64), np.full_like(z, 50.0, dtype=np.float64)
    for _ in range(200):
        mid = (lo + hi) / 2
        too_big = mid * np.exp(mid) > z
        hi, lo = np.where(too_big, mid, hi), np.where(too_big, lo, mid)
    return (lo + hi) / 2


def super_loss_reference(base: np.ndarray, tau: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    beta = np.maximum((base - tau) / lam, -1.9999998 / np.e)
    ln_sigma = -lambertw_reference(0.5 * beta)
    return (base - tau) * np.exp(ln_sigma) + lam * ln_sigma ** 2, np.exp(ln_sigma)


def bce(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).reshape(len(p), -1).mean(axis=1)


SL_P = np.array([[0.9], [0.4], [0.05], [0.7]], np.float32)
SL_Y = np.array([[1], [1], [1], [0]], np.float32)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_super_loss_fixed_threshold(framework: str) -> None:
    base = bce(SL_P.astype(np.float64), SL_Y)
    expected, confidence = super_loss_reference(base, 0.5, 2.0)
    op = SuperLoss(CrossEntropy(("p", "y"), "ce"), threshold=0.5, regularization=2.0, average_loss=False,
                   output_confidence="conf")
    assert op.outputs == ["ce", "conf"] and op.inputs == ["p", "y"] and op.mode == {"train", "eval", "test"}
    loss, conf = run(op, framework, SL_P, SL_Y)
    np.testing.assert_allclose(loss, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(conf, confidence, rtol=1e-4)
    assert conf[2] < 1 < conf[0]  # the badly predicted sample is trusted less, the easy one more
    assert op.state_dict() == {}


@pytest.mark.parametrize(("framework", "graph"), [("torch", False), ("tf", False), ("tf", True)],
                         ids=["torch", "tf-eager", "tf-graph"])
def test_super_loss_running_threshold_and_checkpoint(framework: str, graph: bool) -> None:
    base1 = bce(SL_P.astype(np.float64), SL_Y)
    p2 = np.array([[0.6], [0.2], [0.8], [0.1]], np.float32)
    base2 = bce(p2.astype(np.float64), SL_Y)
    op = SuperLoss(CrossEntropy(("p", "y"), "ce"), regularization=1.0)
    train, evaluate = {"mode": "train", "warmup": False}, {"mode": "eval", "warmup": False}
    # Step 1 sets tau to the batch mean; step 2 moves it 10% of the way to the new mean; eval keeps its own.
    got1 = run(op, framework, SL_P, SL_Y, state=train, graph=graph)
    assert float(got1) == pytest.approx(super_loss_reference(base1, base1.mean(), 1.0)[0].mean(), rel=1e-4)
    tau2 = base1.mean() - 0.1 * (base1.mean() - base2.mean())
    got2 = run(op, framework, p2, SL_Y, state=train, graph=graph)
    assert float(got2) == pytest.approx(super_loss_reference(base2, tau2, 1.0)[0].mean(), rel=1e-4)
    run(op, framework, p2, SL_Y, state=evaluate, graph=graph)
    saved = op.state_dict()
    assert saved["tau"]["train"] == pytest.approx(tau2, rel=1e-5)
    assert saved["tau"]["eval"] == pytest.approx(base2.mean(), rel=1e-5)
    assert saved["initialized"] == {"train": True, "eval": True, "test": False, "infer": False}
    # A fresh op restored from the checkpoint (before build), and a pickled copy (what Ray replicas get), continue
    # exactly where this one is.
    restored = SuperLoss(CrossEntropy(("p", "y"), "ce"), regularization=1.0)
    restored.load_state_dict(saved)
    copy = cloudpickle.loads(cloudpickle.dumps(op))  # as fe_ray.distributed ships ops
    expected3 = run(op, framework, SL_P, SL_Y, state=train, graph=graph)
    for other in (restored, copy):
        np.testing.assert_allclose(run(other, framework, SL_P, SL_Y, state=train, graph=graph), expected3,
                                   rtol=1e-6)
        assert other.state_dict()["tau"] == pytest.approx(op.state_dict()["tau"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_super_loss_warmup_does_not_initialize(framework: str) -> None:
    op = SuperLoss(MeanSquaredError(("p", "y"), "mse"))
    run(op, framework, np.ones((2, 1), np.float32), np.zeros((2, 1), np.float32),
        state={"mode": "train", "warmup": True})
    assert op.state_dict()["initialized"]["train"] is False
    assert op.state_dict()["tau"]["train"] == pytest.approx(1.0)


def test_super_loss_rejects_bad_state() -> None:
    op = SuperLoss(CrossEntropy(("p", "y"), "ce"))
    with pytest.raises(ValueError, match="different configuration"):
        op.load_state_dict({})
    fixed = SuperLoss(CrossEntropy(("p", "y"), "ce"), threshold=2.3)
    with pytest.raises(ValueError, match="different configuration"):
        fixed.load_state_dict(op.state_dict())


# ------------------------------------------------------------------------------------------------ invalid values
def test_invalid_arguments_name_value_and_choices() -> None:
    with pytest.raises(ValueError, match=r"'l2'.*\['L1', 'Smooth', 'Huber'\]"):
        L1_Loss(("p", "y"), "l", loss_type="l2")
    with pytest.raises(ValueError, match="beta must be a positive number, got -1"):
        L1_Loss(("p", "y"), "l", loss_type="Huber", beta=-1)
    with pytest.raises(ValueError, match="prediction_key, ground_truth_key"):
        Hinge("p", "h")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sample_reduction 'avg'.*\['none', 'mean', 'sum'\]"):
        FocalLoss(("p", "y"), "f", sample_reduction="avg")
    with pytest.raises(ValueError, match="gamma"):
        FocalLoss(("p", "y"), "f", gamma=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        FocalLoss(("p", "y"), "f", alpha=1.5)
    with pytest.raises(ValueError, match="channel_weights"):
        DiceLoss(("p", "y"), "d", channel_weights={"road": 2.0})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="names channel 5 but the prediction has 3 channels"):
        run(DiceLoss(("p", "y"), "d", channel_weights={5: 2.0}), "tf", np.ones((1, 2, 2, 3), np.float32),
            np.ones((1, 2, 2, 3), np.float32))
    with pytest.raises(TypeError, match="torch nn.Module or a Keras model"):
        L2Regularizaton("ce", "total", model="my_model")
    with pytest.raises(TypeError, match="wraps a LossOp"):
        SuperLoss(Hinge(("p", "y"), "h").__dict__)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold must be 'exp'"):
        SuperLoss(Hinge(("p", "y"), "h"), threshold="mean")
    with pytest.raises(ValueError, match="regularization must be a number > 0, got 0"):
        SuperLoss(Hinge(("p", "y"), "h"), regularization=0)


# ------------------------------------------------------------------------------------------- in-process Networks
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_network_trains_with_huber_loss(framework: str) -> None:
    """One SGD step through a Network (TF: a traced tf.function) with L1_Loss('Huber') and UpdateOp: the weights
    move by lr times the Huber gradient clip(e, -beta, beta) * x averaged over the batch."""
    model = linear(framework, lr=0.1)
    network = Network([ModelOp(model=model, inputs="x", outputs="pred"),
                       L1_Loss(inputs=("pred", "y"), outputs="huber", loss_type="Huber", beta=1.0),
                       UpdateOp(model=model, loss_name="huber")])
    x = np.array([[1.0, 0.0, 0.0], [0.0, 0.1, 0.0]], np.float32)
    y = np.array([[0.0], [0.0]], np.float32)
    with network(mode="train", epoch=1):
        out = network.run_step({"x": x, "y": y})
    w0 = np.array([1.0, 2.0, 3.0])
    err = x @ w0 - y[:, 0]  # [1, 0.2]
    assert float(get_backend(framework).to_numpy(out["huber"])) == pytest.approx(np.mean(0.5 * err ** 2), rel=1e-5)
    grad = (np.clip(err, -1, 1)[:, None] * x).mean(axis=0)
    np.testing.assert_allclose(weights(model), w0 - 0.1 * grad, rtol=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_network_trains_with_super_loss_and_checkpoints_it(framework: str) -> None:
    model = linear(framework, lr=0.05)
    super_loss = SuperLoss(MeanSquaredError(inputs=("pred", "y"), outputs="mse"), output_confidence="conf")
    network = Network([ModelOp(model=model, inputs="x", outputs="pred"), super_loss,
                       UpdateOp(model=model, loss_name="mse")])
    x = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], np.float32)
    y = np.array([[1.5], [0.0]], np.float32)
    base = (x @ np.array([1.0, 2.0, 3.0]) - y[:, 0]) ** 2  # [0.25, 9]
    with network(mode="train", epoch=1):
        out = network.run_step({"x": x, "y": y})
        network.run_step({"x": x, "y": y})
    conf = np.asarray(get_backend(framework).to_numpy(out["conf"]))
    np.testing.assert_allclose(conf, super_loss_reference(base, base.mean(), 1.0)[1], rtol=1e-4)
    assert not np.allclose(weights(model), [1.0, 2.0, 3.0])
    state = network.state_dict()
    entry = state["ops"][1]
    assert entry["type"] == "SuperLoss" and entry["state"]["initialized"]["train"] is True
    assert 0 < entry["state"]["tau"]["train"] < base.mean()  # moved towards the second step's smaller loss
    network.load_state_dict(state)


def test_torch_and_tf_agree_on_random_data() -> None:
    """Every new loss gives the same values in both frameworks (torch channels-first, TF channels-last)."""
    rng = np.random.default_rng(12)
    probs = rng.uniform(0.02, 0.98, size=(3, 4, 5, 2)).astype(np.float32)  # channels last
    labels = (rng.uniform(size=(3, 4, 5, 2)) > 0.6).astype(np.float32)
    scores, targets = rng.normal(size=(3, 6)).astype(np.float32), rng.normal(size=(3, 6)).astype(np.float32)
    cases = [(lambda: Hinge(("p", "y"), "l", average_loss=False), scores, np.sign(targets), False),
             (lambda: L1_Loss(("p", "y"), "l", loss_type="Smooth", beta=0.3), scores, targets, False),
             (lambda: FocalLoss(("p", "y"), "l", sample_reduction="none"), probs, labels, False),
             (lambda: DiceLoss(("p", "y"), "l", soft_dice=True, average_loss=False), probs, labels, True),
             (lambda: SuperLoss(L1_Loss(("p", "y"), "l", loss_type="Huber"), threshold=0.4, average_loss=False),
              scores, targets, False)]
    for make, pred, true, channels in cases:
        as_torch = (lambda a: np.moveaxis(a, -1, 1)) if channels else (lambda a: a)
        got_torch = run(make(), "torch", as_torch(pred), as_torch(true))
        got_tf = run(make(), "tf", pred, true, graph=True)
        assert got_torch.shape == got_tf.shape
        np.testing.assert_allclose(got_torch, got_tf, rtol=2e-5, atol=1e-6)
