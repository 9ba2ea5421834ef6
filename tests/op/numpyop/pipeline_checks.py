"""A check the random-op test modules share: in a Pipeline, random NumpyOps are a pure function of the sample's
position (serial and threaded loading agree, each sample equals its ops replayed by hand with the generators the
Loader derives, epochs differ), and a run resumed mid-epoch gives the uninterrupted run's batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import RNG_KEY, op_generator, pass_entropy, sample_entropy
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import interrupted_run


def _epoch(pipeline: Pipeline, epoch: int = 1) -> list[dict[str, np.ndarray]]:
    with pipeline("train", epoch) as loader:
        return list(loader)


def assert_position_seeded(make_dataset: Callable[[], NumpyDataset], make_ops: Callable[[], list[NumpyOp]],
                           seed: int, batch_size: int = 2) -> None:
    """Check the ops ``make_ops`` builds over the dataset ``make_dataset`` builds (keys 'x', and 'y' = the sample's
    index) as the module doc says."""

    def pipeline(num_process: int = 0) -> Pipeline:
        return Pipeline(make_dataset(), batch_size=batch_size, ops=make_ops(), num_process=num_process,
                        shuffle_seed=seed)

    serial, threaded = _epoch(pipeline()), _epoch(pipeline(num_process=2))
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a["x"], b["x"])
    by_sample = {int(y): x for batch in serial for y, x in zip(batch["y"], batch["x"])}
    ops, dataset = make_ops(), make_dataset()
    for index in range(len(dataset)):
        entropy = sample_entropy(pass_entropy(seed, "train", "", 1, 0), index)
        data: Any = [dataset[index]["x"]]
        for position, op in enumerate(ops):
            data = op.forward(data, {RNG_KEY: op_generator(entropy, position)})
        np.testing.assert_array_equal(by_sample[index], data[0])
    assert any(not np.array_equal(a["x"], b["x"]) for a, b in zip(serial, _epoch(pipeline(), epoch=2)))

    uninterrupted = [{key: np.asarray(value).tolist() for key, value in batch.items()}
                     for epoch in (1, 2) for batch in _epoch(pipeline(), epoch)]
    assert interrupted_run(pipeline, epochs=2, stop_epoch=2, taken=1) == uninterrupted
