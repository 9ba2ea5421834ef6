"""One training step of each architecture through fe_ray (fe.build + fe.Network), and a short Estimator fit."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.estimator_helpers import ToyPipeline  # noqa: E402

RNG = np.random.default_rng(0)


def trainable_weights(model: Any) -> list[np.ndarray]:
    if hasattr(model, "trainable_weights"):
        return [np.array(w) for w in model.trainable_weights]
    return [p.detach().numpy().copy() for p in model.parameters()]


def network(model: Any, from_logits: bool = False) -> fe.Network:
    return fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                       CrossEntropy(inputs=("y_pred", "y"), outputs="ce", from_logits=from_logits),
                       UpdateOp(model=model, loss_name="ce")])


def images(framework: str, n: int, channels: int, size: int) -> np.ndarray:
    shape = (n, channels, size, size) if framework == "pytorch" else (n, size, size, channels)
    return RNG.random(shape, dtype=np.float32)


def _torch(name: str) -> Callable[..., Any]:
    from fe_ray.architecture import pytorch
    return getattr(pytorch, name)


def _tf(name: str) -> Callable[..., Any]:
    from fe_ray.architecture import tensorflow
    return getattr(tensorflow, name)


# (framework, model_fn, input channels, image size, label kind, logits)
CASES = {
    "torch-resnet9": ("pytorch", lambda: _torch("ResNet9")((3, 16, 16), 4), 3, 16, "class", False),
    "tf-resnet9": ("tensorflow", lambda: _tf("ResNet9")((16, 16, 3), 4), 3, 16, "class", False),
    "torch-unet": ("pytorch", lambda: _torch("UNet")((1, 16, 16), 1), 1, 16, "mask", False),
    "tf-unet": ("tensorflow", lambda: _tf("UNet")((16, 16, 1), 1), 1, 16, "mask", False),
    "torch-wrn": ("pytorch", lambda: _torch("WideResidualNetwork")(10, 4, 1, 0.1), 3, 8, "class", True),
    "tf-wrn": ("tensorflow", lambda: _tf("WideResidualNetwork")((8, 8, 3), 10, 1, 0.1, 4), 3, 8, "class", False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_training_step_updates_the_weights(case: str) -> None:
    framework, model_fn, channels, size, labels, logits = CASES[case]
    pytest.importorskip("torch" if framework == "pytorch" else "tensorflow")
    model = fe.build(model_fn=model_fn, optimizer_fn="adam")
    before = trainable_weights(model)
    x = images(framework, 4, channels, size)
    if labels == "class":
        y = np.array([0, 1, 2, 3], dtype=np.int64)
    else:
        y = (x > 0.5).astype(np.float32)
    net = network(model, from_logits=logits)
    with net(mode="train", epoch=1):
        out = net.run_step({"x": x, "y": y})
    assert np.isfinite(float(out["ce"]))
    assert any(not np.array_equal(a, b) for a, b in zip(before, trainable_weights(model)))


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_resnet9_estimator_fit(framework: str) -> None:
    pytest.importorskip("torch" if framework == "pytorch" else "tensorflow")
    model_fn = (lambda: _torch("ResNet9")((1, 16, 16), 3)) if framework == "pytorch" else (
        lambda: _tf("ResNet9")((16, 16, 1), 3))
    model = fe.build(model_fn=model_fn, optimizer_fn="adam")
    data = {"x": images(framework, 8, 1, 16), "y": RNG.integers(0, 3, 8)}
    summary = fe.Estimator(ToyPipeline(data, dict(data), batch_size=4), network(model), epochs=1,
                           log_steps=None).fit()
    assert summary.history["train"]["epoch"] == {2: 1}
    assert np.isfinite(summary.history["eval"]["ce"][2])


def test_tf_resnet9_softmax_stays_float32_under_mixed_precision() -> None:
    pytest.importorskip("tensorflow")
    model = fe.build(model_fn=lambda: _tf("ResNet9")((16, 16, 3), 4), optimizer_fn="adam", mixed_precision=True)
    assert model.layers[1].compute_dtype == "float16"
    assert model(images("tensorflow", 2, 3, 16), training=False).dtype == "float32"
