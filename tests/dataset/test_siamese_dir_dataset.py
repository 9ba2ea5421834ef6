"""SiameseDirDataset: pair structure and labels, pairs as a pure function of (index, pass key), matching rate,
class-wise split, summary, one-shot trials, errors, and exact pairs across Pipeline threads and resumes."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import SiameseDirDataset
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches, interrupted_run

CLASSES = {"ant": 3, "bee": 2, "cat": 4, "dog": 3}  # files per class folder


def _tree(root: Path, classes: dict[str, int] = CLASSES) -> Path:
    for name, count in classes.items():
        (root / name).mkdir(parents=True)
        for number in range(count):
            (root / name / f"{number}.png").write_text(name)
    return root


def _class_of(path: str) -> str:
    return os.path.basename(os.path.dirname(path))


def _key(epoch: int = 1, data_pass: int = 0) -> tuple[int, str, str, int, int]:
    return (3, "train", "", epoch, data_pass)


def test_pairs_hold_the_left_file_and_a_right_file_matching_the_label(tmp_path: Path) -> None:
    ds = fe.dataset.SiameseDirDataset(_tree(tmp_path / "d"))
    assert len(ds) == 12 and ds.get_mapping() == {"ant": 0, "bee": 1, "cat": 2, "dog": 3}
    assert ds.class_data == {0: {0, 1, 2}, 1: {3, 4}, 2: {5, 6, 7, 8}, 3: {9, 10, 11}}
    for epoch in range(1, 6):
        for index in range(len(ds)):
            sample = ds.keyed_item(index, _key(epoch))
            assert list(sample) == ["x_a", "y", "x_b"]
            assert sample["x_a"] == ds.data[index]["x_a"]
            same = _class_of(sample["x_a"]) == _class_of(sample["x_b"])
            assert sample["y"] == int(same)
            if same:
                assert sample["x_b"] != sample["x_a"]  # a matching pair is never a file with itself


def test_keyed_pairs_are_a_pure_function_of_index_and_pass(tmp_path: Path) -> None:
    ds = SiameseDirDataset(_tree(tmp_path / "d"))
    first = [ds.keyed_item(i, _key()) for i in range(len(ds))]
    assert first == [ds.keyed_item(i, _key()) for i in range(len(ds))]
    assert first == [SiameseDirDataset(tmp_path / "d").keyed_item(i, _key()) for i in range(len(ds))]
    for other in (_key(epoch=2), _key(data_pass=1), (4, "train", "", 1, 0), (3, "eval", "", 1, 0)):
        assert first != [ds.keyed_item(i, other) for i in range(len(ds))]


def test_matching_rate_and_uniform_other_class(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d")
    assert all(SiameseDirDataset(root, percent_matching_data=1.0).keyed_item(i, _key())["y"] == 1 for i in range(12))
    assert all(SiameseDirDataset(root, percent_matching_data=0).keyed_item(i, _key())["y"] == 0 for i in range(12))
    ds = SiameseDirDataset(root, percent_matching_data=0.25)
    draws = [ds.keyed_item(0, _key(epoch)) for epoch in range(1, 801)]
    assert 0.2 < np.mean([draw["y"] for draw in draws]) < 0.3
    other = Counter(_class_of(draw["x_b"]) for draw in draws if draw["y"] == 0)
    assert set(other) == {"bee", "cat", "dog"} and min(other.values()) > 150  # ~200 each of ~600
    matches = Counter(draw["x_b"] for draw in draws if draw["y"] == 1)
    assert set(matches) == {ds.data[1]["x_a"], ds.data[2]["x_a"]}


def test_plain_indexing_draws_from_numpys_global_generator(tmp_path: Path) -> None:
    ds = SiameseDirDataset(_tree(tmp_path / "d"), data_key_left="left", data_key_right="right", label_key="same")
    np.random.seed(5)
    first = [ds[i] for i in range(len(ds))]
    np.random.seed(5)
    assert first == [ds[i] for i in range(len(ds))]
    assert list(first[0]) == ["left", "same", "right"] and ds[-1]["left"] == ds.data[11]["left"]
    assert ds["left"] == [row["left"] for row in ds.data.values()]
    with pytest.raises(IndexError):
        ds[12]


def test_split_moves_whole_classes(tmp_path: Path) -> None:
    ds = SiameseDirDataset(_tree(tmp_path / "d"))
    moved = ds.split([1, 3])  # class positions: bee and dog
    assert isinstance(moved, SiameseDirDataset)
    assert sorted({_class_of(path) for path in moved["x_a"]}) == ["bee", "dog"] and len(moved) == 5
    assert sorted({_class_of(path) for path in ds["x_a"]}) == ["ant", "cat"] and len(ds) == 7
    assert moved.class_data == {1: {0, 1}, 3: {2, 3, 4}} and ds.class_data == {0: {0, 1, 2}, 2: {3, 4, 5, 6}}
    for part in (ds, moved):
        for index in range(len(part)):
            sample = part.keyed_item(index, _key())
            assert _class_of(sample["x_b"]) in {_class_of(path) for path in part["x_a"]}
    halves = SiameseDirDataset(_tree(tmp_path / "e")).split(0.5, seed=1)  # half of the 4 classes
    assert len({_class_of(path) for path in halves["x_a"]}) == 2
    with pytest.raises(ValueError, match="single class"):
        SiameseDirDataset(_tree(tmp_path / "f")).split([0])


def test_summary_and_errors(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d")
    summary = SiameseDirDataset(root).summary()
    assert "12 samples" in summary and "4 classes" in summary and "x_b: str" in summary
    assert repr(SiameseDirDataset(root)) == summary
    with pytest.raises(ValueError, match=r"\['solo'\] hold a single file"):
        SiameseDirDataset(_tree(tmp_path / "e", {"solo": 1, "pair": 2}))
    assert len(SiameseDirDataset(tmp_path / "e", percent_matching_data=0)) == 3
    with pytest.raises(ValueError, match="two or more classes"):
        SiameseDirDataset(_tree(tmp_path / "f", {"only": 3}))
    with pytest.raises(ValueError, match=r"chance in \[0, 1\]"):
        SiameseDirDataset(root, percent_matching_data=1.5)
    with pytest.raises(ValueError, match="repeats another key"):
        SiameseDirDataset(root, data_key_right="x_a")


def test_one_shot_trial(tmp_path: Path) -> None:
    ds = SiameseDirDataset(_tree(tmp_path / "d"))
    np.random.seed(2)
    for _ in range(20):
        left, right = ds.one_shot_trial(3)
        assert len(left) == len(right) == 3 and len(set(left)) == 1
        assert _class_of(right[0]) == _class_of(left[0]) and right[0] != left[0]
        assert len({_class_of(path) for path in right}) == 3
    with pytest.raises(ValueError, match="from 2 to the number of classes"):
        ds.one_shot_trial(5)


# ------------------------------------------------------------------ in a Pipeline
def test_pipeline_pairs_are_keyed_by_position_across_threads_and_resume(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d")

    def make(num_process: int = 0) -> Pipeline:
        return Pipeline(SiameseDirDataset(root), batch_size=5, shuffle_seed=9, num_process=num_process)

    serial = batches(make(), range(1, 3))
    assert serial == batches(make(num_process=2), range(1, 3))
    assert interrupted_run(make, epochs=2, stop_epoch=2, taken=1) == serial
    ds = SiameseDirDataset(root)
    with make()("train", 1) as loader:
        first = next(iter(loader))
        expected = [ds.keyed_item(int(index), (9, "train", "", 1, 0)) for index in loader.batch_indices(0)]
    assert first["x_b"].tolist() == [sample["x_b"] for sample in expected]
    assert first["y"].tolist() == [sample["y"] for sample in expected]
    assert len(serial) == 6 and serial[:3] != serial[3:]  # each epoch pairs afresh
