"""FastEstimator 1.7's Gather, Resize3D and UnHadamard TensorOps, run through in-process torch and TF Networks (TF
traced as a tf.function, and eagerly), and the Hadamard NumpyOp that pairs with UnHadamard; checked against numpy
computations, scipy's Hadamard matrix and FastEstimator's documented UnHadamard example."""

from __future__ import annotations

import os
from typing import Any

import cloudpickle
import numpy as np
import pytest
from scipy.linalg import hadamard

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.dataset import NumpyDataset  # noqa: E402
from fe_ray.network import TFNetwork, TorchNetwork  # noqa: E402
from fe_ray.op.numpyop.univariate.hadamard import Hadamard  # noqa: E402
from fe_ray.op.tensorop import Gather, Resize3D, UnHadamard  # noqa: E402
from fe_ray.pipeline import Pipeline  # noqa: E402

RUNS = [("torch", False), ("tf", False), ("tf", True)]  # (framework, eager)


def network_of(framework: str, ops: list[Any], pops: Any = None) -> Any:
    return TorchNetwork(ops, pops=pops) if framework == "torch" else TFNetwork(ops, pops=pops)


def numpy_of(value: Any) -> np.ndarray:
    return np.asarray(get_backend(value).to_numpy(value))


def step(network: Any, batch: dict[str, Any], mode: str = "eval", eager: bool = False) -> dict[str, np.ndarray]:
    with network(mode=mode, epoch=1, eager=eager):
        return {key: numpy_of(value) for key, value in network.run_step(batch).items()}


def fe_codes(n_classes: int, code_length: int) -> np.ndarray:
    """FastEstimator's codebook, built from scipy's Hadamard matrix (independently of fe_ray's construction)."""
    matrix = hadamard(code_length).astype(np.float32)
    matrix[np.arange(0, code_length, 2), 0] = -1
    return matrix[:n_classes]


def test_fe_module_paths_and_defaults() -> None:
    tensorop = fe.op.tensorop
    assert (tensorop.Gather, tensorop.Resize3D, tensorop.UnHadamard) == (Gather, Resize3D, UnHadamard)
    assert tensorop.gather.Gather is Gather and tensorop.resize3d.Resize3D is Resize3D
    assert tensorop.un_hadamard.UnHadamard is UnHadamard
    gather = Gather(inputs="x", outputs="y")
    assert (gather.inputs, gather.num_indices, gather.mode, gather.ds_id) == (["x"], 0, set(), set())
    assert Gather(inputs=["a", "b"], outputs=["c", "d"], indices="i").inputs == ["i", "a", "b"]
    resize = Resize3D(inputs="v", outputs="w", output_shape=(2, 3, 4))
    assert (resize.resize_mode, resize.output_shape, resize.mode) == ("nearest", (2, 3, 4), set())
    unhadamard = UnHadamard(inputs="c", outputs="p", n_classes=10)
    assert (unhadamard.code_length, unhadamard.mode) == (16, set())
    assert Hadamard(inputs="y", outputs="c", n_classes=4).code_length == 4
    assert Hadamard(inputs="y", outputs="c", n_classes=5).code_length == 8


# ----------------------------------------------------------------------------------------------------------- Gather
@pytest.mark.parametrize("framework,eager", RUNS)
def test_gather_picks_each_samples_entry_or_its_maximum(framework: str, eager: bool) -> None:
    rng = np.random.default_rng(0)
    scores = rng.random((4, 5), dtype=np.float32)
    maps = rng.random((4, 5, 3), dtype=np.float32)
    idx, idx2 = np.array([1, 4, 0, 2], np.int64), np.array([[3], [3], [1], [0]], np.int64)
    rows = np.arange(4)
    ops = [Gather(inputs=["s", "m"], outputs=["s_at", "m_at"], indices="i"),  # one indices key serves both
           Gather(inputs=["s", "m"], outputs=["s_at2", "m_at2"], indices=["i", "i2"]),  # paired by position
           Gather(inputs=["s", "m", "m"], outputs=["s_p", "m_p", "m_max"], indices=["i", "i2"]),  # the third: max
           Gather(inputs="s", outputs="s_max")]
    out = step(network_of(framework, ops), {"s": scores, "m": maps, "i": idx, "i2": idx2}, eager=eager)
    np.testing.assert_array_equal(out["s_at"], scores[rows, idx])
    np.testing.assert_array_equal(out["m_at"], maps[rows, idx])
    np.testing.assert_array_equal(out["s_at2"], scores[rows, idx])
    np.testing.assert_array_equal(out["m_at2"], maps[rows, idx2[:, 0]])
    np.testing.assert_array_equal(out["s_p"], scores[rows, idx])
    np.testing.assert_array_equal(out["m_p"], maps[rows, idx2[:, 0]])
    np.testing.assert_array_equal(out["m_max"], maps.max(axis=1))
    np.testing.assert_array_equal(out["s_max"], scores.max(axis=1))


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_gather_with_empty_indices_takes_the_maximum(framework: str) -> None:
    """FastEstimator's switch to the maximum: an indices tensor without entries (a batch cannot carry one, so the op
    is called directly)."""
    scores = np.random.default_rng(5).random((3, 4), dtype=np.float32)
    op = Gather(inputs="s", outputs="s_max", indices="none")
    op.build(framework)
    data = fe.backend.to_tensor([np.zeros((0,), np.int64), scores], framework)
    np.testing.assert_array_equal(numpy_of(op.forward(data, {})[0]), scores.max(axis=1))


def test_gather_argument_errors() -> None:
    with pytest.raises(ValueError, match="one output per input"):
        Gather(inputs=["a", "b"], outputs="c", indices="i")
    with pytest.raises(ValueError, match="one output per input"):
        Gather(inputs=[], outputs=[])


# --------------------------------------------------------------------------------------------------------- Resize3D
def blocks_mean(volume: np.ndarray, factor: int) -> np.ndarray:
    """Each factor-cube of the (D, H, W) axes 1..3 of a (N, D, H, W, C) array averaged."""
    n, d, h, w, c = volume.shape
    return volume.reshape(n, d // factor, factor, h // factor, factor, w // factor, factor, c).mean(axis=(2, 4, 6))


@pytest.mark.parametrize("framework,eager", RUNS)
def test_resize3d_nearest_enlarges_and_area_shrinks(framework: str, eager: bool) -> None:
    rng = np.random.default_rng(1)
    volumes = rng.random((2, 2, 3, 4, 2), dtype=np.float32)  # (N, D, H, W, C)
    big = rng.random((2, 4, 6, 8, 2), dtype=np.float32)
    layout = (lambda v: np.ascontiguousarray(np.moveaxis(v, -1, 1))) if framework == "torch" else (lambda v: v)
    back = (lambda v: np.moveaxis(v, 1, -1)) if framework == "torch" else (lambda v: v)
    ops = [Resize3D(inputs=["v", "v2"], outputs=["up", "up2"], output_shape=(4, 6, 8)),
           Resize3D(inputs="big", outputs="down", output_shape=(2, 3, 4), resize_mode="area")]
    out = step(network_of(framework, ops), {"v": layout(volumes), "v2": layout(volumes * 2), "big": layout(big)},
               eager=eager)
    doubled = volumes.repeat(2, axis=1).repeat(2, axis=2).repeat(2, axis=3)
    np.testing.assert_array_equal(back(out["up"]), doubled)
    np.testing.assert_array_equal(back(out["up2"]), doubled * 2)
    np.testing.assert_allclose(back(out["down"]), blocks_mean(big, 2), rtol=1e-5)


def test_resize3d_argument_errors() -> None:
    with pytest.raises(ValueError, match="valid choices are \\['nearest', 'area'\\]"):
        Resize3D(inputs="v", outputs="w", output_shape=(2, 2, 2), resize_mode="bilinear")
    with pytest.raises(ValueError, match="three positive ints"):
        Resize3D(inputs="v", outputs="w", output_shape=(2, 2))
    with pytest.raises(ValueError, match="three positive ints"):
        Resize3D(inputs="v", outputs="w", output_shape=(2, 0, 2))
    with pytest.raises(ValueError, match="one output per input"):
        Resize3D(inputs=["v", "u"], outputs="w", output_shape=(2, 2, 2))


# ------------------------------------------------------------------------------------------ Hadamard / UnHadamard
@pytest.mark.parametrize("n_classes,code_length", [(2, None), (4, None), (10, None), (10, 16), (10, 64), (3, 8)])
def test_hadamard_codebook_matches_fastestimators(n_classes: int, code_length: int | None) -> None:
    op = Hadamard(inputs="y", outputs="code", n_classes=n_classes, code_length=code_length)
    expected = fe_codes(n_classes, op.code_length)
    assert op.labels.dtype == np.float32
    np.testing.assert_array_equal(op.labels, expected)
    np.testing.assert_array_equal(op.forward([np.array(n_classes - 1)], {})[0], expected[-1])


def test_hadamard_encodes_samples_and_batches() -> None:
    op = Hadamard(inputs=["y", "z"], outputs=["cy", "cz"], n_classes=10, code_length=16)
    codes = fe_codes(10, 16)
    cy, cz = op.forward([7, np.array([[2]])], {})  # an int, and a one-label array (squeezed as FE's gather)
    np.testing.assert_array_equal(cy, codes[7])
    np.testing.assert_array_equal(cz, codes[2])
    np.testing.assert_array_equal(op.forward([np.array([1, 9]), 0], {})[0], codes[[1, 9]])  # several labels
    labels = np.array([3, 0, 9, 5])
    batch_y, batch_z = op.forward_batch([labels, labels.reshape(4, 1)], {})
    np.testing.assert_array_equal(batch_y, codes[labels])
    np.testing.assert_array_equal(batch_z, codes[labels])
    pipeline = Pipeline(train_data=NumpyDataset({"y": labels}), batch_size=4,
                        ops=[Hadamard(inputs="y", outputs="code", n_classes=10, code_length=16)])
    np.testing.assert_array_equal(pipeline.get_results("train")["code"], codes[labels])


def test_hadamard_errors() -> None:
    with pytest.raises(ValueError, match="power of 2"):
        Hadamard(inputs="y", outputs="c", n_classes=4, code_length=12)
    with pytest.raises(ValueError, match="shorter than n_classes"):
        Hadamard(inputs="y", outputs="c", n_classes=10, code_length=8)
    with pytest.raises(ValueError, match="n_classes must be an int >= 2"):
        Hadamard(inputs="y", outputs="c", n_classes=1)
    with pytest.raises(ValueError, match="same position"):
        Hadamard(inputs=["y", "z"], outputs="c", n_classes=4)
    op = Hadamard(inputs="y", outputs="c", n_classes=4)
    with pytest.raises(ValueError, match="label -1, outside \\[0, 4\\)"):
        op.forward([np.array(-1)], {})
    with pytest.raises(ValueError, match="needs integer class labels"):
        op.forward_batch([np.array([0.5, 1.0])], {})
    # Whole-number float labels are cast, as FastEstimator's gather does.
    np.testing.assert_array_equal(op.forward([np.float32(2)], {})[0], op.forward([np.array(2)], {})[0])
    with pytest.raises(ValueError, match="power of 2"):
        UnHadamard(inputs="c", outputs="p", n_classes=4, code_length=6)


def iwd_of_l1(codes_in: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    """FastEstimator's UnHadamard: inverse L1 distances to each code (floored at eps), normalised."""
    n_classes, code_length = codebook.shape
    eps = (code_length + 1) * (1 - 0.99999) / (0.99999 * (n_classes - 1))
    distances = np.abs(codes_in[:, None, :] - codebook[None]).sum(axis=-1)
    weights = 1.0 / np.maximum(distances, eps)
    return weights / weights.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("framework,eager", RUNS)
def test_unhadamard_probabilities(framework: str, eager: bool) -> None:
    # FastEstimator's UnHadamard example: these 4-class codes decode to classes 3, 2, 2, 2, 0.
    example = np.array([[1., -1., -1., 1.], [-1., 1., -1., -1.], [-1., 1., -1., -1.], [-1., 1., -1., -1.],
                        [-1., 1., 1., 1.]], np.float32)
    rng = np.random.default_rng(2)
    noisy = np.clip(fe_codes(10, 16)[[4, 9, 0, 7, 2]] + rng.normal(scale=0.4, size=(5, 16)), -1, 1).astype(np.float32)
    ops = [UnHadamard(inputs="c4", outputs="p4", n_classes=4),
           UnHadamard(inputs=["c10", "c10"], outputs=["p10", "p10b"], n_classes=10, code_length=16)]
    out = step(network_of(framework, ops), {"c4": example, "c10": noisy}, eager=eager)
    np.testing.assert_array_equal(out["p4"].argmax(axis=-1), [3, 2, 2, 2, 0])
    np.testing.assert_allclose(out["p4"], iwd_of_l1(example, fe_codes(4, 4)), rtol=1e-5)
    assert out["p10"].shape == (5, 10) and out["p10"].dtype == np.float32
    np.testing.assert_allclose(out["p10"], iwd_of_l1(noisy, fe_codes(10, 16)), rtol=1e-5)
    np.testing.assert_allclose(out["p10"].sum(axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out["p10b"], out["p10"])
    np.testing.assert_array_equal(out["p10"].argmax(axis=-1), [4, 9, 0, 7, 2])
    assert out["p4"][0, 3] == pytest.approx(0.99999, abs=1e-4)  # an exact code: the near-certain class


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_hadamard_pop_round_trips_through_unhadamard(framework: str) -> None:
    """Labels encoded by Hadamard (as a Network pop, batch-wise) and decoded by UnHadamard give the labels back; a
    pickled copy (a Ray replica) decodes alike."""
    labels = np.array([6, 1, 4, 0, 9], np.int64)
    codes = Hadamard(inputs="y", outputs="code", n_classes=10, code_length=32).forward_batch([labels], {})[0]
    unhadamard = UnHadamard(inputs="code", outputs="p", n_classes=10, code_length=32)
    copy = cloudpickle.loads(cloudpickle.dumps(unhadamard))
    for op in (unhadamard, copy):
        out = step(network_of(framework, [op], pops=Hadamard(inputs="y", outputs="y_code", n_classes=10,
                                                               code_length=32)), {"code": codes, "y": labels})
        np.testing.assert_array_equal(out["p"].argmax(axis=-1), labels)
        np.testing.assert_array_equal(out["y_code"], fe_codes(10, 32)[labels])


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_unhadamard_wrong_code_length_says_how_to_fix_it(framework: str) -> None:
    ops = [UnHadamard(inputs="c", outputs="p", n_classes=4)]
    with pytest.raises(ValueError, match="codes of length 4 along the last axis"):
        step(network_of(framework, ops), {"c": np.ones((2, 8), np.float32)})
