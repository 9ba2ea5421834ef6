"""InMemoryDataset: FastEstimator's {index: row} dataset, the base of the file datasets."""

from __future__ import annotations

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import InMemoryDataset
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches, interrupted_run


def _rows(n: int = 5) -> dict[int, dict[str, object]]:
    return {i: {"x": np.full(2, i, np.float32), "y": i * 10} for i in range(n)}


def test_rows_columns_and_copies() -> None:
    ds = fe.dataset.InMemoryDataset(_rows())
    assert len(ds) == 5 and ds[1]["y"] == 10 and ds[-1]["y"] == 40
    column = ds["x"]
    assert isinstance(column, np.ndarray) and column.shape == (5, 2)  # array values stack, as FastEstimator's
    assert ds["y"] == [0, 10, 20, 30, 40]
    sample = ds[0]
    sample["extra"] = 1
    assert ds[0]["extra"] == 1 and ds[0] is sample  # the stored row, as FastEstimator's (its apphubs edit it)
    del sample["extra"]
    assert InMemoryDataset([{"a": 1}, {"a": 2}])["a"] == [1, 2]
    assert ds.summary() == "InMemoryDataset(5 samples; x: float32 (2,), y: int)" == repr(ds)


@pytest.mark.parametrize("data, error, match", [
    ({1: {"a": 1}}, ValueError, r"indices 0\.\.0, got indices \[1\]"),
    ("rows", TypeError, "got str"),
    ([{"a": 1}, 3], TypeError, "row 1 is a int"),
    ([{1: 1}], TypeError, "keys must be strings"),
])
def test_invalid_rows(data: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        InMemoryDataset(data)  # type: ignore[arg-type]


def test_bad_indices_are_named() -> None:
    ds = InMemoryDataset(_rows())
    with pytest.raises(IndexError, match="index 5 out of range for 5 samples"):
        ds[5]
    with pytest.raises(ValueError, match=r"no key 'z'; its keys are \['x', 'y'\]"):
        ds["z"]
    with pytest.raises(TypeError, match="got float: 1.5"):
        ds[1.5]  # type: ignore[index]


def test_split_renumbers_and_matches_numpy_dataset_choice() -> None:
    ds = InMemoryDataset(_rows(10))
    part = ds.split(0.2, seed=4)
    assert len(part) == 2 and len(ds) == 8 and sorted(ds.data) == list(range(8))
    numpy_part = fe.dataset.NumpyDataset({"y": np.arange(10) * 10}).split(0.2, seed=4)
    assert part["y"] == numpy_part.data["y"].tolist()  # one split rule for every dataset
    with pytest.raises(ValueError, match="InMemoryDataset.split would take all 8 samples"):
        ds.split(8)
    assert ds.state_dict() == {}


def test_pipeline_and_resume() -> None:
    def make() -> Pipeline:
        return Pipeline(InMemoryDataset(_rows(9)), batch_size=2, shuffle_seed=3)

    first_epoch = batches(make(), range(1, 2))
    assert [len(batch["y"]) for batch in first_epoch] == [2, 2, 2, 2, 1]
    assert sorted(y for batch in first_epoch for y in batch["y"]) == [i * 10 for i in range(9)]
    assert np.asarray(first_epoch[0]["x"]).shape == (2, 2)
    assert interrupted_run(make, 2, stop_epoch=1, taken=4) == batches(make(), range(1, 3))


def test_setitem_edits_columns_and_rows_as_fastestimator() -> None:
    rows = [{"x": np.array([float(i)]), "y": i % 2} for i in range(3)]
    ds = InMemoryDataset(rows)
    other = ds.split([0])  # shares its row with nothing left here; edits below must not reach it
    ds["x"] = ds["x"] * 10
    ds["name"] = ["b", "c"]
    assert ds[0] == {"x": np.array([10.0]), "y": 1, "name": "b"} and rows[1]["x"].tolist() == [1.0]
    assert list(other[0]) == ["x", "y"]
    ds[-1] = {"x": np.array([0.0]), "y": 5, "name": "z"}
    assert ds[1]["y"] == 5 and ds.keys() == ["x", "y", "name"]
    with pytest.raises(ValueError, match=r"needs 2 values \(one per row\), got 3"):
        ds["y"] = [1, 2, 3]
    with pytest.raises(TypeError, match="needs a {key: value} dict with string keys"):
        ds[0] = [1]
    with pytest.raises(IndexError, match="index 2 out of range for 2 rows"):
        ds[2] = {"x": 1}
