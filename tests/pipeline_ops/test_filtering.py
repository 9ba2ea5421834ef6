"""Filtering samples in a Pipeline (RemoveIf / FilteredData): filtered samples never appear, replacements keep the
batch size and the epoch's steps, and batch ``b`` stays a pure function of ``b`` (resumed and threaded epochs give
the same batches)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import BatchDataset, ExtendDataset, InterleaveDataset, NumpyDataset
from fe_ray.op.numpyop import Batch, LambdaOp, NumpyOp, RemoveIf
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.pipeline import Pipeline
from fe_ray.types import FilteredData

N = 20


def _ds(n: int = N, offset: int = 0) -> NumpyDataset:
    return NumpyDataset({"x": np.arange(offset, offset + n, dtype=np.int64)})


def _threes(replacement: bool = True) -> RemoveIf:
    return RemoveIf(lambda x: x % 3 == 0, replacement=replacement, inputs="x")


def _xs(pipeline: Pipeline, epoch: int = 1, **kwargs: Any) -> list[list[int]]:
    with pipeline("train", epoch, **kwargs) as loader:
        return [np.asarray(batch["x"]).tolist() for batch in loader]


class _Noise(NumpyOp):
    """A random op: writes a draw of its per-sample generator to "n", and a filter may read it."""

    is_random = True

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="n")

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return get_rng(state).integers(1000)


def _resumed(make: Any, taken: int, epochs: int = 2) -> list[list[int]]:
    """``taken`` batches of epoch 1, a checkpoint, then the rest of the epochs in a restored Pipeline."""
    first = make()
    with first("train", 1) as loader:
        iterator = iter(loader)
        head = [np.asarray(next(iterator)["x"]).tolist() for _ in range(taken)]
        state = first.state_dict()
    restored = make()
    restored.load_state_dict(state)
    return head + [xs for epoch in range(1, epochs + 1) for xs in _xs(restored, epoch)]


@pytest.mark.parametrize("shuffle", [True, False])
def test_replacement_keeps_full_batches_and_the_steps_without_filtered_samples(shuffle: bool) -> None:
    pipeline = Pipeline(_ds(), batch_size=4, ops=_threes(), shuffle_seed=5)
    batches = _xs(pipeline, shuffle=shuffle)
    assert [len(xs) for xs in batches] == [4] * 5  # as FastEstimator: 20 samples, 5 full steps
    flat = [x for xs in batches for x in xs]
    assert not any(x % 3 == 0 for x in flat)
    assert all(len(set(xs)) == 4 for xs in batches)  # no sample twice in one batch
    if not shuffle:  # the kept samples stay where the plan put them; only the filtered ones are replaced
        for number, xs in enumerate(batches):
            for position, x in enumerate(range(4 * number, 4 * number + 4)):
                if x % 3:
                    assert xs[position] == x
    assert _xs(Pipeline(_ds(), batch_size=4, ops=_threes(), shuffle_seed=5), shuffle=shuffle) == batches


def test_without_replacement_batches_lose_their_filtered_samples() -> None:
    batches = _xs(Pipeline(_ds(), batch_size=4, ops=_threes(False)), shuffle=False)
    assert batches == [[1, 2], [4, 5, 7], [8, 10, 11], [13, 14], [16, 17, 19]]


def test_a_batch_left_empty_is_skipped_and_the_epoch_ends_without_a_stale_position() -> None:
    pipeline = Pipeline(_ds(8), batch_size=2, ops=RemoveIf(lambda x: x < 2 or x > 5, replacement=False, inputs="x"))
    with pipeline("train", 1, shuffle=False) as loader:
        assert len(loader) == 4  # the planned steps; the empty first and last batches are passed over
        assert [batch["x"].tolist() for batch in loader] == [[2, 3], [4, 5]]
    assert pipeline.state_dict()["positions"] == {}


def test_ops_after_the_filter_do_not_see_filtered_samples() -> None:
    seen: list[int] = []
    pipeline = Pipeline(_ds(), batch_size=4, ops=[_threes(), LambdaOp(lambda x: seen.append(int(x)) or x, "x", "x")])
    _xs(pipeline)
    assert seen and not any(x % 3 == 0 for x in seen)


def test_mixed_replacement_flags_replace_or_drop_per_sample() -> None:
    ops = [RemoveIf(lambda x: x == 1, replacement=False, inputs="x"), RemoveIf(lambda x: x == 2, inputs="x")]
    batches = _xs(Pipeline(_ds(8), batch_size=4, ops=ops), shuffle=False)
    assert len(batches[0]) == 3 and batches[0][0] == 0 and batches[0][2] == 3 and batches[0][1] not in (1, 2)
    assert batches[1] == [4, 5, 6, 7]


@pytest.mark.parametrize("replacement", [True, False])
def test_threads_give_the_serial_batches(replacement: bool) -> None:
    def make(num_process: int) -> Pipeline:
        # The filter reads a random draw, so replacements' own draws count too.
        return Pipeline(_ds(), batch_size=3, ops=[_Noise(), RemoveIf(lambda n: n % 3 == 0, replacement, "n")],
                        shuffle_seed=2, num_process=num_process)

    def batches(pipeline: Pipeline) -> list[list[list[int]]]:
        with pipeline("train", 1, steps_per_epoch=9) as loader:
            return [[batch["x"].tolist(), batch["n"].tolist()] for batch in loader]

    serial = batches(make(0))
    assert serial == batches(make(2)) and len(serial) == 9
    assert not any(n % 3 == 0 for _, ns in serial for n in ns)


@pytest.mark.parametrize("replacement, taken", [(True, 2), (False, 1), (False, 3)])
@pytest.mark.parametrize("num_process", [0, 2])
def test_a_resumed_epoch_gives_the_uninterrupted_batches(replacement: bool, taken: int, num_process: int) -> None:
    # Samples below 4 are filtered: with replacement=False, planned batch 1 (samples 0 and 2 with this seed) is
    # skipped altogether.
    def make() -> Pipeline:
        return Pipeline(_ds(12), batch_size=2, shuffle_seed=3, num_process=num_process,
                        ops=RemoveIf(lambda x: x < 4, replacement=replacement, inputs="x"))

    expected = _xs(make(), 1) + _xs(make(), 2)
    assert _resumed(make, taken) == expected
    assert all(x >= 4 for xs in expected for x in xs)


def test_a_checkpoint_counts_the_skipped_batches() -> None:
    pipeline = Pipeline(_ds(12), batch_size=2, shuffle_seed=3, ops=RemoveIf(lambda x: x < 4, False, "x"))
    with pipeline("train", 1) as loader:
        assert loader.batch_indices(1).tolist() == [0, 2]  # planned batch 1 is filtered away
        iterator = iter(loader)
        next(iterator), next(iterator)
        assert pipeline.state_dict()["positions"] == {"train": {"": {"epoch": 1, "batches": 3}}}


def test_a_resume_replays_a_fn_drawing_from_numpys_global_generator() -> None:
    def make() -> Pipeline:
        return Pipeline(_ds(), batch_size=4, shuffle_seed=3,
                        ops=RemoveIf(lambda x: np.random.rand() < 0.3, replacement=False, inputs="x"))

    expected = _xs(make(), 1) + _xs(make(), 2)
    assert _resumed(make, 2) == expected
    assert sum(map(len, expected)) < 2 * N  # some samples were dropped


def test_every_sample_filtered_raises_naming_the_op() -> None:
    pipeline = Pipeline(_ds(6), batch_size=2, ops=RemoveIf(lambda x: True, inputs="x"))
    with pytest.raises(ValueError, match="RemoveIf filtered out all of the 12 samples drawn in a row"):
        _xs(pipeline)


def test_every_batch_filtered_raises_naming_the_op() -> None:
    pipeline = Pipeline(_ds(6), batch_size=2, ops=[Batch(), RemoveIf(lambda x: True, inputs="x")])
    with pytest.raises(ValueError, match=r"RemoveIf filtered out all of the 100 batches drawn in a row to replace "
                                         r"the filtered batch \(mode 'train', epoch 1, batch 0\)"):
        _xs(pipeline)


@pytest.mark.parametrize("num_process", [0, 2])
def test_a_batch_filter_after_a_batch_op_replaces_the_whole_batch(num_process: int) -> None:
    def make() -> Pipeline:
        return Pipeline(_ds(), ops=[Batch(batch_size=4), RemoveIf(lambda x: x.sum() > 40, inputs="x")],
                        shuffle_seed=1, num_process=num_process)

    batches = _xs(make(), shuffle=False)
    assert [len(xs) for xs in batches] == [4] * 5 and all(sum(xs) <= 40 for xs in batches)
    assert batches[:3] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert _resumed(make, 1, epochs=1) == _xs(make())


def test_a_batch_filter_without_replacement_drops_the_step() -> None:
    pipeline = Pipeline(_ds(), ops=[Batch(batch_size=4), RemoveIf(lambda x: x.sum() > 40, replacement=False,
                                                                  inputs="x")])
    assert _xs(pipeline, shuffle=False) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]  # as FastEstimator


class _FilterBatch(NumpyOp):
    """A user's op whose forward_batch returns FilteredData for a batch holding sample 5."""

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return FilteredData() if 5 in data else data


def test_a_users_forward_batch_may_filter_the_batch() -> None:
    batches = _xs(Pipeline(_ds(), ops=[Batch(batch_size=4), _FilterBatch()]), shuffle=False)
    assert len(batches) == 5 and batches[0] == [0, 1, 2, 3] and all(5 not in xs for xs in batches)


def test_a_batch_dataset_filtering_everything_raises() -> None:
    dataset = BatchDataset([_ds(4), _ds(4, offset=100)], num_samples=[1, 1])
    with pytest.raises(ValueError, match="RemoveIf filtered out all of the 100 batches"):
        _xs(Pipeline(dataset, ops=RemoveIf(lambda x: x >= 100, inputs="x")))


def test_a_batch_dataset_loses_the_whole_batch_of_a_filtered_sample() -> None:
    dataset = BatchDataset([_ds(10), _ds(10, offset=100)], num_samples=[2, 2])
    batches = _xs(Pipeline(dataset, ops=RemoveIf(lambda x: x == 3 or x == 104, inputs="x"), shuffle_seed=4))
    assert len(batches) == len(dataset) and all(len(xs) == 4 for xs in batches)
    assert all(3 not in xs and 104 not in xs for xs in batches)
    dropped = _xs(Pipeline(dataset, ops=RemoveIf(lambda x: x == 3, replacement=False, inputs="x"), shuffle_seed=4))
    assert len(dropped) == len(dataset) - 1 and all(3 not in xs for xs in dropped)


def test_extended_and_interleaved_datasets_never_show_filtered_samples() -> None:
    extended = _xs(Pipeline(ExtendDataset(_ds(10), spoof_length=25), batch_size=4, ops=_threes()))
    assert [len(xs) for xs in extended] == [4] * 6 + [1] and not any(x % 3 == 0 for xs in extended for x in xs)
    interleave = InterleaveDataset([_ds(9), _ds(9, offset=100)])
    batches = _xs(Pipeline(interleave, batch_size=3, ops=_threes()))
    assert all(len(xs) == 3 for xs in batches) and not any(x % 3 == 0 for xs in batches for x in xs)


def test_unbatched_samples_are_replaced_or_skipped() -> None:
    replaced = _xs(Pipeline(_ds(6), ops=_threes()), shuffle=False)
    assert len(replaced) == 6 and not any(x % 3 == 0 for x in replaced)
    assert _xs(Pipeline(_ds(6), ops=_threes(False)), shuffle=False) == [1, 2, 4, 5]


def test_transform_returns_the_filtered_data_and_get_results_skips_it() -> None:
    pipeline = Pipeline(_ds(), batch_size=4, ops=_threes(False))
    assert isinstance(pipeline.transform({"x": np.array(3)}, mode="train"), FilteredData)
    assert pipeline.transform({"x": np.array(4)}, mode="train")["x"].tolist() == [4]
    batched = Pipeline(_ds(), ops=[Batch(batch_size=4), RemoveIf(lambda x: x.sum() > 3, inputs="x")])
    assert isinstance(batched.transform({"x": np.array(4)}, mode="train"), FilteredData)
    results = pipeline.get_results(num_steps=2)
    assert [batch["x"].tolist() for batch in results] == [[1, 2], [4, 5, 7]]
