"""Where FastEstimator 1.7's datasets were run side by side with fe_ray's: summary fields of every dataset, Python
values from NumpyDataset lists, one dataset given alone to BatchDataset / CombinedDataset."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import (
    BatchDataset,
    CombinedDataset,
    DatasetSummary,
    GeneratorDataset,
    InterleaveDataset,
    KeySummary,
    NumpyDataset,
    SiameseDirDataset,
)
from fe_ray.pipeline import Pipeline


def _fields(summary: DatasetSummary) -> dict[str, Any]:
    return {key: value.__getstate__() for key, value in summary.keys.items()}


def test_key_summary_lists_its_fields_in_fastestimators_order() -> None:
    assert repr(KeySummary("float32", shape=(2,))) == "<KeySummary {'shape': [2], 'dtype': 'float32'}>"
    assert list(KeySummary("int64", 3).__getstate__()) == ["num_unique_values", "shape", "dtype"]


def test_numpy_dataset_lists_give_their_entries_as_given() -> None:
    ds = NumpyDataset({"i": [1, 2, 2], "s": ["a", "b", "a"], "f": [0.5, 0.5, 1.0], "l": [[1, 2], [3, 4], [5, 6]],
                       "t": [(1, 2), (1, 2), (1, 2)], "a": np.arange(3)})
    sample = ds[1]
    assert [type(sample[key]) for key in ("i", "s", "f", "l", "t")] == [int, str, float, list, tuple]
    assert isinstance(sample["a"], np.int64)  # arrays still give numpy values
    assert ds["i"] == [1, 2, 2] and ds["s"] == ["a", "b", "a"] and isinstance(ds["a"], np.ndarray)
    assert _fields(ds.summary()) == {
        "i": {"num_unique_values": 2, "shape": [], "dtype": "int"},
        "s": {"num_unique_values": 2, "shape": [], "dtype": "str"},
        "f": {"num_unique_values": 2, "shape": [], "dtype": "float"},
        "l": {"shape": [None], "dtype": "List[int]"},
        "t": {"num_unique_values": 1, "shape": [None], "dtype": "List[int]"},
        "a": {"num_unique_values": 3, "shape": [], "dtype": "int64"}}
    # Splits keep the entries as given; batches are the arrays either way.
    part = ds.split([2, 0])
    assert part["i"] == [2, 1] and ds["i"] == [2] and type(ds[0]["f"]) is float
    batch = Pipeline(train_data=part, batch_size=2).get_results()
    assert batch["i"].tolist() == [2, 1] and batch["l"].tolist() == [[5, 6], [1, 2]]


def _counter() -> Generator[dict[str, Any], int, None]:
    count = 0
    while True:
        yield {"x": np.full(3, count, np.float32), "n": count}
        count += 1


def test_generator_batch_and_interleave_summaries_have_fastestimators_fields() -> None:
    generated = GeneratorDataset(_counter(), samples_per_epoch=5)
    summary = generated.summary()
    assert isinstance(summary, DatasetSummary) and summary.num_instances == 5
    assert _fields(summary) == {"x": {"shape": [3], "dtype": "float32"}, "n": {"shape": [], "dtype": "int"}}
    assert generated[0]["n"] == 1  # the summary drew nothing
    a = NumpyDataset({"x": np.arange(10), "y": np.zeros(10, np.int64)})
    b = NumpyDataset({"x": np.arange(100, 104), "y": np.ones(4, np.int64)})
    expected = {"x": {"num_unique_values": 4, "shape": [], "dtype": "int64"},  # the last dataset's entry wins
                "y": {"num_unique_values": 1, "shape": [], "dtype": "int64"}}
    batched = BatchDataset([a, b], num_samples=[2, 1]).summary()
    assert batched.num_instances == 5 and _fields(batched) == expected and batched.startswith("BatchDataset: 5")
    interleaved = InterleaveDataset({"A": a, "B": b}).summary()
    assert interleaved.num_instances == 8 and _fields(interleaved) == expected


def test_siamese_summary_has_fastestimators_fields(tmp_path: Path) -> None:
    for name, count in {"a": 3, "b": 2}.items():
        (tmp_path / name).mkdir()
        for number in range(count):
            (tmp_path / name / f"{number}.png").write_text(name)
    summary = SiameseDirDataset(tmp_path).summary()
    assert "5 samples" in summary and "2 classes" in summary
    assert (summary.num_instances, summary.num_classes, summary.class_key, summary.class_key_mapping) == \
        (5, 2, "y", None)
    assert _fields(summary) == {"x_a": {"num_unique_values": 5, "shape": [], "dtype": "str"},
                                "y": {"num_unique_values": 2, "shape": [], "dtype": "int"},
                                "x_b": {"shape": [], "dtype": "str"}}


def test_one_dataset_alone_is_one_dataset() -> None:
    a = NumpyDataset({"x": np.arange(3)})
    with pytest.raises(ValueError, match="two or more datasets to draw from, got 1"):
        BatchDataset(a, num_samples=1)  # not the samples of ``a`` read as datasets
    combined = CombinedDataset([a])
    assert len(combined) == 3 and combined[2]["x"] == 2
    assert CombinedDataset([a, NumpyDataset({"x": np.arange(4)})]).cumulative_sizes == [3, 7]


def test_fastestimators_module_paths_and_a_dataset_of_your_own() -> None:
    import random

    import fe_ray as fe
    from fe_ray.dataset.dataset import DatasetSummary as Summary
    from fe_ray.dataset.dataset import FEDataset, InMemoryDataset
    from fe_ray.dataset.labeled_dir_dataset import LabeledDirDataset

    assert Summary is DatasetSummary and InMemoryDataset is fe.dataset.InMemoryDataset
    assert LabeledDirDataset is fe.dataset.LabeledDirDataset

    class Squares(FEDataset):
        def __init__(self, values: list[int]) -> None:
            self.values = values

        def __len__(self) -> int:
            return len(self.values)

        def __getitem__(self, index: int) -> dict[str, Any]:
            return {"x": self.values[index], "y": self.values[index] % 2}

        def _do_split(self, splits: Any) -> list[Squares]:
            taken = [[self.values[i] for i in split] for split in splits]
            gone = {i for split in splits for i in split}
            self.values = [value for i, value in enumerate(self.values) if i not in gone]
            return [Squares(values) for values in taken]

    data = Squares(list(range(20)))
    part = data.split(0.25, seed=42)
    assert part.values == random.Random(42).sample(range(20), 5) and len(data) == 15  # FastEstimator's draw
    odd, even = Squares(list(range(20))).split(4, 6, stratify="y", seed=1)
    assert sorted(item % 2 for item in odd.values) == [0, 0, 1, 1] and len(even) == 6
    with pytest.raises(NotImplementedError, match="needs a _do_split"):
        type("Bare", (FEDataset,), {"__len__": lambda self: 4})().split(1)
