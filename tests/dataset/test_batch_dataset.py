"""BatchDataset: batches composed from several datasets, seeded by their position (exact resume, threads)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import BatchDataset, NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches, interrupted_run


def labelled(start: int, size: int, label: int) -> NumpyDataset:
    return NumpyDataset({"x": np.arange(start, start + size), "y": np.full(size, label)})


class Jitter(NumpyOp):
    """A random op: adds a draw of its per-sample generator."""

    is_random = True

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data + float(get_rng(state).random())


def test_fixed_counts_draw_each_dataset_without_replacement() -> None:
    # 10 samples at 2 per batch and 20 at 3 per batch: 7 batches (the larger dataset, drawn once, sets the length).
    dataset = BatchDataset([labelled(0, 10, 0), labelled(100, 20, 1)], num_samples=[2, 3])
    assert len(dataset) == 7
    pipeline = Pipeline(train_data=dataset, batch_size=None, shuffle_seed=5)
    got = batches(pipeline, range(1, 2))
    assert len(got) == 7
    assert all(sorted(batch["y"]) == [0, 0, 1, 1, 1] for batch in got)
    # the samples of a batch in a random order, as FastEstimator shuffles them (not in blocks per dataset)
    assert any(batch["y"] != [0, 0, 1, 1, 1] for batch in got)
    first = [x for batch in got[:5] for x in batch["x"] if x < 100]  # the first 5 batches read the 10 samples once
    assert sorted(first) == list(range(10))
    second = [x for batch in got[:6] for x in batch["x"] if x >= 100]  # 18 of the 20, none twice
    assert len(set(second)) == 18 and set(second) <= set(range(100, 120))
    assert first != list(range(10))  # shuffled
    assert batches(Pipeline(train_data=dataset, batch_size=None, shuffle_seed=5), range(1, 2)) == got
    assert batches(Pipeline(train_data=dataset, batch_size=None, shuffle_seed=6), range(1, 2)) != got
    assert batches(pipeline, range(2, 3)) != got  # a new epoch draws anew


def test_probability_mode_mixes_in_proportion() -> None:
    dataset = BatchDataset([labelled(0, 200, 0), labelled(1000, 200, 1)], num_samples=10, probability=[0.8, 0.2])
    assert len(dataset) == 100  # ceil(200 / 10 / 0.2)
    got = batches(Pipeline(train_data=dataset, batch_size=8, shuffle_seed=1), range(1, 2))  # batch_size ignored
    assert all(len(batch["y"]) == 10 for batch in got)
    labels = np.concatenate([batch["y"] for batch in got])
    assert 0.75 < float(np.mean(labels == 0)) < 0.85
    assert len({tuple(batch["y"]) for batch in got}) > 1  # the split varies from batch to batch


def test_disjoint_keys_pair_samples() -> None:
    a = NumpyDataset({"a": np.arange(6)})
    b = NumpyDataset({"b": np.arange(10, 14)})
    dataset = BatchDataset([a, b], num_samples=2)
    assert len(dataset) == 3
    got = batches(Pipeline(train_data=dataset, shuffle_seed=0), range(1, 2))
    assert [sorted(batch) for batch in got] == [["a", "b"]] * 3
    assert sorted(x for batch in got for x in batch["a"]) == list(range(6))
    assert dataset[0] == dataset[0] and len(dataset[0]) == 2 and set(dataset[0][0]) == {"a", "b"}


@pytest.mark.parametrize("num_process", [0, 2])
def test_resume_and_threads_give_the_uninterrupted_serial_batches(num_process: int) -> None:
    def make(threads: int = num_process) -> Pipeline:
        dataset = BatchDataset([labelled(0, 9, 0), labelled(50, 12, 1)], num_samples=4, probability=[0.5, 0.5])
        return Pipeline(train_data=dataset, ops=[Jitter(inputs="x", outputs="x")], shuffle_seed=3,
                        num_process=threads)

    uninterrupted = batches(make(0), range(1, 3))
    assert interrupted_run(make, epochs=2, stop_epoch=2, taken=2) == uninterrupted
    assert batches(make(), range(1, 3)) == uninterrupted
    draws = [x - int(x) for batch in uninterrupted for x in batch["x"]]
    assert len(set(draws)) == len(draws)  # the random op ran, with a generator of its own for every sample


def test_steps_per_epoch_beyond_one_pass_draws_a_new_pass() -> None:
    pipeline = Pipeline(train_data=BatchDataset([labelled(0, 4, 0), labelled(10, 4, 1)], num_samples=[2, 2]),
                        shuffle_seed=0)
    with pipeline("train", 1, steps_per_epoch=4) as loader:
        got = [batch["x"].tolist() for batch in loader]
    assert len(got) == 4 and sorted(got[0] + got[1]) == [0, 1, 2, 3, 10, 11, 12, 13]
    assert got[2:] != got[:2]


def test_bad_arguments_are_named() -> None:
    a, b = labelled(0, 4, 0), labelled(10, 4, 1)
    with pytest.raises(ValueError, match="two or more datasets"):
        BatchDataset([a], num_samples=[1])
    with pytest.raises(ValueError, match="one num_samples per dataset"):
        BatchDataset([a, b], num_samples=[1, 2, 3])
    with pytest.raises(ValueError, match="positive int"):
        BatchDataset([a, b], num_samples=[1, 0])
    with pytest.raises(ValueError, match="sum to 1"):
        BatchDataset([a, b], num_samples=4, probability=[0.5, 0.6])
    with pytest.raises(ValueError, match="all the same keys or no key in common"):
        BatchDataset([a, NumpyDataset({"x": np.arange(3), "z": np.arange(3)})], num_samples=[1, 1])
    assert fe.dataset.BatchDataset is BatchDataset
    halves = BatchDataset([labelled(0, 10, 0), labelled(10, 10, 1)], num_samples=[1, 1]).split(0.5, seed=0)
    assert isinstance(halves, BatchDataset) and [len(ds) for ds in halves.datasets] == [5, 5]


def test_a_batch_size_dict_may_give_none_to_a_batch_dataset_mode() -> None:
    """A BatchDataset makes its own batches, so a {mode: batch_size} dict may say None for its mode (as a Pipeline
    without batch_size may); None for a mode whose data needs batching stays an error."""
    first = NumpyDataset({"x": np.arange(20, dtype=np.float32).reshape(10, 2)})
    second = NumpyDataset({"x": np.arange(20, 40, dtype=np.float32).reshape(10, 2)})
    pipeline = Pipeline(train_data=BatchDataset(datasets=[first, second], num_samples=[2, 1]), eval_data=first,
                        batch_size={"train": None, "eval": 4})
    assert pipeline.get_results(mode="train")["x"].shape == (3, 2)
    assert pipeline.get_results(mode="eval")["x"].shape == (4, 2)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        Pipeline(train_data=first, batch_size={"train": None})


def test_split_stratifies_the_datasets_that_hold_the_key() -> None:
    """As FastEstimator's BatchDataset: stratify goes to the datasets whose samples have the class key."""
    labelled = NumpyDataset({"x": np.arange(20), "y": np.array([0] * 10 + [1] * 10)})
    plain = NumpyDataset({"z": np.arange(100, 120)})
    combined = BatchDataset([labelled, plain], num_samples=[1, 1])
    part = combined.split(0.2, stratify="y", seed=0)
    first, second = part.datasets
    assert sorted(first["y"].tolist()) == [0, 0, 1, 1] and len(second) == 4


def test_a_batch_dataset_inside_another_names_the_fix() -> None:
    inner = BatchDataset([labelled(0, 4, 0), labelled(10, 4, 1)], num_samples=[1, 1])
    with pytest.raises(ValueError, match=r"cannot draw from dataset 0 \(BatchDataset\), whose items are whole batches"):
        BatchDataset([inner, labelled(20, 4, 2)], num_samples=[1, 2])
