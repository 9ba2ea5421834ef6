"""SaliencyNet on linear classifiers, whose input gradients are known in closed form: the gradient of class c's
score is the weight row of c, the same for every input, so each method's mask can be computed by hand."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.xai import SaliencyNet

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
H, W, CLASSES = 4, 5, 3
RNG = np.random.default_rng(0)
WEIGHTS = RNG.normal(size=(CLASSES, H * W)).astype("float32")  # class c's score = <weights[c], image>
IMAGES = RNG.uniform(0, 1, size=(6, H, W)).astype("float32")


def _visualize(raw: np.ndarray, tile: int = 99) -> np.ndarray:
    """The expected scaling of per-sample (H, W) maps: minimum -> 0, the 'lower' tile-th percentile -> 1."""
    flat = np.abs(raw).reshape(len(raw), -1)
    vmax = np.percentile(flat, tile, axis=1, method="lower")[:, None]
    vmin = flat.min(axis=1)[:, None]
    return np.clip((flat - vmin) / (vmax - vmin), 0, 1).reshape(raw.shape)


def _torch_model() -> Any:
    import torch

    def model_fn() -> Any:
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(H * W, CLASSES, bias=False))
        with torch.no_grad():
            model[1].weight.copy_(torch.from_numpy(WEIGHTS))
        return model

    return fe.build(model_fn=model_fn, optimizer_fn=None)


def _tf_model() -> Any:
    import keras

    def model_fn() -> Any:
        model = keras.Sequential([keras.Input((H, W, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(CLASSES, use_bias=False)])
        # Keras flattens (H, W, 1) in the same row-major order as torch flattens (1, H, W).
        model.set_weights([WEIGHTS.T.copy()])
        return model

    return fe.build(model_fn=model_fn, optimizer_fn=None)


FRAMEWORKS = {
    "torch": (_torch_model, lambda x: x[:, None], lambda m: np.asarray(m)[:, 0]),  # channels first
    "tf": (_tf_model, lambda x: x[..., None], lambda m: np.asarray(m)[..., 0]),  # channels last
}


def _net(framework: str) -> tuple[SaliencyNet, Any, Any]:
    make, to_input, to_map = FRAMEWORKS[framework]
    return SaliencyNet(make(), model_inputs="x", model_outputs="y_pred"), to_input, to_map


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_masks_are_the_scaled_weights_of_the_predicted_or_requested_class(framework: str) -> None:
    net, to_input, to_map = _net(framework)
    predicted = np.argmax(IMAGES.reshape(len(IMAGES), -1) @ WEIGHTS.T, axis=1)
    result = net.get_masks({"x": to_input(IMAGES)})
    np.testing.assert_array_equal(np.asarray(result["y_pred"]), predicted)
    mask = to_map(result["saliency"])
    assert mask.shape == (len(IMAGES), H, W) and mask.min() >= 0 and mask.max() <= 1
    np.testing.assert_allclose(mask, _visualize(WEIGHTS[predicted].reshape(-1, H, W)), atol=1e-5)

    wanted = (predicted + 1) % CLASSES  # score another class than the predicted one
    target = {"x": to_input(IMAGES), "SaliencyNet_Target_Index_y_pred": wanted}
    np.testing.assert_allclose(to_map(net.get_masks(target)["saliency"]),
                               _visualize(WEIGHTS[wanted].reshape(-1, H, W)), atol=1e-5)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_integrated_masks_weigh_the_gradient_by_the_distance_from_a_uniform_random_baseline(
        framework: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """FastEstimator's baseline: uniform noise over the batch's value range, drawn anew for every call."""
    from fe_ray.xai import saliency

    drawn: list[tuple[np.ndarray, float, float]] = []

    def recording(x: Any, minval: float, maxval: float) -> Any:
        baseline = original(x, minval=minval, maxval=maxval)
        drawn.append((np.asarray(baseline), minval, maxval))
        return baseline

    original = saliency.random_uniform_like
    monkeypatch.setattr(saliency, "random_uniform_like", recording)
    net, to_input, to_map = _net(framework)
    predicted = np.argmax(IMAGES.reshape(len(IMAGES), -1) @ WEIGHTS.T, axis=1)
    first = to_map(net.get_integrated_masks({"x": to_input(IMAGES)}, nsamples=4)["saliency"])
    baseline, low, high = drawn[0]
    assert (low, high) == pytest.approx((IMAGES.min(), IMAGES.max()))
    assert baseline.shape == to_input(IMAGES).shape and low <= baseline.min() and baseline.max() <= high
    expected = _visualize(WEIGHTS[predicted].reshape(-1, H, W) * (IMAGES - to_map(baseline)))
    np.testing.assert_allclose(first, expected, atol=1e-4)
    second = to_map(net.get_integrated_masks({"x": to_input(IMAGES)}, nsamples=4)["saliency"])
    assert len(drawn) == 2 and not np.allclose(first, second)  # a new baseline each call


def test_smoothed_integrated_masks_integrate_the_clean_input() -> None:
    """With nintegration each sample integrates the clean input (FastEstimator's rule): the noise's spread changes
    nothing when the generator is seeded alike, since the noisy copies still draw."""
    net, to_input, to_map = _net("torch")
    masks = []
    for spread in (0.0, 0.5):
        np.random.seed(11)
        masks.append(to_map(net.get_smoothed_masks({"x": to_input(IMAGES)}, stdev_spread=spread, nsamples=3,
                                                   nintegration=3)["saliency"]))
    np.testing.assert_allclose(masks[0], masks[1], atol=1e-6)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_smoothed_masks_keep_the_clean_decision_and_square_the_gradients(framework: str) -> None:
    net, to_input, to_map = _net(framework)
    predicted = np.argmax(IMAGES.reshape(len(IMAGES), -1) @ WEIGHTS.T, axis=1)
    # Noise this large changes many decisions; the scored class must stay the clean input's.
    result = net.get_smoothed_masks({"x": to_input(IMAGES)}, stdev_spread=2.0, nsamples=5)
    np.testing.assert_array_equal(np.asarray(result["y_pred"]), predicted)
    np.testing.assert_allclose(to_map(result["saliency"]), _visualize(WEIGHTS[predicted].reshape(-1, H, W) ** 2),
                               atol=1e-4)
    plain = net.get_smoothed_masks({"x": to_input(IMAGES)}, stdev_spread=0.5, nsamples=3, magnitude=False)
    np.testing.assert_allclose(to_map(plain["saliency"]), _visualize(WEIGHTS[predicted].reshape(-1, H, W)),
                               atol=1e-4)


def test_bad_arguments_name_the_value() -> None:
    net, to_input, _ = _net("torch")
    with pytest.raises(ValueError, match="nsamples=0"):
        net.get_smoothed_masks({"x": to_input(IMAGES)}, nsamples=0)
    with pytest.raises(ValueError, match="nsamples >= 1, got -2"):
        net.get_integrated_masks({"x": to_input(IMAGES)}, nsamples=-2)
    assert fe.xai.SaliencyNet is SaliencyNet
