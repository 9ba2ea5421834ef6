"""FastEstimator 1.7's Argmax, Permute, Reshape, Normalize and FGSM TensorOps, run through in-process torch and TF
Networks (TF traced as a tf.function, and eagerly) and checked against numpy computations."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.network import TFNetwork, TorchNetwork  # noqa: E402
from fe_ray.op.tensorop import Argmax, Average, Normalize, Permute, Reshape  # noqa: E402
from fe_ray.op.tensorop.gradient import FGSM, Watch  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, weights  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
W0 = np.array([1.0, 2.0, 3.0])


def network_of(framework: str, ops: list[Any]) -> Any:
    return TorchNetwork(ops) if framework == "torch" else TFNetwork(ops)


def step(network: Any, batch: dict[str, Any], mode: str = "train", eager: bool = False) -> dict[str, Any]:
    with network(mode=mode, epoch=1, eager=eager):
        return network.run_step(batch)


def numpy_of(value: Any) -> np.ndarray:
    return np.asarray(get_backend(value).to_numpy(value))


def test_fe_module_paths() -> None:
    tensorop = fe.op.tensorop
    assert (tensorop.Argmax, tensorop.Permute, tensorop.Reshape, tensorop.Normalize) == (
        Argmax, Permute, Reshape, Normalize)
    assert tensorop.argmax.Argmax is Argmax and tensorop.permute.Permute is Permute
    assert tensorop.reshape.Reshape is Reshape and tensorop.normalize.Normalize is Normalize
    assert tensorop.gradient.FGSM is FGSM and tensorop.gradient.fgsm.FGSM is FGSM


def test_defaults_follow_fastestimator() -> None:
    assert Argmax(inputs="x", outputs="y").axis == 0 and Argmax(inputs="x", outputs="y").mode == set()
    assert Permute(inputs="x", outputs="y").permutation == [0, 3, 1, 2]
    assert Reshape(inputs="x", outputs="y", shape=(-1,)).mode == {"train", "eval", "test"}  # '!infer'
    norm = Normalize(inputs="x", outputs="y")
    assert (norm.mean, norm.std, norm.max_pixel_value) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 255.0)
    fgsm = FGSM(data="x", loss="l", outputs="a")
    assert (fgsm.epsilon, fgsm.clip_low, fgsm.clip_high, fgsm.mode) == (0.01, None, None, set())


# ----------------------------------------------------------------------------------- Argmax / Permute / Reshape
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_layout_ops_match_numpy(framework: str) -> None:
    rng = np.random.default_rng(1)
    scores = rng.random((2, 5), dtype=np.float32)
    images = rng.random((2, 3, 4, 5), dtype=np.float32)
    ops = [Argmax(inputs=["s", "img"], outputs=["class", "first"], axis=-1),
           Argmax(inputs="s", outputs="best_sample"),
           Permute(inputs=["img", "s4"], outputs=["perm", "perm_s"], permutation=(0, 2, 3, 1)),
           Permute(inputs="img", outputs="nchw"),
           Reshape(inputs="img", outputs="flat", shape=(-1, 60)),
           Reshape(inputs=["s", "img"], outputs=["s_flat", "img_flat"], shape=-1)]
    out = step(network_of(framework, ops), {"s": scores, "img": images, "s4": images + 1})
    np.testing.assert_array_equal(numpy_of(out["class"]), scores.argmax(axis=-1))
    np.testing.assert_array_equal(numpy_of(out["first"]), images.argmax(axis=-1))
    np.testing.assert_array_equal(numpy_of(out["best_sample"]), scores.argmax(axis=0))
    np.testing.assert_array_equal(numpy_of(out["perm"]), images.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(numpy_of(out["perm_s"]), images.transpose(0, 2, 3, 1) + 1)
    np.testing.assert_array_equal(numpy_of(out["nchw"]), images.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(numpy_of(out["flat"]), images.reshape(-1, 60))
    np.testing.assert_array_equal(numpy_of(out["s_flat"]), scores.reshape(-1))
    np.testing.assert_array_equal(numpy_of(out["img_flat"]), images.reshape(-1))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_normalize_per_channel_in_each_layout(framework: str) -> None:
    """(x - mean * 255) / (std * 255 + 1e-7) with the statistics along torch's axis 1 / TF's last axis."""
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, size=(2, 4, 4, 3)).astype(np.float32)  # channels last
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    expected = (pixels - mean * 255) / (std * 255 + 1e-7)
    data = np.moveaxis(pixels, -1, 1) if framework == "torch" else pixels
    ops = [Normalize(inputs=["x", "x2"], outputs=["n", "n2"]),
           Normalize(inputs="x", outputs="scalar", mean=0.5, std=0.25, max_pixel_value=1.0)]
    out = step(network_of(framework, ops), {"x": data, "x2": data * 0})
    normalized = numpy_of(out["n"])
    assert normalized.dtype == np.float32
    if framework == "torch":
        normalized = np.moveaxis(normalized, 1, -1)
    np.testing.assert_allclose(normalized, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(numpy_of(out["n2"]).mean(), (-mean / std).mean(), rtol=1e-5)
    np.testing.assert_allclose(numpy_of(out["scalar"]), (data - 0.5) / (0.25 + 1e-7), rtol=1e-5)


def test_layout_op_argument_errors() -> None:
    with pytest.raises(ValueError, match="one output per input"):
        Argmax(inputs=["a", "b"], outputs="c")
    with pytest.raises(TypeError, match="axis must be an int"):
        Argmax(inputs="a", outputs="b", axis=1.0)
    with pytest.raises(ValueError, match="exactly once"):
        Permute(inputs="a", outputs="b", permutation=(0, 1, 1))
    with pytest.raises(ValueError, match="more than one -1"):
        Reshape(inputs="a", outputs="b", shape=(-1, -1))
    with pytest.raises(ValueError, match="one output per input"):
        Normalize(inputs="a", outputs=["b", "c"])


# ----------------------------------------------------------------------------------------------------------- FGSM
def mse_input_grad_sign(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """sign(d mean((x.w - y)^2) / dx) = sign((x.w - y) w), for the linear model w = W0."""
    return np.sign((x @ W0 - y[:, 0])[:, None] * W0[None, :])


def mse(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x @ W0 - y[:, 0]) ** 2))


X = np.array([[0.5, 0.2, 0.5], [0.5, 0.5, 0.3]], np.float32)
Y = np.array([[10.0], [0.0]], np.float32)  # the first sample is under-predicted: its gradient points down


def fgsm_ops(framework: str, lr: float = 0.1, **fgsm_args: Any) -> list[Any]:
    model = linear(framework, lr=lr)
    return [Watch(inputs="x"), ModelOp(model=model, inputs="x", outputs="pred"),
            MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
            FGSM(data="x", loss="mse", outputs="x_adv", **fgsm_args)]


@pytest.mark.parametrize("framework,eager", [("torch", False), ("tf", False), ("tf", True)])
def test_fgsm_matches_hand_computation_and_raises_the_loss(framework: str, eager: bool) -> None:
    """Default bounds: the batch's own min and max of x; explicit bounds: 0 is a bound (FastEstimator would fall back
    to the data's minimum for clip_low=0)."""
    ops = fgsm_ops(framework, epsilon=0.15)
    ops.append(FGSM(data="x", loss="mse", outputs="x_adv_01", epsilon=0.15, clip_low=0.0, clip_high=1.0))
    out = step(network_of(framework, ops), {"x": X, "y": Y}, mode="eval", eager=eager)
    stepped = X + 0.15 * mse_input_grad_sign(X, Y)
    expected = np.clip(stepped, X.min(), X.max())
    np.testing.assert_allclose(numpy_of(out["x_adv"]), expected, rtol=1e-6)
    np.testing.assert_allclose(numpy_of(out["x_adv_01"]), np.clip(stepped, 0.0, 1.0), rtol=1e-6)
    assert numpy_of(out["x_adv_01"]).min() < X.min()  # 0 bounds, not the data's minimum
    assert mse(expected, Y) > mse(X, Y) == pytest.approx(float(numpy_of(out["mse"])), rel=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_fgsm_adversarial_training_step(framework: str) -> None:
    """FastEstimator's adversarial-training recipe: the update uses the mean of the clean and adversarial losses, so
    the graph of the clean loss must survive FGSM's gradient (torch's retain_graph)."""
    lr = 0.01
    ops = fgsm_ops(framework, lr=lr, epsilon=0.1, clip_low=0.0, clip_high=1.0)
    model = ops[1].model
    ops += [ModelOp(model=model, inputs="x_adv", outputs="pred_adv"),
            MeanSquaredError(inputs=("pred_adv", "y"), outputs="mse_adv"),
            Average(inputs=("mse", "mse_adv"), outputs="avg"), UpdateOp(model=model, loss_name="avg")]
    step(network_of(framework, ops), {"x": X, "y": Y})
    x_adv = np.clip(X + 0.1 * mse_input_grad_sign(X, Y), 0.0, 1.0)

    def weight_grad(x: np.ndarray) -> np.ndarray:
        return (2 * (x @ W0 - Y[:, 0])[:, None] * x).mean(axis=0)

    np.testing.assert_allclose(weights(model), W0 - lr * (weight_grad(X) + weight_grad(x_adv)) / 2, rtol=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_fgsm_without_watch_says_how_to_fix_it(framework: str) -> None:
    ops = fgsm_ops(framework)[1:]  # no Watch
    with pytest.raises(ValueError, match=r"Put Watch\(inputs='x'\)"):
        step(network_of(framework, ops), {"x": X, "y": Y}, mode="eval")


def test_fgsm_argument_errors() -> None:
    with pytest.raises(TypeError, match="data must be one key"):
        FGSM(data=["x"], loss="l", outputs="a")
    with pytest.raises(TypeError, match="epsilon must be a number"):
        FGSM(data="x", loss="l", outputs="a", epsilon="big")
    with pytest.raises(ValueError, match="swap them"):
        FGSM(data="x", loss="l", outputs="a", clip_low=1.0, clip_high=0.0)
