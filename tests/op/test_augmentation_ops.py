"""MixUpBatch and CutMixBatch (FastEstimator 1.7's batch augmentations) in in-process torch and TF Networks (TF traced
as a tf.function, and eagerly): hand-computed outputs, the Beta draws' distribution, reproducibility, checkpoints
and replica copies of the per-op random stream."""

from __future__ import annotations

import os
from typing import Any

import cloudpickle
import numpy as np
import pytest
from scipy import stats

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.network import TFNetwork, TorchNetwork  # noqa: E402
from fe_ray.op.tensorop.augmentation import CutMixBatch, MixUpBatch  # noqa: E402
from fe_ray.op.tensorop.augmentation.mix_stream import MixStream  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
RUNS = [("torch", False), ("tf", False), ("tf", True)]  # (framework, eager)


def network_of(framework: str, ops: list[Any]) -> Any:
    return TorchNetwork(ops) if framework == "torch" else TFNetwork(ops)


def numpy_of(value: Any) -> np.ndarray:
    return np.asarray(get_backend(value).to_numpy(value))


def run_steps(network: Any, batch: dict[str, Any], steps: int, eager: bool = False) -> list[dict[str, np.ndarray]]:
    with network(mode="train", epoch=1, eager=eager):
        return [{key: numpy_of(value) for key, value in network.run_step(batch).items()} for _ in range(steps)]


def images(framework: str, count: int = 4, height: int = 6, width: int = 10) -> np.ndarray:
    """Distinct random pixels (so a pasted pixel is told from an original one), in the framework's layout."""
    data = np.random.default_rng(count * height + width).random((count, height, width, 3), dtype=np.float32)
    return np.ascontiguousarray(np.moveaxis(data, -1, 1)) if framework == "torch" else data


def test_fe_module_paths_and_defaults() -> None:
    assert fe.op.tensorop.augmentation.MixUpBatch is MixUpBatch
    assert fe.op.tensorop.augmentation.CutMixBatch is CutMixBatch
    mixup = MixUpBatch(inputs="x", outputs=["x_mix", "lam"])
    # FastEstimator 1.7's default: one lambda per sample.
    assert (mixup.mode, mixup.alpha, mixup.shared_beta, mixup.ds_id) == ({"train"}, 1.0, False, set())
    cutmix = CutMixBatch(inputs="x", outputs=["x_mix", "lam"])
    assert (cutmix.mode, cutmix.alpha) == ({"train"}, 1.0)


# ---------------------------------------------------------------------------------------------------------- draws
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("alpha", [1.0, 0.3])
def test_beta_and_uniform_draws_follow_their_distributions(framework: str, alpha: float) -> None:
    np.random.seed(0)
    mix = MixStream()
    mix.build(framework)
    betas = numpy_of(mix.beta(alpha, 3000))
    assert betas.shape == (3000,) and stats.kstest(betas, "beta", args=(alpha, alpha)).pvalue > 1e-3
    assert stats.kstest(numpy_of(mix.uniform(3000)), "uniform").pvalue > 1e-3
    singles = [float(numpy_of(mix.beta(alpha))) for _ in range(5)]
    assert len(set(singles)) == 5  # each call moves the stream on


# ---------------------------------------------------------------------------------------------------------- MixUp
@pytest.mark.parametrize("framework,eager", RUNS)
def test_mixup_shared_lambda_blends_each_sample_with_its_neighbour(framework: str, eager: bool) -> None:
    x = images(framework)
    y = np.eye(4, dtype=np.float32)  # one-hot labels, mixed with the same lambda
    network = network_of(framework, [MixUpBatch(inputs=["x", "y"], outputs=["x_mix", "y_mix", "lam"],
                                                shared_beta=True)])
    results = run_steps(network, {"x": x, "y": y}, steps=4, eager=eager)
    for out in results:
        lam = out["lam"]
        assert lam.shape == () and 0.5 <= lam <= 1.0
        np.testing.assert_allclose(out["x_mix"], lam * x + (1 - lam) * np.roll(x, 1, axis=0), rtol=1e-5)
        np.testing.assert_allclose(out["y_mix"], lam * y + (1 - lam) * np.roll(y, 1, axis=0), rtol=1e-5)
    assert len({float(out["lam"]) for out in results}) == 4  # a fresh draw every step, also in a traced graph


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mixup_per_sample_lambda_fits_every_input_rank(framework: str) -> None:
    x = images(framework)
    y = np.eye(4, dtype=np.float32)
    network = network_of(framework, [MixUpBatch(inputs=["x", "y"], outputs=["x_mix", "y_mix", "lam"], alpha=0.5,
                                                shared_beta=False)])
    out = run_steps(network, {"x": x, "y": y}, steps=1)[0]
    lam = out["lam"]
    assert lam.shape == (4, 1, 1, 1) and len(np.unique(lam)) == 4 and lam.min() >= 0.5
    np.testing.assert_allclose(out["x_mix"], lam * x + (1 - lam) * np.roll(x, 1, axis=0), rtol=1e-5)
    per_sample = lam.reshape(4, 1)
    np.testing.assert_allclose(out["y_mix"], per_sample * y + (1 - per_sample) * np.roll(y, 1, axis=0), rtol=1e-5)


# --------------------------------------------------------------------------------------------------------- CutMix
def expected_cutmix(x: np.ndarray, draws: tuple[float, float, float], channels_first: bool) -> tuple[np.ndarray, float]:
    """CutMix by hand from the stream's draws (lambda, centre x, centre y)."""
    lam, cx, cy = draws
    lam = max(lam, 1 - lam)
    height, width = x.shape[2:] if channels_first else x.shape[1:3]
    side = np.sqrt(1 - np.float32(lam))
    x1 = int(np.round(max(width * cx - width * side / 2, 0)))
    x2 = int(np.round(min(width * cx + width * side / 2, width)))
    y1 = int(np.round(max(height * cy - height * side / 2, 0)))
    y2 = int(np.round(min(height * cy + height * side / 2, height)))
    out = x.copy()
    rolled = np.roll(x, 1, axis=0)
    if channels_first:
        out[:, :, y1:y2, x1:x2] = rolled[:, :, y1:y2, x1:x2]
    else:
        out[:, y1:y2, x1:x2] = rolled[:, y1:y2, x1:x2]
    return out, 1 - (x2 - x1) * (y2 - y1) / (width * height)


@pytest.mark.parametrize("framework,eager", RUNS)
def test_cutmix_pastes_the_neighbours_patch_as_drawn(framework: str, eager: bool) -> None:
    """The box and lambda follow from the op's own draws (replayed from a copy of its stream), step after step."""
    np.random.seed(4)
    op = CutMixBatch(inputs=["x", "mask"], outputs=["x_mix", "mask_mix", "lam"], alpha=0.7)
    replay = cloudpickle.loads(cloudpickle.dumps(op.mix))  # the same stream position, as a Ray replica gets it
    replay.build(framework)
    x = images(framework)
    mask = (x > 0.5).astype(np.float32)
    results = run_steps(network_of(framework, [op]), {"x": x, "mask": mask}, steps=5, eager=eager)
    for out in results:
        draws = tuple(float(numpy_of(value)) for value in (replay.beta(0.7), replay.uniform(), replay.uniform()))
        want_x, want_lam = expected_cutmix(x, draws, channels_first=framework == "torch")
        want_mask, _ = expected_cutmix(mask, draws, channels_first=framework == "torch")
        np.testing.assert_array_equal(out["x_mix"], want_x)
        np.testing.assert_array_equal(out["mask_mix"], want_mask)  # the same box for every input
        assert out["lam"].dtype == np.float32 and float(out["lam"]) == pytest.approx(want_lam, abs=1e-6)
    assert len({float(out["lam"]) for out in results}) > 1


# ------------------------------------------------------------------------------------------ reproducibility / state
def lambda_sequence(network: Any, framework: str, steps: int) -> list[float]:
    batch = {"x": images(framework)}
    # The first sample's lambda: MixUpBatch draws one per sample by default, CutMixBatch one per batch.
    return [float(np.ravel(out["lam"])[0]) for out in run_steps(network, batch, steps)]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("op_class", [MixUpBatch, CutMixBatch])
def test_draws_repeat_under_a_seed_resume_from_checkpoints_and_agree_in_copies(framework: str, op_class: Any) -> None:
    def new_op() -> Any:
        return op_class(inputs="x", outputs=["x_mix", "lam"])

    # fe.enable_deterministic seeds numpy, which the streams' seeds come from; seeding numpy alone spares the other
    # tests of this process the global deterministic-kernel switches.
    np.random.seed(21)
    original_op = new_op()
    copied_op = cloudpickle.loads(cloudpickle.dumps(original_op))  # what each Ray replica receives
    network = network_of(framework, [original_op])
    first = lambda_sequence(network, framework, 3)
    saved = network.state_dict()
    later = lambda_sequence(network, framework, 3)
    assert len(set(first + later)) >= 4  # fresh draws (CutMix's lambda counts pixels, so repeats can happen)
    np.random.seed(21)
    assert lambda_sequence(network_of(framework, [new_op()]), framework, 6) == first + later
    assert lambda_sequence(network_of(framework, [copied_op]), framework, 6) == first + later
    resumed = network_of(framework, [new_op()])
    resumed.load_state_dict(saved)
    assert lambda_sequence(resumed, framework, 3) == later


# ---------------------------------------------------------------------------------------------------------- errors
def test_argument_errors() -> None:
    for op_class in (MixUpBatch, CutMixBatch):
        with pytest.raises(ValueError, match="alpha must be a number greater than 0"):
            op_class(inputs="x", outputs=["y", "lam"], alpha=0)
        with pytest.raises(ValueError, match="needs 2 or 3 output keys"):
            op_class(inputs=["x", "y"], outputs=["x_mix"])
        with pytest.raises(ValueError, match="unknown keys"):
            op_class(inputs="x", outputs=["y", "lam"]).load_state_dict({"seed": 3})


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_data_errors(framework: str) -> None:
    with pytest.raises(TypeError, match="key 'label' holds"):
        run_steps(network_of(framework, [MixUpBatch(inputs=["x", "label"], outputs=["a", "b", "lam"])]),
                  {"x": np.ones((2, 3), np.float32), "label": np.array([0, 1])}, steps=1)
    with pytest.raises(ValueError, match="needs batches of images"):
        run_steps(network_of(framework, [CutMixBatch(inputs="x", outputs=["a", "lam"])]),
                  {"x": np.ones((2, 3), np.float32)}, steps=1)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_ops_shipped_to_replicas_mid_training_continue_the_same_draws(framework: str) -> None:
    """Ops serialised the way fe_ray.distributed ships them to Ray replicas (no Ray started), after some steps: every
    copy continues with the draws the original makes next."""
    serialization = pytest.importorskip("fe_ray.distributed.serialization")
    np.random.seed(8)
    ops = [MixUpBatch(inputs="x", outputs=["x_mix", "lam"], shared_beta=False),
           CutMixBatch(inputs="x", outputs=["x_cut", "lam_cut"])]
    original = network_of(framework, ops)
    batch = {"x": images(framework)}
    run_steps(original, batch, steps=2)
    payload = serialization.dumps_ops(original.ops, original.models)
    replicas = [network_of(framework, serialization.loads_ops(payload)) for _ in range(2)]
    sequences = [[(out["lam"].ravel().tolist(), float(out["lam_cut"])) for out in run_steps(network, batch, steps=3)]
                 for network in [original, *replicas]]
    assert sequences[0] == sequences[1] == sequences[2]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_fastestimator_17s_two_output_form_mixes_images_and_labels(framework: str) -> None:
    """FastEstimator 1.7's MixUpBatch / CutMixBatch take (x, y) and give (mixed x, mixed y), with no lambda output;
    CutMix weights the labels by the share of each image left uncovered. They were refused (one output too few)."""
    import tensorflow as tf
    import torch

    images = torch.rand(4, 3, 8, 8) if framework == "torch" else tf.random.uniform((4, 8, 8, 3))
    labels = torch.eye(3)[[0, 1, 2, 0]] if framework == "torch" else tf.one_hot([0, 1, 2, 0], 3)
    for op_class in (MixUpBatch, CutMixBatch):
        op = op_class(inputs=("x", "y"), outputs=("x", "y"))
        op.build(framework)
        mixed_x, mixed_y = op.forward([images, labels], {"mode": "train"})
        assert tuple(mixed_x.shape) == tuple(images.shape)
        rows = np.asarray(mixed_y)
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-6)  # each row a mix of two one-hot labels
        own = rows[np.arange(4), [0, 1, 2, 0]]
        assert np.all(own >= 0.5 - 1e-6)  # each sample keeps at least half of itself (lam folded to >= 0.5)

