"""fe_ray.layers: FastEstimator 1.7's custom PyTorch and Keras layers (maths, arguments, training, serialisation)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.estimator_helpers import ToyPipeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(0)


def _torch() -> Any:
    pytest.importorskip("torch")
    from fe_ray.layers import pytorch
    return pytorch


def _tf() -> Any:
    pytest.importorskip("tensorflow")
    from fe_ray.layers import tensorflow
    return tensorflow


def sylvester(n: int) -> np.ndarray:
    """An independent Hadamard matrix (scipy's, as FastEstimator used) for checking the layers' codebooks."""
    from scipy.linalg import hadamard
    return hadamard(n).astype(np.float32)


def reference_hadamard(features: np.ndarray, weight: np.ndarray, bias: np.ndarray, n_classes: int,
                       code_length: int, max_prob: float, power: float) -> np.ndarray:
    """FastEstimator's HadamardCode forward in numpy (``weight`` is (in, out), one head)."""
    codes = sylvester(code_length)[:n_classes, 1:]
    eps = code_length * ((1.0 - max_prob) / (max_prob * (n_classes - 1))) ** (1.0 / power)
    out = np.tanh(features @ weight + bias)
    distances = np.maximum(np.abs(out[:, None, :] - codes).sum(-1), eps)
    weights = 1.0 / distances ** power
    return weights / weights.sum(-1, keepdims=True)


# ----------------------------------------------------------------------------------------------------------- imports


def test_importing_the_layers_packages_loads_no_framework() -> None:
    code = textwrap.dedent("""
        import sys
        import fe_ray.layers
        import fe_ray.layers.pytorch
        import fe_ray.layers.tensorflow
        assert sorted(dir(fe_ray.layers.pytorch)) and "HadamardCode" in dir(fe_ray.layers.tensorflow)
        frameworks = ("torch", "tensorflow", "keras")
        loaded = sorted(name for name in sys.modules if name.split(".")[0] in frameworks)
        assert not loaded, loaded
        from fe_ray.layers.pytorch import Cropping2D
        assert "torch" in sys.modules and "tensorflow" not in sys.modules and "keras" not in sys.modules
        print("OK", Cropping2D.__module__)
    """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "OK fe_ray.layers.pytorch.cropping_2d"


def test_packages_export_fastestimators_names() -> None:
    import fe_ray.layers
    assert set(fe_ray.layers.pytorch.__all__) == {"Cropping2D", "HadamardCode"}
    assert set(fe_ray.layers.tensorflow.__all__) == {"HadamardCode", "InstanceNormalization", "ReflectionPadding2D"}
    with pytest.raises(AttributeError, match="Nope"):
        fe_ray.layers.Nope  # noqa: B018
    with pytest.raises(AttributeError, match="Nope"):
        fe_ray.layers.pytorch.Nope  # noqa: B018


# -------------------------------------------------------------------------------------------------------- Cropping2D


@pytest.mark.parametrize("cropping, rows, cols", [
    (3, range(3, 7), range(3, 7)),
    ((3, 4), range(3, 7), range(4, 6)),
    (((1, 4), 4), range(1, 6), range(4, 6)),
    ((2, (0, 3)), range(2, 8), range(0, 7)),
    (((0, 0), (1, 0)), range(0, 10), range(1, 10)),
    (0, range(10), range(10)),
])
def test_cropping2d_cuts_the_given_rows_and_columns(cropping: Any, rows: range, cols: range) -> None:
    torch = pytest.importorskip("torch")
    layer = _torch().Cropping2D(cropping)
    x = torch.arange(2 * 3 * 100).view(2, 3, 10, 10)
    expected = x.numpy()[:, :, list(rows)][:, :, :, list(cols)]
    np.testing.assert_array_equal(layer(x).numpy(), expected)


def test_cropping2d_default_is_identity_and_accepts_numpy_ints() -> None:
    torch = pytest.importorskip("torch")
    x = torch.arange(16.0).view(1, 1, 4, 4)
    assert torch.equal(_torch().Cropping2D()(x), x)  # FastEstimator's x[0:-0] emptied it
    assert _torch().Cropping2D((np.int64(1), (np.int32(0), 2))).cropping == ((1, 1), (0, 2))


@pytest.mark.parametrize("cropping", [-1, 1.5, True, "2", (1, 2, 3), ((1, 2, 3), 1), (1, (2, -1)), (1, None), None])
def test_cropping2d_rejects_bad_cropping(cropping: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(cropping))):
        _torch().Cropping2D(cropping)


def test_cropping2d_rejects_inputs_it_cannot_crop() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"leaves nothing of a 4x6"):
        _torch().Cropping2D((2, 0))(torch.zeros(1, 1, 4, 6))
    with pytest.raises(ValueError, match=r"\[3, 8, 8\]"):
        _torch().Cropping2D(1)(torch.zeros(3, 8, 8))


# ------------------------------------------------------------------------------------------------ ReflectionPadding2D


@pytest.mark.parametrize("padding", [(1, 1), (1, 0), (0, 2), (3, 4), (0, 0)])
def test_reflection_padding_matches_numpy_reflect(padding: tuple[int, int]) -> None:
    layer = _tf().ReflectionPadding2D(padding)
    x = RNG.random((2, 5, 6, 3), dtype=np.float32)
    w_pad, h_pad = padding  # FastEstimator's order: (width, height)
    expected = np.pad(x, [(0, 0), (h_pad, h_pad), (w_pad, w_pad), (0, 0)], mode="reflect")
    out = layer(x)
    np.testing.assert_array_equal(np.asarray(out), expected)
    assert tuple(out.shape) == expected.shape == (2, 5 + 2 * h_pad, 6 + 2 * w_pad, 3)
    assert layer.compute_output_shape((None, 5, 6, 3)) == (None, 5 + 2 * h_pad, 6 + 2 * w_pad, 3)


def test_reflection_padding_fastestimator_example() -> None:
    x = np.arange(9, dtype=np.float32).reshape((1, 3, 3, 1))
    out = np.asarray(_tf().ReflectionPadding2D((1, 0))(x))[0, :, :, 0]
    np.testing.assert_array_equal(out, [[1, 0, 1, 2, 1], [4, 3, 4, 5, 4], [7, 6, 7, 8, 7]])


@pytest.mark.parametrize("padding", [1, (1,), (1, 2, 3), (-1, 1), (1.0, 1), (True, 1), "11", None])
def test_reflection_padding_rejects_bad_padding(padding: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(padding))):
        _tf().ReflectionPadding2D(padding)


def test_reflection_padding_rejects_padding_as_large_as_the_input() -> None:
    with pytest.raises(ValueError, match=r"\(3, 1\).*4x3"):
        _tf().ReflectionPadding2D((3, 1))(np.zeros((1, 4, 3, 1), np.float32))


# ---------------------------------------------------------------------------------------------- InstanceNormalization


def test_instance_norm_normalises_each_sample_and_channel_then_scales() -> None:
    layer = _tf().InstanceNormalization(epsilon=0.0)
    x = RNG.normal(loc=[3.0, -5.0], scale=[2.0, 0.5], size=(3, 7, 5, 2)).astype(np.float32)
    x[1] = x[1] * 10 + 100  # a sample with other statistics is normalised on its own
    layer.build(x.shape)
    layer.scale.assign([1.0, 1.0])
    layer.offset.assign([0.0, 0.0])
    unit = np.asarray(layer(x))
    np.testing.assert_allclose(unit.mean(axis=(1, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(unit.var(axis=(1, 2)), 1.0, atol=1e-4)
    layer.scale.assign([2.0, 0.5])
    layer.offset.assign([1.0, -3.0])
    out = np.asarray(layer(x))
    np.testing.assert_allclose(out, unit * [2.0, 0.5] + [1.0, -3.0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.mean(axis=(1, 2)), np.broadcast_to([1.0, -3.0], (3, 2)), atol=1e-5)
    np.testing.assert_allclose(out.std(axis=(1, 2)), np.broadcast_to([2.0, 0.5], (3, 2)), atol=1e-4)


def test_instance_norm_formula_with_epsilon_and_fastestimator_initialisation() -> None:
    x = RNG.random((2, 4, 4, 3), dtype=np.float32)
    layer = _tf().InstanceNormalization()
    assert layer.epsilon == 1e-5
    out = np.asarray(layer(x))
    scale, offset = np.asarray(layer.scale), np.asarray(layer.offset)
    np.testing.assert_array_equal(offset, 0.0)
    assert scale.shape == (3,) and 0 < np.abs(scale).max() < 0.2  # N(0, 0.02), as FastEstimator
    mean, var = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(out, scale * (x - mean) / np.sqrt(var + 1e-5) + offset, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("epsilon", [-1e-3, "1e-5", None, math.inf, True])
def test_instance_norm_rejects_bad_epsilon(epsilon: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(epsilon))):
        _tf().InstanceNormalization(epsilon)


def test_instance_norm_rejects_non_image_inputs() -> None:
    with pytest.raises(ValueError, match=r"\(2, 5, 3\)"):
        _tf().InstanceNormalization()(np.zeros((2, 5, 3), np.float32))


# ------------------------------------------------------------------------------------------------------ HadamardCode


def test_torch_hadamard_hand_computed_probabilities() -> None:
    torch = pytest.importorskip("torch")
    # n_classes 2, code_length 4: codes (H4 without its first column) [1, 1, 1] and [-1, 1, -1]. A head giving
    # tanh = 0.5 everywhere lies 1.5 from class 0 and 3.5 from class 1.
    for power, expected in [(1.0, [3.5 / 5.0, 1.5 / 5.0]), (2.0, [12.25 / 14.5, 2.25 / 14.5])]:
        layer = _torch().HadamardCode(1, n_classes=2, code_length=4, power=power)
        with torch.no_grad():
            layer.heads[0].weight.zero_()
            layer.heads[0].bias.fill_(math.atanh(0.5))
        out = layer(torch.ones(3, 1)).detach().numpy()
        np.testing.assert_allclose(out, np.tile(expected, (3, 1)), rtol=1e-6)
    np.testing.assert_array_equal(layer.labels.numpy(), [[1, 1, 1], [-1, 1, -1]])
    assert float(layer.eps) == pytest.approx(4 * (0.05 / 0.95) ** 0.5)


def test_torch_hadamard_exact_code_gets_max_prob() -> None:
    torch = pytest.importorskip("torch")
    layer = _torch().HadamardCode(1, n_classes=3, max_prob=0.8)
    assert layer.code_length == 16
    with torch.no_grad():
        layer.heads[0].weight.zero_()
        layer.heads[0].bias.copy_(torch.from_numpy(sylvester(16)[2, 1:] * 50.0))  # tanh saturates on class 2's code
    out = layer(torch.ones(1, 1)).detach().numpy()[0]
    assert out[2] == pytest.approx(0.8, abs=1e-6)
    np.testing.assert_allclose(out[:2], [0.1, 0.1], atol=1e-6)


def test_torch_hadamard_matches_fastestimators_formula() -> None:
    torch = pytest.importorskip("torch")
    layer = _torch().HadamardCode(6, n_classes=5, code_length=8, max_prob=0.9, power=0.5)
    x = RNG.normal(size=(4, 6)).astype(np.float32)
    out = layer(torch.from_numpy(x)).detach().numpy()
    head = layer.heads[0]
    expected = reference_hadamard(x, head.weight.detach().numpy().T, head.bias.detach().numpy(), 5, 8, 0.9, 0.5)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)


def test_hadamard_code_lengths_and_head_sizes() -> None:
    torch_layers = _torch()
    assert torch_layers.HadamardCode(4, 10).code_length == 16  # FastEstimator's floor of 16
    assert torch_layers.HadamardCode(4, 17).code_length == 32
    assert [h.out_features for h in torch_layers.HadamardCode(4, 10).heads] == [15]
    assert [h.out_features for h in torch_layers.HadamardCode([3, 3, 3], 10).heads] == [5, 5, 5]
    assert [h.out_features for h in torch_layers.HadamardCode([2, 2, 2], 3, code_length=32).heads] == [11, 10, 10]
    assert [h.in_features for h in torch_layers.HadamardCode([2, 7], 3).heads] == [2, 7]
    # The frozen tensors are parameters named as in FastEstimator, so FastEstimator state dicts load.
    keys = set(torch_layers.HadamardCode([2, 7], 3).state_dict())
    assert {"power", "eps", "labels", "heads.0.weight", "heads.1.bias"} <= keys


def test_torch_and_tf_hadamard_agree_on_the_same_weights() -> None:
    torch = pytest.importorskip("torch")
    tf_layers = _tf()
    for features in ([6], [3, 4, 5]):
        t_layer = _torch().HadamardCode(features if len(features) > 1 else features[0], n_classes=5, max_prob=0.8,
                                        power=0.5)
        k_layer = tf_layers.HadamardCode(5, max_prob=0.8, power=0.5)
        xs = [RNG.normal(size=(3, n)).astype(np.float32) for n in features]
        k_out = k_layer(xs if len(xs) > 1 else xs[0])
        for t_head, k_head in zip(t_layer.heads, k_layer.heads):
            k_head.kernel.assign(t_head.weight.detach().numpy().T)
            k_head.bias.assign(t_head.bias.detach().numpy())
        k_out = np.asarray(k_layer(xs if len(xs) > 1 else xs[0]))
        t_in = [torch.from_numpy(x) for x in xs]
        t_out = t_layer(t_in if len(t_in) > 1 else t_in[0]).detach().numpy()
        assert k_out.shape == t_out.shape == (3, 5)
        np.testing.assert_allclose(k_out, t_out, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(np.asarray(k_layer.labels), t_layer.labels.numpy())
        assert [h.units for h in k_layer.heads] == [h.out_features for h in t_layer.heads]


@pytest.mark.parametrize("kwargs, bad", [
    ({"n_classes": 1}, "1"), ({"n_classes": 2.5}, "2.5"), ({"n_classes": 3, "code_length": 12}, "12"),
    ({"n_classes": 5, "code_length": 4}, "4"), ({"n_classes": 3, "code_length": 0}, "0"),
    ({"n_classes": 3, "max_prob": 1.0}, "1.0"), ({"n_classes": 3, "max_prob": 0}, "0"),
    ({"n_classes": 3, "power": 0.0}, "0.0"), ({"n_classes": 3, "power": -1}, "-1"),
    ({"n_classes": 3, "power": "1"}, "'1'"),
])
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_hadamard_rejects_bad_arguments(framework: str, kwargs: dict[str, Any], bad: str) -> None:
    with pytest.raises(ValueError, match=re.escape(bad)):
        if framework == "pytorch":
            _torch().HadamardCode(4, **kwargs)
        else:
            _tf().HadamardCode(**kwargs)


def test_hadamard_rejects_bad_heads_and_inputs() -> None:
    torch = pytest.importorskip("torch")
    torch_layers = _torch()
    for in_features in (0, [], [4, -1], "4", 2.0):
        with pytest.raises(ValueError, match=re.escape(repr(in_features))):
            torch_layers.HadamardCode(in_features, 3)
    with pytest.raises(ValueError, match="8 input heads, too many for code_length 8"):
        torch_layers.HadamardCode([1] * 8, 3, code_length=8)
    with pytest.raises(ValueError, match="2 input head.*got 3"):
        torch_layers.HadamardCode([2, 2], 3)([torch.zeros(1, 2)] * 3)
    with pytest.raises(ValueError, match="2 input heads"):
        torch_layers.HadamardCode([2, 2], 3)(torch.zeros(1, 2))
    tf_layers = _tf()
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        tf_layers.HadamardCode(3)(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="16 input heads"):
        tf_layers.HadamardCode(3)([np.zeros((1, 2), np.float32)] * 16)


def test_tf_hadamard_follows_mixed_precision() -> None:
    layer = _tf().HadamardCode(3, dtype="mixed_float16")
    out = layer(RNG.random((2, 4), dtype=np.float32))
    assert out.dtype == "float16" and layer.heads[0].kernel.dtype == "float32"
    np.testing.assert_allclose(np.asarray(out, np.float32).sum(-1), 1.0, atol=1e-2)


# ---------------------------------------------------------------------------------------------- Keras serialisation


def test_tf_layers_survive_save_and_load_model(tmp_path: Path) -> None:
    tf_layers = _tf()
    import keras
    model = keras.Sequential([keras.Input((6, 5, 2)), tf_layers.ReflectionPadding2D((2, 1)),
                              tf_layers.InstanceNormalization(epsilon=1e-3), keras.layers.Flatten(),
                              tf_layers.HadamardCode(4, code_length=32, max_prob=0.7, power=0.5)])
    model.layers[1].scale.assign(RNG.normal(size=2).astype(np.float32))
    model.layers[1].offset.assign(RNG.normal(size=2).astype(np.float32))
    x = RNG.random((3, 6, 5, 2), dtype=np.float32)
    path = str(tmp_path / "model.keras")
    model.save(path)
    custom = {"ReflectionPadding2D": tf_layers.ReflectionPadding2D, "HadamardCode": tf_layers.HadamardCode,
              "InstanceNormalization": tf_layers.InstanceNormalization}
    for loaded in (keras.models.load_model(path), keras.models.load_model(path, custom_objects=custom)):
        np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)), rtol=1e-6)
        pad, norm, _, code = loaded.layers
        assert pad.get_config()["padding"] in ((2, 1), [2, 1]) and norm.get_config()["epsilon"] == 1e-3
        assert {k: code.get_config()[k] for k in ("n_classes", "code_length", "max_prob", "power")} == {
            "n_classes": 4, "code_length": 32, "max_prob": 0.7, "power": 0.5}


def test_tf_multi_head_hadamard_survives_save_and_load_model(tmp_path: Path) -> None:
    tf_layers = _tf()
    import keras
    inputs = [keras.Input((4,)), keras.Input((5,))]
    model = keras.Model(inputs, tf_layers.HadamardCode(3, code_length=8)(inputs))
    xs = [RNG.random((2, 4), dtype=np.float32), RNG.random((2, 5), dtype=np.float32)]
    model.save(str(tmp_path / "multi.keras"))
    loaded = keras.models.load_model(str(tmp_path / "multi.keras"))
    assert [h.units for h in loaded.layers[-1].heads] == [3, 4]
    np.testing.assert_allclose(np.asarray(loaded(xs)), np.asarray(model(xs)), rtol=1e-6)


@pytest.mark.parametrize("name, kwargs", [("HadamardCode", {"n_classes": 7, "power": 2.0}),
                                          ("InstanceNormalization", {"epsilon": 0.01}),
                                          ("ReflectionPadding2D", {"padding": (0, 3)})])
def test_tf_get_config_round_trips(name: str, kwargs: dict[str, Any]) -> None:
    cls = getattr(_tf(), name)
    layer = cls(**kwargs, name="mine")
    clone = cls.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config() and clone.name == "mine"
    for key, value in kwargs.items():
        assert clone.get_config()[key] == value


# ---------------------------------------------------------------------------------------------- training through fe


def _weights(model: Any) -> list[np.ndarray]:
    if hasattr(model, "trainable_weights"):
        return [np.array(w) for w in model.trainable_weights]
    return [p.detach().numpy().copy() for p in model.parameters() if p.requires_grad]


def _fit(model: Any, x: np.ndarray) -> Any:
    data = {"x": x, "y": RNG.integers(0, 3, len(x))}
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")])
    return fe.Estimator(ToyPipeline(data, dict(data), batch_size=4), network, epochs=2, log_steps=None).fit()


def test_torch_layers_train_in_an_estimator_fit() -> None:
    torch = pytest.importorskip("torch")
    torch_layers = _torch()

    def model_fn() -> Any:
        return torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch_layers.Cropping2D(((1, 2), 1)),
                                   torch.nn.Flatten(), torch_layers.HadamardCode(2 * 5 * 6, 3))

    model = fe.build(model_fn=model_fn, optimizer_fn="adam")
    frozen = {k: v.detach().clone() for k, v in model[3].named_parameters() if not v.requires_grad}
    before = _weights(model)
    summary = _fit(model, RNG.random((8, 1, 8, 8), dtype=np.float32))
    assert np.isfinite(summary.history["eval"]["ce"][4])
    assert all(not np.array_equal(a, b) for a, b in zip(before, _weights(model)))
    assert set(frozen) == {"power", "eps", "labels"}
    assert all(torch.equal(frozen[k], v) for k, v in model[3].named_parameters() if k in frozen)


def test_tf_layers_train_in_an_estimator_fit() -> None:
    tf_layers = _tf()
    import keras

    def model_fn() -> Any:
        return keras.Sequential([keras.Input((8, 8, 1)), tf_layers.ReflectionPadding2D((1, 2)),
                                 keras.layers.Conv2D(2, 3), tf_layers.InstanceNormalization(),
                                 keras.layers.Flatten(), tf_layers.HadamardCode(3)])

    model = fe.build(model_fn=model_fn, optimizer_fn="adam")
    before = _weights(model)
    assert len(before) == 2 + 2 + 2  # conv, instance-norm scale / offset, the Hadamard head
    summary = _fit(model, RNG.random((8, 8, 8, 1), dtype=np.float32))
    assert np.isfinite(summary.history["eval"]["ce"][4])
    assert all(not np.array_equal(a, b) for a, b in zip(before, _weights(model)))
