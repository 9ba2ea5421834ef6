"""Random ops in a Pipeline draw from per-sample generators: the same seed gives the same augmented batches, other
epochs and passes give other draws, a resumed or threaded run gives exactly the serial, uninterrupted batches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import LambdaOp, NumpyOp
from fe_ray.op.numpyop.meta import OneOf, Sometimes
from fe_ray.op.numpyop.multivariate import HorizontalFlip, RandomCrop, VerticalFlip
from fe_ray.op.numpyop.randomness import RNG_KEY, op_generator, pass_entropy, sample_entropy
from fe_ray.op.numpyop.univariate import CoarseDropout, Normalize
from fe_ray.pipeline import Pipeline

N = 12


def _dataset() -> NumpyDataset:
    # Sample i is 100 * i + a 5x5 grid, so every crop and flip shows which sample and window it came from.
    images = (np.arange(N)[:, None, None] * 100 + np.arange(25).reshape(5, 5)).astype(np.float32)
    return NumpyDataset({"x": images, "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [RandomCrop(3, 3, image_in="x", mode="train"),
            Sometimes(HorizontalFlip(image_in="x")),
            OneOf(VerticalFlip(image_in="x"), Normalize("x", "x", mean=0.0, std=1.0, max_pixel_value=1.0)),
            CoarseDropout("x", "x", max_holes=1, max_height=1, max_width=1, fill_value=-1)]


def _pipeline(seed: int = 3, num_process: int = 0, ops: list[NumpyOp] | None = None) -> Pipeline:
    return Pipeline(_dataset(), batch_size=4, ops=_ops() if ops is None else ops, num_process=num_process,
                    shuffle_seed=seed)


def _batches(pipeline: Pipeline, epoch: int = 1, **kwargs: Any) -> list[dict[str, np.ndarray]]:
    with pipeline("train", epoch, **kwargs) as loader:
        return list(loader)


def _by_sample(batches: list[dict[str, np.ndarray]]) -> dict[int, np.ndarray]:
    return {int(y): x for batch in batches for y, x in zip(batch["y"], batch["x"])}


def _assert_same(first: list[dict[str, np.ndarray]], second: list[dict[str, np.ndarray]]) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a["y"], b["y"])
        np.testing.assert_array_equal(a["x"], b["x"])


def test_the_same_seed_gives_the_same_augmented_batches() -> None:
    first = _batches(_pipeline())
    _assert_same(first, _batches(_pipeline()))
    assert first[0]["x"].shape == (4, 3, 3)
    other = _by_sample(_batches(_pipeline(seed=4)))
    assert any(not np.array_equal(other[i], x) for i, x in _by_sample(first).items())


def test_a_samples_augmentation_is_the_documented_function_of_its_position() -> None:
    """Sample i of epoch e, pass 0, is cropped by a generator seeded with (seed, mode, ds_id, e, 0, i) and the op's
    position, whatever batch it lands in."""
    crop = RandomCrop(3, 3, image_in="x")
    images = _by_sample(_batches(_pipeline(ops=[crop]), epoch=2))
    source = _dataset()
    for index in range(N):
        entropy = sample_entropy(pass_entropy(3, "train", "", 2, 0), index)
        expected, = crop.forward([source[index]["x"]], {RNG_KEY: op_generator(entropy, 0)})
        np.testing.assert_array_equal(images[index], expected)


def test_other_epochs_and_passes_draw_anew() -> None:
    pipeline = _pipeline(ops=[RandomCrop(3, 3, image_in="x")])
    epoch1, epoch2 = _by_sample(_batches(pipeline, 1)), _by_sample(_batches(pipeline, 2))
    assert sum(not np.array_equal(epoch1[i], epoch2[i]) for i in range(N)) >= N // 2
    # Two passes in one epoch: batches 0-2 are pass 0, 3-5 pass 1, each holding every sample once.
    batches = _batches(pipeline, 1, steps_per_epoch=6)
    first_pass, second_pass = _by_sample(batches[:3]), _by_sample(batches[3:])
    assert sorted(first_pass) == sorted(second_pass) == list(range(N))
    assert any(not np.array_equal(first_pass[i], second_pass[i]) for i in range(N))
    for i, image in first_pass.items():  # every crop is still a 3x3 window of its own sample
        corner = int(image[0, 0]) - 100 * i
        np.testing.assert_array_equal(image, 100 * i + np.arange(25).reshape(5, 5)[corner // 5:corner // 5 + 3,
                                                                                       corner % 5:corner % 5 + 3])


def test_worker_threads_give_the_serial_batches() -> None:
    serial = _batches(_pipeline(), 2, steps_per_epoch=7)
    _assert_same(serial, _batches(_pipeline(num_process=2), 2, steps_per_epoch=7))


@pytest.mark.parametrize("num_process, consumed", [(0, 1), (0, 2), (2, 2)])
def test_a_restored_pipeline_continues_with_the_same_augmented_batches(num_process: int, consumed: int) -> None:
    expected = _batches(_pipeline(), 1) + _batches(_pipeline(), 2)
    first = _pipeline(num_process=num_process)
    with first("train", 1) as loader:
        iterator = iter(loader)
        head = [next(iterator) for _ in range(consumed)]
        state = first.state_dict()
    restored = _pipeline(num_process=num_process)
    restored.load_state_dict(state)
    _assert_same(head + _batches(restored, 1) + _batches(restored, 2), expected)


def test_each_random_op_has_its_own_stream() -> None:
    """Draws are keyed by the op's position: changing one op's probability leaves the next op's crops alone."""
    def crops(prob: float) -> dict[int, np.ndarray]:
        ops = [Sometimes(LambdaOp(lambda y: y, inputs="y", outputs="y"), prob=prob), RandomCrop(3, 3, image_in="x")]
        return _by_sample(_batches(_pipeline(ops=ops)))

    low, high = crops(0.1), crops(0.9)
    for i in range(N):
        np.testing.assert_array_equal(low[i], high[i])


def test_pipelines_without_random_ops_hand_ops_no_generator() -> None:
    seen: list[dict[str, Any]] = []

    class Spy(NumpyOp):
        is_random = False

        def forward(self, data: Any, state: dict[str, Any]) -> Any:
            seen.append(dict(state))
            return data

    class RandomSpy(Spy):
        is_random = True

    Pipeline(_dataset(), batch_size=2, ops=[Spy("y", "y"), RandomSpy("y", "y")], shuffle_seed=0).get_results()
    assert RNG_KEY not in seen[0] and isinstance(seen[1][RNG_KEY], np.random.Generator)
    assert {key: seen[1][key] for key in ("mode", "epoch", "ds_id")} == seen[0]


def test_transform_falls_back_to_numpy_global_generator() -> None:
    pipeline = _pipeline(ops=[RandomCrop(3, 3, image_in="x")])
    sample = {"x": _dataset()[5]["x"]}
    np.random.seed(11)
    first = [pipeline.transform(sample, "train")["x"] for _ in range(8)]
    np.random.seed(11)
    again = [pipeline.transform(sample, "train")["x"] for _ in range(8)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)  # reseeding numpy (as fe.enable_deterministic does) repeats the draws
    assert len({float(x[0, 0, 0]) for x in first}) > 1  # successive calls draw anew
