"""Output shapes, dtypes and activations, FastEstimator's import paths, and argument errors of the architectures."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402

ARCH_DIR = Path(fe.__file__).parent / "architecture"
NAMES = ["AttentionUNet", "LeNet", "ResNet9", "UNet", "WideResidualNetwork"]


def torch_forward(model: object, shape: tuple[int, ...], train: bool = False) -> np.ndarray:
    import torch

    torch.manual_seed(0)
    model.train(train)
    with torch.no_grad():
        out = model(torch.rand(shape))
    assert out.dtype == torch.float32
    return out.numpy()


def tf_forward(model: object, shape: tuple[int, ...]) -> np.ndarray:
    out = model(np.random.default_rng(0).random(shape, dtype=np.float32), training=False)
    assert out.dtype == "float32"
    return np.asarray(out)


def assert_probabilities(out: np.ndarray, shape: tuple[int, ...]) -> None:
    assert out.shape == shape
    assert np.all(out >= 0) and np.allclose(out.sum(axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_fastestimator_import_paths(framework: str) -> None:
    pytest.importorskip("torch" if framework == "pytorch" else "tensorflow")
    package = getattr(fe.architecture, framework)
    assert sorted(package.__all__) == NAMES
    for name in NAMES:
        assert getattr(package, name) is getattr(__import__(f"fe_ray.architecture.{framework}", fromlist=[name]), name)


@pytest.mark.parametrize("framework, allowed, banned", [
    ("pytorch", {"torch"}, {"tensorflow", "keras"}), ("tensorflow", {"keras", "tensorflow"}, {"torch"})])
def test_each_framework_package_imports_only_its_framework(framework: str, allowed: set[str],
                                                            banned: set[str]) -> None:
    """Checked on the source, so it holds without importing either framework."""
    own = {"__future__", "collections", "fe_ray", *allowed}
    for path in [*sorted((ARCH_DIR / framework).glob("*.py")), ARCH_DIR / "_checks.py", ARCH_DIR / "__init__.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= own | {"importlib", "types"} and not roots & banned, f"{path.name} imports {roots}"


def test_torch_resnet9_gives_probabilities() -> None:
    pytest.importorskip("torch")
    from fe_ray.architecture.pytorch import ResNet9

    assert_probabilities(torch_forward(ResNet9((3, 16, 24), classes=4), (2, 3, 16, 24)), (2, 4))


def test_tf_resnet9_gives_float32_probabilities() -> None:
    pytest.importorskip("tensorflow")
    from fe_ray.architecture.tensorflow import ResNet9

    model = ResNet9((16, 24, 1), classes=4)
    assert_probabilities(tf_forward(model, (2, 16, 24, 1)), (2, 4))
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"  # kept float32 under mixed precision too


def test_unet_gives_per_pixel_sigmoid_maps() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fe_ray.architecture import pytorch, tensorflow

    for out in (torch_forward(pytorch.UNet((3, 16, 32), 2), (2, 3, 16, 32)).transpose(0, 2, 3, 1),
                tf_forward(tensorflow.UNet((16, 32, 3), 2), (2, 16, 32, 3))):
        assert out.shape == (2, 16, 32, 2)
        assert np.all((out > 0) & (out < 1))


def test_attention_unet_gives_one_sigmoid_map() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fe_ray.architecture import pytorch, tensorflow

    for out in (torch_forward(pytorch.AttentionUNet((3, 32, 16)), (2, 3, 32, 16)).transpose(0, 2, 3, 1),
                tf_forward(tensorflow.AttentionUNet((32, 16, 3)), (2, 32, 16, 3))):
        assert out.shape == (2, 32, 16, 1)
        assert np.all((out > 0) & (out < 1))


def test_torch_wide_residual_network_gives_logits_and_uses_dropout() -> None:
    """Like FastEstimator's, the PyTorch WRN has no softmax; unlike FastEstimator 1.7's (which fails with an
    AttributeError on a dropout > 0), its dropout works: training-mode outputs vary, eval-mode ones do not."""
    torch = pytest.importorskip("torch")
    from fe_ray.architecture.pytorch import WideResidualNetwork

    model = WideResidualNetwork(depth=10, classes=5, widen_factor=1, dropout=0.5)
    out = torch_forward(model, (3, 3, 12, 12))
    assert out.shape == (3, 5) and not np.allclose(out.sum(axis=-1), 1.0)
    x = torch.rand(3, 3, 12, 12)
    model.train()
    assert not torch.equal(model(x), model(x))
    model.eval()
    assert torch.equal(model(x), model(x))


def test_tf_wide_residual_network_activation() -> None:
    pytest.importorskip("tensorflow")
    from fe_ray.architecture.tensorflow import WideResidualNetwork

    assert_probabilities(tf_forward(WideResidualNetwork((8, 12, 3), depth=10, widen_factor=1, classes=5),
                                    (2, 8, 12, 3)), (2, 5))
    logits = tf_forward(WideResidualNetwork((8, 8, 1), depth=10, widen_factor=1, dropout=0.3, classes=5,
                                            activation=None), (2, 8, 8, 1))
    assert logits.shape == (2, 5) and not np.allclose(logits.sum(axis=-1), 1.0)


TORCH_ERRORS = [
    ("ResNet9", dict(input_size=(3, 32)), r"ResNet9 input_size must be three positive integers \(channels, height, "
                                          r"width\), got \(3, 32\); pass e.g. \(3, 32, 32\)"),
    ("ResNet9", dict(input_size=(3, 15, 32)), r"ResNet9 needs inputs of at least 16x16 pixels, got input_size "
                                              r"\(3, 15, 32\); resize or pad"),
    ("ResNet9", dict(classes=0), r"ResNet9 classes must be a positive integer, got 0"),
    ("UNet", dict(input_size=(1, 40, 32)), r"UNet needs inputs of at least 16x16 pixels with sides a multiple of 16, "
                                           r"got input_size \(1, 40, 32\)"),
    ("UNet", dict(input_size=(1, 8, 8)), r"at least 16x16 pixels with sides a multiple of 16, got input_size "
                                         r"\(1, 8, 8\)"),
    ("UNet", dict(input_size=(128, 128)), r"UNet input_size must be three positive integers"),
    ("AttentionUNet", dict(input_size=(1, 64, 24)), r"AttentionUNet needs inputs of at least 16x16 pixels with sides "
                                                    r"a multiple of 16, got input_size \(1, 64, 24\)"),
    ("WideResidualNetwork", dict(depth=27), r"depth must be 6 \* N \+ 4 for a whole N >= 1 .*got 27"),
    ("WideResidualNetwork", dict(depth=4), r"got 4"),
    ("WideResidualNetwork", dict(widen_factor=0), r"widen_factor must be a positive integer, got 0"),
    ("WideResidualNetwork", dict(dropout=1.0), r"dropout must be in \[0, 1\), got 1.0; pass 0.0 for no dropout"),
]


@pytest.mark.parametrize("name, kwargs, match", TORCH_ERRORS)
def test_torch_bad_arguments_are_named(name: str, kwargs: dict, match: str) -> None:
    pytest.importorskip("torch")
    from fe_ray.architecture import pytorch

    with pytest.raises(ValueError, match=match):
        getattr(pytorch, name)(**kwargs)


TF_ERRORS = [
    ("ResNet9", dict(input_size=(32, 32, 3, 1)), r"ResNet9 input_size must be three positive integers \(height, "
                                                 r"width, channels\), got \(32, 32, 3, 1\); pass e.g. \(32, 32, 3\)"),
    ("ResNet9", dict(input_size=(32, 8, 3)), r"at least 16x16 pixels, got input_size \(32, 8, 3\)"),
    ("UNet", dict(input_size=(48, 20, 1)), r"multiple of 16, got input_size \(48, 20, 1\)"),
    ("UNet", dict(output_channel=0), r"UNet output_channel must be a positive integer, got 0"),
    ("AttentionUNet", dict(input_size=(64, 64)), r"AttentionUNet input_size must be three positive integers "
                                                 r"\(height, width, channels\), got \(64, 64\)"),
    ("WideResidualNetwork", dict(input_shape=(3, 32, 3)), r"at least 4x4 pixels, got input_shape \(3, 32, 3\)"),
    ("WideResidualNetwork", dict(input_shape=(32, 32, 3), depth=20), r"6 \* N \+ 4 .*got 20"),
    ("WideResidualNetwork", dict(input_shape=(32, 32, 3), classes=-1), r"classes must be a positive integer"),
]


@pytest.mark.parametrize("name, kwargs, match", TF_ERRORS)
def test_tf_bad_arguments_are_named(name: str, kwargs: dict, match: str) -> None:
    pytest.importorskip("tensorflow")
    from fe_ray.architecture import tensorflow

    with pytest.raises(ValueError, match=match):
        getattr(tensorflow, name)(**kwargs)


def test_lenet_paths_and_errors_unchanged() -> None:
    pytest.importorskip("torch")
    from fe_ray.architecture.pytorch import LeNet

    assert_probabilities(torch_forward(LeNet(), (2, 1, 28, 28)), (2, 10))
    with pytest.raises(ValueError, match=re.escape("at least 18x18 pixels, got 17x28")):
        LeNet((1, 17, 28))
