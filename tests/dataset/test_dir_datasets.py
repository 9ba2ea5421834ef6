"""DirDataset and LabeledDirDataset: sorted paths, labels from folder names, errors, Pipeline use and resume."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import DirDataset, LabeledDirDataset
from fe_ray.op.numpyop.numpyop import LambdaOp
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches, interrupted_run


def _tree(root: Path, files: list[str]) -> Path:
    """Create ``files`` (paths relative to ``root``) holding their own relative path as text."""
    for relative in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(relative)
    return root


def _classes(tmp_path: Path) -> Path:
    return _tree(tmp_path / "data", ["dog/b.png", "dog/a.png", "cat/z.png", "cat/y.png", "cat/.hidden.png",
                                     "bird/x.png", "bird/notes.txt", "empty/.DS_Store"])


def test_dir_dataset_sorted_paths_and_filters(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d", ["b.npy", "a.npy", "sub/c.npy", "sub/deeper/d.txt", ".hidden.npy"])
    ds = fe.dataset.DirDataset(str(root))
    expected = sorted(os.path.join(str(root), name) for name in ["a.npy", "b.npy", "sub/c.npy", "sub/deeper/d.txt"])
    assert ds["x"] == expected and ds[0] == {"x": expected[0]}
    assert DirDataset(root, data_key="path", file_extension=".npy")["path"] == [
        str(root / "a.npy"), str(root / "b.npy"), str(root / "sub" / "c.npy")]
    assert DirDataset(root, recursive_search=False)["x"] == [str(root / "a.npy"), str(root / "b.npy")]
    assert DirDataset(str(root) + "/sub/..")["x"] == expected  # the root is normalized as FastEstimator does
    assert DirDataset(str(root) + "/sub/..").root_dir == str(root)  # FastEstimator's attribute


def test_labeled_dir_dataset_labels_and_order(tmp_path: Path) -> None:
    root = _classes(tmp_path)
    ds = fe.dataset.LabeledDirDataset(root, file_extension=".png")
    assert ds.get_mapping() == {"bird": 0, "cat": 1, "dog": 2}  # only folders holding matching files are classes
    assert [ds[i]["y"] for i in range(len(ds))] == [0, 1, 1, 2, 2]
    assert [Path(ds[i]["x"]).relative_to(root).as_posix() for i in range(len(ds))] == [
        "bird/x.png", "cat/y.png", "cat/z.png", "dog/a.png", "dog/b.png"]
    assert isinstance(ds[0]["x"], str)
    everything = LabeledDirDataset(root, data_key="img", label_key="label")
    assert len(everything) == 6 and everything[1] == {"img": str(root / "bird" / "x.png"), "label": 0}
    assert "6 samples" in everything.summary() and "3 classes" in everything.summary()
    summary = everything.summary()  # FastEstimator's fields too
    assert (summary.num_instances, summary.num_classes, summary.class_key) == (6, 3, "label")
    assert summary.class_key_mapping == {"bird": 0, "cat": 1, "dog": 2} and summary.keys["label"].num_unique_values == 3


def test_label_mapping_and_nested_classes(tmp_path: Path) -> None:
    root = _classes(tmp_path)
    ds = LabeledDirDataset(root, label_mapping={"bird": "b", "cat": "c", "dog": "d", "unused": "u"},
                           file_extension=".png")
    assert ds["y"] == ["b", "c", "c", "d", "d"]
    with pytest.raises(ValueError, match=r"no label for the class folder\(s\) \['dog'\]"):
        LabeledDirDataset(root, label_mapping={"bird": 0, "cat": 1}, file_extension=".png")
    nested = LabeledDirDataset(_tree(tmp_path / "n", ["animals/cat/a.png", "plants/b.png"]))
    assert nested.get_mapping() == {os.path.join("animals", "cat"): 0, "plants": 1}
    with pytest.warns(UserWarning, match=r"1 file\(s\) directly in .* get the class ''"):
        rooted = LabeledDirDataset(_tree(tmp_path / "r", ["top.png", "k/a.png"]))
    assert rooted.get_mapping() == {"": 0, "k": 1} and rooted[0] == {"x": str(tmp_path / "r" / "top.png"), "y": 0}


def test_split_keeps_mapping_and_class(tmp_path: Path) -> None:
    ds = LabeledDirDataset(_classes(tmp_path), file_extension=".png")
    part = ds.split([0, 4])
    assert isinstance(part, LabeledDirDataset) and part.get_mapping() == ds.get_mapping()
    assert part["y"] == [0, 2] and ds["y"] == [1, 1, 2]
    first, second = DirDataset(_classes(tmp_path / "again")).split(1, 2, seed=3)
    assert (len(first), len(second)) == (1, 2)


def test_missing_empty_and_wrong_extension(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="root_dir .*nope' does not exist"):
        DirDataset(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LabeledDirDataset(tmp_path / "nope")
    _tree(tmp_path / "f", ["file.txt"])
    with pytest.raises(ValueError, match="is a file; pass the folder"):
        DirDataset(tmp_path / "f" / "file.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="found no files under"):
        LabeledDirDataset(tmp_path / "empty")
    root = _classes(tmp_path)
    with pytest.raises(ValueError, match=r"no files ending with '\.jpg'.*'\.png' \(5\), '\.txt' \(1\)"):
        DirDataset(root, file_extension=".jpg")
    with pytest.raises(TypeError, match="file_extension must be a string"):
        DirDataset(root, file_extension=[".png"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="label_mapping must be a dict"):
        LabeledDirDataset(root, label_mapping=["cat"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both 'x'"):
        LabeledDirDataset(root, label_key="x")


def test_pipeline_reads_files_with_an_op(tmp_path: Path) -> None:
    root = _classes(tmp_path)
    read = LambdaOp(lambda path: np.frombuffer(Path(path).read_bytes()[:5], np.uint8), inputs="x", outputs="x")
    pipeline = Pipeline(eval_data=LabeledDirDataset(root, file_extension=".png"), batch_size=2, ops=read)
    with pipeline("eval", 1) as loader:
        got = list(loader)
    assert [batch["y"].tolist() for batch in got] == [[0, 1], [1, 2], [2]]
    assert bytes(got[0]["x"][1]) == b"cat/y"  # each file holds its relative path
    assert got[2]["x"].shape == (1, 5)


def test_mid_epoch_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d", [f"c{i % 3}/f{i:02d}.bin" for i in range(10)])

    def make() -> Pipeline:
        return Pipeline(LabeledDirDataset(root), batch_size=3, shuffle_seed=2)

    expected = batches(make(), range(1, 3))
    assert interrupted_run(make, 2, stop_epoch=1, taken=3) == expected
    assert LabeledDirDataset(root).state_dict() == {}
    plain = interrupted_run(lambda: Pipeline(DirDataset(root), batch_size=4, shuffle_seed=9), 2, 2, 1)
    assert plain == batches(Pipeline(DirDataset(root), batch_size=4, shuffle_seed=9), range(1, 3))
