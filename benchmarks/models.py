"""Benchmark models and synthetic data, identical for every variant.

* ``lenet``: FastEstimator's LeNet for 1x28x28 MNIST (93,322 parameters): the overhead-bound regime.
  fe_ray's own ``fe_ray.architecture.{pytorch,tensorflow}.LeNet`` is used when it exists (same layers).
* ``resnet``: a small pre-activation-free ResNet for 3x32x32 inputs (604,074 parameters, ~10x LeNet's FLOPs
  per sample): the compute-bound regime.
* ``mlp`` (probe, not in ``--model all``): a two-layer perceptron on the same 1x28x28 inputs (25,450 parameters)
  whose step computes in ~0.1 ms, so that the per-step time a variant adds over the plain loop is the framework's
  own per-step cost, in microseconds, rather than a fraction of a step lost in the noise.

Everything here is module level (picklable by reference), so Ray actors can rebuild the same models.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MODELS = ("lenet", "resnet")
PROBE_MODELS = ("mlp",)
INPUT_SHAPES = {"lenet": (1, 28, 28), "resnet": (3, 32, 32), "mlp": (1, 28, 28)}
NUM_CLASSES = 10


# ---------------------------------------------------------------------------------------------------- data
def synthetic_data(model: str, num_samples: int, seed: int = 0, channels_last: bool = False) -> dict[str, np.ndarray]:
    """Random float32 images in [0, 1) and int64 labels, as numpy arrays ({"x": ..., "y": ...})."""
    rng = np.random.default_rng(seed)
    shape = INPUT_SHAPES[model]
    if channels_last:
        shape = (shape[1], shape[2], shape[0])
    x = rng.random((num_samples, *shape), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, size=num_samples).astype(np.int64)
    return {"x": x, "y": y}


# ---------------------------------------------------------------------------------------------------- torch
def _define_torch_classes() -> dict[str, Any]:
    """Define the torch classes lazily so importing this module does not import torch."""
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class TorchLeNet(nn.Module):
        """FastEstimator's LeNet: 3 conv layers (32/64/64), 2 dense layers, softmax output."""

        def __init__(self, input_shape: tuple[int, int, int] = (1, 28, 28), classes: int = NUM_CLASSES) -> None:
            super().__init__()
            conv_kernel = 3
            self.pool_kernel = 2
            self.conv1 = nn.Conv2d(input_shape[0], 32, conv_kernel)
            self.conv2 = nn.Conv2d(32, 64, conv_kernel)
            self.conv3 = nn.Conv2d(64, 64, conv_kernel)
            flat_x = ((((input_shape[1] - (conv_kernel - 1)) // self.pool_kernel) - (conv_kernel - 1))
                      // self.pool_kernel) - (conv_kernel - 1)
            flat_y = ((((input_shape[2] - (conv_kernel - 1)) // self.pool_kernel) - (conv_kernel - 1))
                      // self.pool_kernel) - (conv_kernel - 1)
            self.fc1 = nn.Linear(flat_x * flat_y * 64, 64)
            self.fc2 = nn.Linear(64, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.max_pool2d(F.relu(self.conv1(x)), self.pool_kernel)
            x = F.max_pool2d(F.relu(self.conv2(x)), self.pool_kernel)
            x = F.relu(self.conv3(x))
            x = x.reshape(x.size(0), -1)
            x = F.relu(self.fc1(x))
            return F.softmax(self.fc2(x), dim=-1)

    class BasicBlock(nn.Module):
        """Two 3x3 convs with batch norm and an identity (or 1x1 strided) shortcut."""

        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                          if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.short(x))

    class SmallResNet(nn.Module):
        """ResNet-8 style: stem 32ch, stages 32/64/128 (one block each, stride 1/2/2), global pool, softmax."""

        def __init__(self, classes: int = NUM_CLASSES) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
            self.layers = nn.Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 128, 2),
                                        BasicBlock(128, 128, 1))
            self.fc = nn.Linear(128, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.layers(self.stem(x))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return F.softmax(self.fc(x), dim=-1)

    class TinyMLP(nn.Module):
        """Flatten -> 32 ReLU units -> softmax over the classes: almost no compute per step."""

        def __init__(self, classes: int = NUM_CLASSES) -> None:
            super().__init__()
            self.hidden = nn.Linear(28 * 28, 32)
            self.out = nn.Linear(32, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.softmax(self.out(F.relu(self.hidden(x.flatten(1)))), dim=-1)

    return {"lenet": TorchLeNet, "resnet": SmallResNet, "mlp": TinyMLP}


_TORCH_CLASSES: dict[str, Any] = {}


def torch_model(name: str, prefer_fe_ray: bool = True) -> Any:
    """A fresh torch model ``name`` ('lenet' or 'resnet') with seeded initial weights."""
    import torch

    if not _TORCH_CLASSES:
        _TORCH_CLASSES.update(_define_torch_classes())
    torch.manual_seed(0)
    if name == "lenet" and prefer_fe_ray:
        try:
            from fe_ray.architecture.pytorch import LeNet

            return LeNet()
        except ImportError:
            pass
    return _TORCH_CLASSES[name]()


def torch_model_fn(name: str) -> Any:
    """A zero-argument (picklable) model_fn for fe.build."""
    import functools

    return functools.partial(torch_model, name)


def count_params(model: Any) -> int:
    """Number of trainable parameters of a torch or Keras model."""
    if hasattr(model, "parameters"):
        return sum(p.numel() for p in model.parameters() if p.requires_grad)
    return int(sum(np.prod(v.shape) for v in model.trainable_weights))


# ---------------------------------------------------------------------------------------------------- tensorflow
def tf_model(name: str, prefer_fe_ray: bool = True) -> Any:
    """A fresh Keras model ``name`` (channels-last inputs) with seeded initial weights."""
    import keras

    keras.utils.set_random_seed(0)
    if name == "lenet":
        if prefer_fe_ray:
            try:
                from fe_ray.architecture.tensorflow import LeNet

                return LeNet()
            except ImportError:
                pass
        layers = keras.layers
        return keras.Sequential([
            keras.Input((28, 28, 1)),
            layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, activation="relu"), layers.Flatten(),
            layers.Dense(64, activation="relu"), layers.Dense(NUM_CLASSES, activation="softmax")])
    if name == "mlp":
        layers = keras.layers
        return keras.Sequential([keras.Input((28, 28, 1)), layers.Flatten(), layers.Dense(32, activation="relu"),
                                 layers.Dense(NUM_CLASSES, activation="softmax")])
    return _keras_resnet()


def _keras_resnet() -> Any:
    import keras
    from keras import layers

    def block(x: Any, cout: int, stride: int) -> Any:
        out = layers.Conv2D(cout, 3, stride, padding="same", use_bias=False)(x)
        out = layers.ReLU()(layers.BatchNormalization()(out))
        out = layers.BatchNormalization()(layers.Conv2D(cout, 3, 1, padding="same", use_bias=False)(out))
        if stride != 1 or x.shape[-1] != cout:
            x = layers.BatchNormalization()(layers.Conv2D(cout, 1, stride, use_bias=False)(x))
        return layers.ReLU()(layers.Add()([out, x]))

    inp = keras.Input((32, 32, 3))
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(32, 3, padding="same", use_bias=False)(inp)))
    for cout, stride in ((32, 1), (64, 2), (128, 2), (128, 1)):
        x = block(x, cout, stride)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(NUM_CLASSES, activation="softmax")(x))


def tf_model_fn(name: str) -> Any:
    """A zero-argument (picklable) Keras model_fn for fe.build."""
    import functools

    return functools.partial(tf_model, name)
