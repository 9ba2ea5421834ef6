"""PickleDataset: pickled DataFrames (a stand-in with pandas' to_dict, so the test needs no pandas), column dicts and
row lists, compressed files, splitting, and the errors."""

from __future__ import annotations

import bz2
import gzip
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import PickleDataset


class FrameLike:
    """What PickleDataset uses of a pandas DataFrame: ``columns`` and ``to_dict(orient=...)``."""

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        self.data = columns

    @property
    def columns(self) -> list[str]:
        return list(self.data)

    def to_dict(self, orient: str = "dict") -> Any:
        if orient != "records":
            raise AssertionError(f"PickleDataset should ask for rows in order ('records'), asked {orient!r}")
        count = len(next(iter(self.data.values())))
        return [{name: values[i] for name, values in self.data.items()} for i in range(count)]


def _dump(path: Path, obj: Any, opener: Any = open) -> Path:
    with opener(path, "wb") as file:
        pickle.dump(obj, file)
    return path


def test_dataframe_rows_become_samples_and_parent_path_is_the_folder(tmp_path: Path) -> None:
    path = _dump(tmp_path / "table.pkl", FrameLike({"x": ["a.png", "b.png", "c.png"], "y": [0, 1, 1]}))
    dataset = PickleDataset(path)
    assert len(dataset) == 3
    assert dataset[1] == {"x": "b.png", "y": 1}
    assert dataset[-1] == {"x": "c.png", "y": 1}
    assert dataset.parent_path == str(tmp_path)
    assert fe.dataset.PickleDataset is PickleDataset


@pytest.mark.parametrize("suffix, opener", [(".pkl.gz", gzip.open), (".pkl.bz2", bz2.open)])
def test_compressed_files_are_read_by_extension(tmp_path: Path, suffix: str, opener: Any) -> None:
    path = _dump(tmp_path / f"t{suffix}", {"x": np.arange(4), "y": ["p", "q", "r", "s"]}, opener)
    dataset = PickleDataset(path)
    assert [dataset[i]["y"] for i in range(4)] == ["p", "q", "r", "s"]
    assert int(dataset[2]["x"]) == 2


def test_row_lists_load_and_split_like_other_in_memory_datasets(tmp_path: Path) -> None:
    rows = [{"x": float(i), "y": i % 2} for i in range(10)]
    dataset = PickleDataset(_dump(tmp_path / "rows.pkl", rows))
    held_out = dataset.split(0.3, seed=0)
    assert isinstance(held_out, PickleDataset)
    assert len(held_out) == 3 and len(dataset) == 7
    assert {s["x"] for s in dataset.data.values()} | {s["x"] for s in held_out.data.values()} == {
        float(i) for i in range(10)}
    assert held_out.parent_path == str(tmp_path)


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.pkl"):
        PickleDataset(tmp_path / "missing.pkl")
    with pytest.raises(ValueError, match="is a folder"):
        PickleDataset(tmp_path)
    with pytest.raises(ValueError, match="different lengths"):
        PickleDataset(_dump(tmp_path / "ragged.pkl", {"x": [1, 2], "y": [1]}))
    with pytest.raises(TypeError, match="holds a int"):
        PickleDataset(_dump(tmp_path / "number.pkl", 7))
    with pytest.raises(TypeError, match="keys must be strings"):
        PickleDataset(_dump(tmp_path / "intcols.pkl", FrameLike({0: [1, 2]})))  # type: ignore[dict-item]
