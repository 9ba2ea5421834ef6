"""GeneratorDataset: samples in call order, errors, thread safety and its honestly inexact state."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import GeneratorDataset
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches


def _counter(limit: int | None = None) -> Generator[dict[str, Any], int, None]:
    """Yields {"n": how many samples came before, "i": the index it was sent}."""
    count, index = 0, -1
    while limit is None or count < limit:
        index = yield {"n": np.int64(count), "i": np.int64(-1 if index is None else index)}
        count += 1


def test_samples_follow_calls_and_get_the_index() -> None:
    ds = fe.dataset.GeneratorDataset(_counter(), samples_per_epoch=5)
    assert len(ds) == 5
    assert ds[3] == {"n": 1, "i": 3}  # the warm-up sample (n=0) was dropped
    assert ds[3] == {"n": 2, "i": 3}  # the same index gives the next sample: order, not index, decides
    assert ds[-1]["i"] == -1
    with pytest.raises(IndexError, match="index 5 out of range for 5 samples"):
        ds[5]
    assert ds.summary() == "GeneratorDataset(5 samples per epoch; n: int64, i: int64)"
    assert ds[0]["n"] == 4  # summary() drew nothing


def test_bad_arguments_and_an_ending_generator() -> None:
    with pytest.raises(TypeError, match=r"got the function '_counter': call it, GeneratorDataset\(_counter\(\)"):
        GeneratorDataset(_counter, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="generator object .* got list"):
        GeneratorDataset([{"x": 1}], 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="samples_per_epoch must be >= 1, got 0"):
        GeneratorDataset(_counter(), 0)
    with pytest.raises(ValueError, match="ended without yielding"):
        GeneratorDataset(_counter(0), 3)
    short = GeneratorDataset(_counter(2), 3)
    short[0]
    with pytest.raises(ValueError, match=r"ended after 2 sample\(s\); make it loop forever"):
        short[1]


def test_pipeline_batches_in_call_order() -> None:
    pipeline = Pipeline(GeneratorDataset(_counter(), 5), batch_size=2, shuffle_seed=0)
    with pipeline("train", 1) as loader:
        got = list(loader)
    assert [batch["n"].tolist() for batch in got] == [[1, 2], [3, 4], [5]]
    order = [index for batch in got for index in batch["i"].tolist()]
    assert sorted(order) == list(range(5)) and order != list(range(5))  # the shuffled indices were sent


def _slow_counter() -> Generator[dict[str, Any], int, None]:
    count = 0
    while True:
        yield {"n": count}
        time.sleep(0.001)  # releases the GIL inside send(): an unguarded second thread would find it executing
        count += 1


def test_worker_threads_take_turns() -> None:
    pipeline = Pipeline(GeneratorDataset(_slow_counter(), 64), batch_size=4, num_process=4, shuffle_seed=0)
    with pipeline("train", 1) as loader:
        drawn = [n for batch in loader for n in batch["n"].tolist()]
    assert sorted(drawn) == list(range(1, 65))  # every sample drawn once, none lost to a concurrent send


def test_state_is_honest_and_resume_is_not_exact() -> None:
    def make() -> Pipeline:
        return Pipeline(GeneratorDataset(_counter(), 6), batch_size=2, shuffle_seed=1)

    expected = batches(make(), range(1, 2))
    first = make()
    with first("train", 1) as loader:
        next(iter(loader))
        state = first.state_dict()
    assert state["datasets"]["train"][""] == [{"exact_resume": False, "samples_drawn": 2}]
    restored = make()
    with pytest.warns(UserWarning, match=r"cannot resume exactly: the checkpointed run had drawn 2 sample\(s\)"):
        restored.load_state_dict(state)
    rest = batches(restored, range(1, 2))
    assert len(rest) == 2
    # The new generator starts over, so the resumed batches repeat samples 1..4 instead of continuing with 3..6.
    assert [b["n"] for b in rest] == [[1, 2], [3, 4]] != [b["n"] for b in expected[1:]]
    with pytest.raises(ValueError, match="belongs to a different dataset"):
        GeneratorDataset(_counter(), 2).load_state_dict({})


def test_split_divides_the_length_and_shares_the_generator() -> None:
    ds = GeneratorDataset(_counter(), 10)
    with pytest.warns(UserWarning, match="only divides samples_per_epoch"):
        first, second = ds.split(0.2, 3)
    assert (len(first), len(second), len(ds)) == (2, 3, 5)
    assert [first[0]["n"], ds[0]["n"], second[0]["n"]] == [1, 2, 3]
    assert first.state_dict()["samples_drawn"] == 1
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="take all 5 samples"):
        ds.split(5)


def test_split_ignores_stratify_with_a_warning() -> None:
    def endless():  # noqa: ANN202
        while True:
            yield {"x": np.zeros(2), "y": 0}

    ds = fe.dataset.GeneratorDataset(endless(), samples_per_epoch=10)
    with pytest.warns(UserWarning, match="ignores stratify='y'"):
        part = ds.split(0.2, stratify="y")
    assert len(part) == 2 and len(ds) == 8
