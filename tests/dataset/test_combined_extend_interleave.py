"""CombinedDataset, ExtendDataset and InterleaveDataset: FastEstimator 1.7's semantics, exact resume and threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import BatchDataset, CombinedDataset, ExtendDataset, InterleaveDataset, NumpyDataset
from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches, interrupted_run


def numbered(start: int, size: int, key: str = "x") -> NumpyDataset:
    return NumpyDataset({key: np.arange(start, start + size)})


class Jitter(NumpyOp):
    """A random op: adds a draw of its per-sample generator (in [0, 1), so int(x) is still the sample)."""

    is_random = True

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data + float(get_rng(state).random())


class AddConstant(NumpyOp):
    def __init__(self, value: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.value = value

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data + self.value


class Keyed:
    """A dataset drawing its samples by position (``fe_keyed``), like SiameseDirDataset."""

    fe_keyed = True

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"x": -1}

    def keyed_item(self, index: int, key: tuple[int, str, str, int, int]) -> dict[str, Any]:
        return {"x": 1000 * key[4] + index}


def flat(got: list[dict[str, list[Any]]], key: str = "x") -> list[Any]:
    return [value for batch in got for value in batch[key]]


# ---------------------------------------------------------------------------------------------------- Combined
def test_combined_concatenates_in_order_including_a_third_dataset() -> None:
    combined = CombinedDataset([numbered(0, 3), numbered(10, 4), numbered(20, 2)])
    assert len(combined) == 9
    assert [int(combined[i]["x"]) for i in range(9)] == [0, 1, 2, 10, 11, 12, 13, 20, 21]
    assert int(combined[-1]["x"]) == 21
    with pytest.raises(IndexError):
        combined[9]


def test_combined_in_a_pipeline_visits_every_sample_once_per_epoch() -> None:
    combined = CombinedDataset([numbered(0, 5), numbered(50, 6)])
    got = flat(batches(Pipeline(train_data=combined, batch_size=4, shuffle_seed=2), range(1, 2)))
    assert sorted(got) == [*range(5), *range(50, 56)] and got != sorted(got)


def test_combined_forwards_keyed_reads_and_checks_its_inputs() -> None:
    combined = CombinedDataset([numbered(0, 2), Keyed()])
    assert combined.fe_keyed
    assert combined.keyed_item(3, (0, "train", "", 1, 7)) == {"x": 7001}
    assert int(combined.keyed_item(1, (0, "train", "", 1, 7))["x"]) == 1
    with pytest.raises(ValueError, match="same keys"):
        CombinedDataset([numbered(0, 2), numbered(0, 2, key="y")])
    with pytest.raises(ValueError, match="at least 1 dataset"):
        CombinedDataset([])
    with pytest.raises(ValueError, match="whole batches"):
        CombinedDataset([numbered(0, 2), BatchDataset([numbered(0, 2), numbered(5, 2)], [1, 1])])


# ---------------------------------------------------------------------------------------------------- Extend
def test_extend_streams_passes_and_keeps_the_length() -> None:
    extended = ExtendDataset(numbered(0, 10), spoof_length=25)
    assert len(extended) == 10 and extended[3] == {"x": 3}
    got = batches(Pipeline(train_data=extended, batch_size=4, shuffle_seed=1), range(1, 2))
    assert [len(batch["x"]) for batch in got] == [4] * 6 + [1]  # ceil(25 / 4) batches, spanning passes
    stream = flat(got)
    assert sorted(stream[:10]) == list(range(10)) and sorted(stream[10:20]) == list(range(10))
    assert len(set(stream[20:])) == 5 and stream[:10] != stream[10:20]  # each pass a fresh permutation


def test_extend_unshuffled_stream_and_contraction() -> None:
    pipeline = Pipeline(eval_data=ExtendDataset(numbered(0, 4), 10), batch_size=3)
    with pipeline("eval", 1) as loader:
        assert flat([{"x": b["x"].tolist()} for b in loader]) == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    short = ExtendDataset(numbered(0, 10), 6)
    assert [len(b["x"]) for b in batches(Pipeline(train_data=short, batch_size=4), range(1, 2))] == [4, 2]
    dropped = Pipeline(train_data=short, batch_size=4, drop_last=True)
    assert [len(b["x"]) for b in batches(dropped, range(1, 2))] == [4]
    with Pipeline(train_data=short, batch_size=4)("train", 1, steps_per_epoch=5) as loader:
        assert [len(b["x"]) for b in loader] == [4] * 5  # steps_per_epoch wins, as in FastEstimator


def test_extend_to_its_own_length_equals_the_plain_dataset() -> None:
    def make(data: Any) -> Pipeline:
        return Pipeline(train_data=data, batch_size=3, ops=[Jitter(inputs="x", outputs="x")], shuffle_seed=4)

    data = NumpyDataset({"x": np.arange(8.0)})
    assert batches(make(ExtendDataset(data, 8)), range(1, 3)) == batches(make(data), range(1, 3))


def test_extend_of_a_batch_dataset_sets_the_batches_per_epoch() -> None:
    inner = BatchDataset([numbered(0, 4), numbered(10, 4)], num_samples=[1, 1])
    assert len(inner) == 4
    got = batches(Pipeline(train_data=ExtendDataset(inner, 9), shuffle_seed=0), range(1, 2))
    assert len(got) == 9 and all(len(batch["x"]) == 2 for batch in got)


def test_extend_of_an_interleave_dataset_sets_the_batches_per_epoch() -> None:
    inner = InterleaveDataset([numbered(0, 4), numbered(10, 4)])
    inner.set_batch_sizes([2, 2])
    with Pipeline(eval_data=ExtendDataset(inner, 7))("eval", 1) as loader:
        got = [b["x"].tolist() for b in loader]
    assert got == [[0, 1], [10, 11], [2, 3], [12, 13], [0, 1], [10, 11], [2, 3]]  # a second pass after 4 batches


def test_extend_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        ExtendDataset(numbered(0, 3), 0)
    with pytest.raises(TypeError, match="int"):
        ExtendDataset(numbered(0, 3), 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="another ExtendDataset"):
        ExtendDataset(ExtendDataset(numbered(0, 3), 4), 5)


@pytest.mark.parametrize("num_process", [0, 2])
def test_extend_resume_and_threads_are_exact(num_process: int) -> None:
    def make(threads: int = num_process) -> Pipeline:
        return Pipeline(train_data=ExtendDataset(NumpyDataset({"x": np.arange(7.0)}), 17), batch_size=3,
                        ops=[Jitter(inputs="x", outputs="x")], shuffle_seed=8, num_process=threads)

    uninterrupted = batches(make(0), range(1, 3))
    assert interrupted_run(make, epochs=2, stop_epoch=2, taken=3) == uninterrupted
    assert batches(make(), range(1, 3)) == uninterrupted
    draws = [x - int(x) for x in flat(uninterrupted)]
    assert len(set(draws)) == len(draws)  # a sample read in two passes is augmented differently


# ---------------------------------------------------------------------------------------------------- Interleave
def expected_order(lengths: list[int], pattern: list[int], sizes: list[int]) -> list[tuple[int, list[int]]]:
    """FastEstimator's unshuffled plan, written out independently: per step, (dataset, its sample positions)."""
    frequency = [pattern.count(d) for d in range(len(lengths))]
    cycles = min(n // (f * s) for n, f, s in zip(lengths, frequency, sizes))
    cursor = [0] * len(lengths)
    plan = []
    for _ in range(cycles):
        for d in pattern:
            plan.append((d, list(range(cursor[d], cursor[d] + sizes[d]))))
            cursor[d] += sizes[d]
    return plan


def test_interleave_follows_the_pattern_with_per_dataset_batch_sizes() -> None:
    dataset = InterleaveDataset({"a": numbered(0, 11), "b": numbered(100, 9)}, pattern=["a", "a", "b"])
    assert len(dataset) == 3 * 5  # FastEstimator's default batch size 1: min(11 // 2, 9 // 1) cycles of 3
    dataset.set_batch_sizes([2, 3])
    pipeline = Pipeline(eval_data=dataset)  # the dataset sizes its batches: no batch_size needed
    with pipeline("eval", 1) as loader:
        got = [b["x"].tolist() for b in loader]
    plan = expected_order([11, 9], [0, 0, 1], [2, 3])
    assert len(got) == len(plan) == 6
    assert got == [[(0, 100)[d] + i for i in positions] for d, positions in plan]


def test_interleave_shuffles_each_dataset_without_repeats_and_uses_the_pipeline_batch_size() -> None:
    dataset = InterleaveDataset([numbered(0, 12), numbered(100, 8)])
    pipeline = Pipeline(train_data=dataset, batch_size=2, shuffle_seed=3)
    got = [b["x"] for b in batches(pipeline, range(1, 2))]
    assert len(got) == 2 * min(12 // 2, 8 // 2)
    assert [int(batch[0] >= 100) for batch in got] == [0, 1] * 4
    first = [x for batch in got[0::2] for x in batch]
    second = [x for batch in got[1::2] for x in batch]
    assert len(set(first)) == 8 and set(first) <= set(range(12)) and sorted(second) == list(range(100, 108))
    assert first != sorted(first) or second != sorted(second)
    assert [b["x"] for b in batches(pipeline, range(2, 3))] != got  # a new epoch, new permutations


def test_interleave_names_select_ops_and_datasets_may_differ_in_keys() -> None:
    dataset = InterleaveDataset({"a": numbered(0, 4), "b": numbered(10, 4, key="z")})
    ops = [AddConstant(1000, inputs="x", outputs="x", ds_id="a"), AddConstant(500, inputs="z", outputs="z", ds_id="b")]
    with Pipeline(eval_data=dataset, batch_size=2, ops=ops)("eval", 1) as loader:
        got = [{k: v.tolist() for k, v in b.items()} for b in loader]
    assert got == [{"x": [1000, 1001]}, {"z": [510, 511]}, {"x": [1002, 1003]}, {"z": [512, 513]}]


def test_interleave_counts_an_extended_dataset_as_its_spoof_length() -> None:
    dataset = InterleaveDataset([numbered(0, 10), ExtendDataset(numbered(100, 3), 10)])
    with Pipeline(eval_data=dataset, batch_size=5)("eval", 1) as loader:
        got = [b["x"].tolist() for b in loader]
    assert got == [[0, 1, 2, 3, 4], [100, 101, 102, 100, 101], [5, 6, 7, 8, 9], [102, 100, 101, 102, 100]]


def test_interleave_indexing_split_and_errors() -> None:
    dataset = InterleaveDataset({"a": numbered(0, 10), "b": numbered(100, 10)}, pattern=["b", "a"])
    assert dataset[0] == [{"x": 100}] and dataset[1] == [{"x": 0}]
    part = dataset.split(0.2, seed=0)
    assert isinstance(part, InterleaveDataset) and part.tags == ["a", "b"] and part.pattern == [1, 0]
    assert [len(ds) for ds in part.datasets] == [2, 2] and [len(ds) for ds in dataset.datasets] == [8, 8]
    with pytest.raises(ValueError, match="leaves out"):
        InterleaveDataset([numbered(0, 4), numbered(0, 4), numbered(0, 4)], pattern=[0, 1])
    with pytest.raises(ValueError, match="not datasets"):
        InterleaveDataset({"a": numbered(0, 4), "b": numbered(0, 4)}, pattern=["a", "c"])
    with pytest.raises(ValueError, match="2 or more"):
        InterleaveDataset([numbered(0, 4), numbered(0, 4)], pattern=[0])
    with pytest.raises(ValueError, match="whole batches"):
        InterleaveDataset([numbered(0, 4), BatchDataset([numbered(0, 2), numbered(5, 2)], [1, 1])])
    with pytest.raises(ValueError, match="too few samples"):
        with Pipeline(train_data=InterleaveDataset([numbered(0, 4), numbered(0, 9)]), batch_size=5)("train", 1):
            pass
    # Without any batch size each dataset gives batches of one sample, as in FastEstimator.
    with Pipeline(train_data=InterleaveDataset([numbered(0, 2), numbered(10, 2)]))("train", 1, shuffle=False) as loader:
        assert [batch["x"].tolist() for batch in loader] == [[0], [10], [1], [11]]


@pytest.mark.parametrize("num_process", [0, 2])
def test_interleave_resume_and_threads_are_exact(num_process: int) -> None:
    def make(threads: int = num_process) -> Pipeline:
        dataset = InterleaveDataset({"a": NumpyDataset({"x": np.arange(9.0)}),
                                     "b": ExtendDataset(NumpyDataset({"x": np.arange(100.0, 104.0)}), 8)},
                                    pattern=["a", "b", "b"])
        dataset.set_batch_sizes([3, 2])
        return Pipeline(train_data=dataset, ops=[Jitter(inputs="x", outputs="x")], shuffle_seed=5,
                        num_process=threads)

    uninterrupted = batches(make(0), range(1, 3))
    assert len(uninterrupted) == 2 * 3 * min(9 // 3, 8 // 4)
    assert interrupted_run(make, epochs=2, stop_epoch=2, taken=4) == uninterrupted
    assert batches(make(), range(1, 3)) == uninterrupted
    draws = [x - int(x) for x in flat(uninterrupted)]
    assert len(set(draws)) == len(draws)


def test_interleave_steps_beyond_a_pass_and_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    dataset = InterleaveDataset([numbered(0, 4), numbered(10, 4)])
    pipeline = Pipeline(train_data=dataset, batch_size=2, shuffle_seed=0,
                        ops=[AddConstant(0, inputs="x", outputs="x")])
    with pipeline("train", 1, steps_per_epoch=6) as loader:
        got = [b["x"].tolist() for b in loader]
    assert len(got) == 6
    assert sorted(got[0] + got[2]) == [0, 1, 2, 3] and sorted(got[1] + got[3]) == [10, 11, 12, 13]
    # Batches 5 and 6 start a second pass: each dataset again, drawn from a new permutation.
    assert set(got[4]) <= {0, 1, 2, 3} and set(got[5]) <= {10, 11, 12, 13}
    pipeline.benchmark(num_steps=4, log_interval=2)
    assert "AddConstant" in capsys.readouterr().out


def test_fe_namespace_exports_the_new_datasets() -> None:
    assert fe.dataset.CombinedDataset is CombinedDataset and fe.dataset.InterleaveDataset is InterleaveDataset
    assert fe.dataset.ExtendDataset is ExtendDataset
