"""``dataset[i][key] = value`` changes the dataset, as in FastEstimator (whose ``dataset[i]`` is the stored dict)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import InMemoryDataset, NumpyDataset
from fe_ray.dataset.numpy_dataset import NumpySample
from fe_ray.op.numpyop import LambdaOp
from fe_ray.pipeline import Pipeline


def _numpy(n: int = 5) -> tuple[NumpyDataset, np.ndarray]:
    labels = np.arange(n).reshape(n, 1)
    return NumpyDataset({"x": np.arange(2 * n, dtype=np.float32).reshape(n, 2), "y": labels}), labels


def test_numpy_sample_write_persists_like_fe_label_corruption() -> None:
    ds, labels = _numpy()
    for index in (1, 3):  # FastEstimator's superloss apphub corrupts labels this way
        ds[index]["y"] = (ds[index]["y"] + 2) % 5
    assert ds["y"].ravel().tolist() == [0, 3, 2, 0, 4]
    assert ds.get_batch([1, 3])["y"].ravel().tolist() == [3, 0]  # the Pipeline's fast path sees it too
    assert labels.ravel().tolist() == [0, 1, 2, 3, 4]  # the caller's array stays as it was
    sample = ds[2]
    sample.update(x=np.array([7.5, 8.5]))
    sample.setdefault("y", 9)  # present: no write
    assert ds[2]["x"].tolist() == [7.5, 8.5] and ds[2]["y"].tolist() == [2] and ds[-1]["y"].tolist() == [4]


def test_numpy_sample_write_widens_dtype_and_list_keys() -> None:
    ds = NumpyDataset({"y": np.arange(3), "name": ["a", "b", "c"]})
    ds[0]["y"] = 0.5
    ds[-1]["name"] = "z"
    assert ds["y"].dtype == np.float64 and ds["y"].tolist() == [0.5, 1, 2]
    assert ds["name"] == ["a", "b", "z"] and ds[2]["name"] == "z"


@pytest.mark.parametrize("edit, match", [
    (lambda s: s.__setitem__("new", 1), r"cannot add key 'new' to one sample.*dataset\['new'\] = values"),
    (lambda s: s.__delitem__("x"), "cannot remove key 'x' from one sample"),
    (lambda s: s.pop("y"), "cannot remove key 'y'"),
    (lambda s: s.clear(), "cannot remove key 'x'"),
    (lambda s: s.__setitem__("x", np.zeros(3)), r"has shape \(3,\), but the key's samples have shape \(2,\)"),
])
def test_numpy_sample_refused_edits_change_nothing(edit: object, match: str) -> None:
    ds, _ = _numpy()
    sample = ds[0]
    with pytest.raises(ValueError, match=match):
        edit(sample)  # type: ignore[operator]
    assert sorted(sample) == ["x", "y"] and sample["x"].tolist() == [0, 1] and ds[0]["x"].tolist() == [0, 1]
    assert sample.pop("absent", 4) == 4  # no key removed: no error, as dict.pop


def test_numpy_split_subsets_own_their_samples() -> None:
    ds, _ = _numpy(6)
    before = ds[0]
    part = ds.split([0, 1])
    with pytest.raises(ValueError, match=r"read before dataset.split\(\) renumbered"):
        before["y"] = np.array([9])  # it would otherwise change whichever sample is number 0 now
    part[0]["y"] = np.array([9])
    ds[0]["y"] = np.array([8])
    assert part["y"].ravel().tolist() == [9, 1] and ds["y"].ravel().tolist() == [8, 3, 4, 5]


def test_numpy_sample_copies_are_detached_plain_dicts() -> None:
    ds, _ = _numpy()
    sample = ds[1]
    assert isinstance(sample, NumpySample)
    for other in (dict(sample), copy.copy(sample), copy.deepcopy(sample), pickle.loads(pickle.dumps(sample)),
                  sample.copy()):
        assert type(other) is dict
        other["y"] = np.array([42])
    assert ds["y"].ravel().tolist() == [0, 1, 2, 3, 4]


def test_pipeline_sees_writes_and_its_ops_never_write_back() -> None:
    ds, _ = _numpy(4)
    ds[0]["y"] = np.array([7])
    assert Pipeline(train_data=ds, batch_size=4).get_results()["y"].ravel().tolist() == [7, 1, 2, 3]
    op = LambdaOp(fn=lambda y: y + 100, inputs="y", outputs="y")
    pipeline = Pipeline(train_data=ds, batch_size=4, ops=op)
    assert pipeline.get_results()["y"].ravel().tolist() == [107, 101, 102, 103]
    assert ds["y"].ravel().tolist() == [7, 1, 2, 3]
    ds[1]["y"] = np.array([5])  # after the Pipeline was built: an in-process Pipeline reads the dataset anew each batch
    assert pipeline.get_results()["y"].ravel().tolist() == [107, 105, 102, 103]


def test_torch_dataloader_collate_never_writes_back() -> None:
    torch = pytest.importorskip("torch")
    ds, _ = _numpy(4)
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))  # default_collate copies the first sample
    assert batch["y"].ravel().tolist() == [0, 1, 2, 3] and ds["y"].ravel().tolist() == [0, 1, 2, 3]


def test_in_memory_rows_are_the_stored_dicts() -> None:
    ds = InMemoryDataset([{"x": i, "y": i * 10} for i in range(4)])
    row = ds[1]
    row["y"] = -1
    ds[2]["new"] = "only here"  # FastEstimator lets one row gain a key
    del ds[3]["x"]
    ds["z"] = [0, 1, 2, 3]  # a column write reaches a row read before, as in FastEstimator
    assert ds[1] is row and row == {"x": 1, "y": -1, "z": 1}
    assert ds[2]["new"] == "only here" and ds[3] == {"y": 30, "z": 3}
    given = {"x": 9, "y": 90, "z": 0}
    ds[0] = given
    given["y"] = 91  # FastEstimator stores the given dict itself
    assert ds[0]["y"] == 91


def test_in_memory_split_moves_rows_and_pipeline_ops_never_write_back() -> None:
    ds = InMemoryDataset([{"x": np.float32(i), "y": i} for i in range(5)])
    first, last = ds[0], ds[4]
    part = ds.split([0, 1])
    assert part[0] is first and ds[2] is last  # rows move to the part, as FastEstimator's split pops them
    op = LambdaOp(fn=lambda y: y + 100, inputs="y", outputs="y")
    assert Pipeline(train_data=ds, batch_size=3, ops=op).get_results()["y"].tolist() == [102, 103, 104]
    assert ds["y"] == [2, 3, 4]


def test_file_dataset_rows_write_back(tmp_path: object) -> None:
    path = f"{tmp_path}/rows.csv"
    with open(path, "w") as file:
        file.write("x,y\n1,2\n3,4\n")
    ds = fe.dataset.CSVDataset(path)
    ds[0]["y"] = 7
    assert ds["y"] == [7, 4]
