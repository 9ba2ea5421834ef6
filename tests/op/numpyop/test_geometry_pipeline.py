"""The random geometric ops in a Pipeline: worker threads and a restored run give the serial batches, each sample's
transform is the documented function of its position, and image and mask stay aligned through the chain."""

from __future__ import annotations

from typing import Any

import numpy as np

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.multivariate import (
    Flip,
    RandomResizedCrop,
    RandomRotate90,
    RandomScale,
    RandomSizedCrop,
    Resize,
    ShiftScaleRotate,
)
from fe_ray.op.numpyop.randomness import RNG_KEY, op_generator, pass_entropy, sample_entropy
from fe_ray.pipeline import Pipeline

N = 10


def _dataset() -> NumpyDataset:
    images = (np.arange(N)[:, None, None] * 100 + np.arange(64).reshape(8, 8)).astype(np.float32)
    return NumpyDataset({"x": images, "m": images.astype(np.int64), "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    # Nearest interpolation everywhere, so the mask (always nearest) must equal the image pixel for pixel.
    keys: dict[str, Any] = {"image_in": "x", "mask_in": "m", "interpolation": 0}
    return [RandomScale(0.3, **keys), Resize(8, 8, **keys), RandomSizedCrop((4, 8), 6, 6, **keys),
            Flip(image_in="x", mask_in="m"), RandomRotate90(image_in="x", mask_in="m"),
            ShiftScaleRotate(border_mode=0, **keys), RandomResizedCrop(5, 5, **keys)]


def _batches(num_process: int = 0, epoch: int = 1) -> list[dict[str, Any]]:
    pipeline = Pipeline(_dataset(), batch_size=4, ops=_ops(), num_process=num_process, shuffle_seed=5)
    with pipeline("train", epoch) as loader:
        return list(loader)


def test_threads_give_the_serial_batches_and_masks_stay_aligned() -> None:
    serial, threaded = _batches(), _batches(num_process=2)
    assert len(serial) == len(threaded) == 3
    for a, b in zip(serial, threaded):
        for key in ("x", "m", "y"):
            np.testing.assert_array_equal(a[key], b[key])
        assert a["x"].shape[1:] == (5, 5)
        np.testing.assert_array_equal(a["m"], a["x"])
    other_epoch = _batches(epoch=2)
    assert any(not np.array_equal(a["x"], b["x"]) for a, b in zip(serial, other_epoch))


def test_each_sample_is_transformed_by_its_own_generators() -> None:
    ops = _ops()
    by_sample = {int(y): x for batch in _batches() for y, x in zip(batch["y"], batch["x"])}
    for index in range(N):
        entropy = sample_entropy(pass_entropy(5, "train", "", 1, 0), index)
        data = [_dataset()[index]["x"], _dataset()[index]["m"]]
        for position, op in enumerate(ops):
            data = op.forward(data, {RNG_KEY: op_generator(entropy, position)} if op.is_random else {})
        np.testing.assert_array_equal(by_sample[index], data[0])
