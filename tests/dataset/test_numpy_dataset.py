"""NumpyDataset: indexing, batching, validation and its (empty) state."""

from __future__ import annotations

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import NumpyDataset


def _dataset(n: int = 5) -> NumpyDataset:
    return NumpyDataset({"x": np.arange(n * 2, dtype=np.float32).reshape(n, 2), "y": np.arange(n)})


def test_len_and_getitem() -> None:
    ds = _dataset()
    assert len(ds) == 5
    sample = ds[1]
    assert set(sample) == {"x", "y"}
    np.testing.assert_array_equal(sample["x"], [2.0, 3.0])
    assert sample["y"] == 1
    assert ds[-1]["y"] == 4


def test_getitem_out_of_range() -> None:
    with pytest.raises(IndexError, match="out of range for 5 samples"):
        _dataset()[5]


def test_get_batch_equals_stacked_samples() -> None:
    ds = _dataset()
    batch = ds.get_batch([3, 0])
    for key in ("x", "y"):
        np.testing.assert_array_equal(batch[key], np.stack([ds[3][key], ds[0][key]]))
        assert batch[key].dtype == ds.data[key].dtype


def test_subset_and_lists_are_converted() -> None:
    ds = NumpyDataset({"a": [1, 2, 3]})
    sub = ds.subset([2, 0])
    assert isinstance(sub, NumpyDataset)
    np.testing.assert_array_equal(sub.data["a"], [3, 1])


def test_unequal_lengths_name_keys_and_lengths() -> None:
    with pytest.raises(ValueError, match=r"same length.*'x': 3.*'y': 2"):
        NumpyDataset({"x": np.zeros(3), "y": np.zeros(2)})


@pytest.mark.parametrize("data, error, match", [
    ({}, ValueError, "empty dict"),
    ([1, 2], TypeError, "dict"),
    ({1: np.zeros(2)}, TypeError, "keys must be strings"),
    ({"x": np.float32(1.0)}, ValueError, "scalar"),
])
def test_invalid_inputs(data: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        NumpyDataset(data)  # type: ignore[arg-type]


def test_summary_names_keys_dtypes_shapes() -> None:
    text = repr(_dataset())
    assert "5 samples" in text and "x: float32 (2,)" in text and "y: int64 ()" in text
    assert _dataset().summary() == text


def test_state_dict_is_empty() -> None:
    ds = _dataset()
    assert ds.state_dict() == {}
    ds.load_state_dict({})
    with pytest.raises(ValueError, match="no state"):
        ds.load_state_dict({"position": 3})


def test_split_moves_samples_out_as_fastestimator_does() -> None:
    """``eval_data = train_data.split(0.2)``: FastEstimator's idiom moves a random part into a new dataset."""
    ds = NumpyDataset({"x": np.arange(20, dtype=np.float32).reshape(10, 2), "y": np.arange(10)})
    part = ds.split(0.25, seed=0)  # ceil(2.5) = 3 samples
    assert isinstance(part, NumpyDataset) and len(part) == 3 and len(ds) == 7
    assert sorted(part.data["y"].tolist() + ds.data["y"].tolist()) == list(range(10))
    assert ds.data["y"].tolist() == sorted(ds.data["y"].tolist())  # the rest keeps its order
    np.testing.assert_array_equal(part[0]["x"], [2 * part[0]["y"], 2 * part[0]["y"] + 1])  # rows stay together
    again = NumpyDataset({"x": np.arange(20, dtype=np.float32).reshape(10, 2), "y": np.arange(10)}).split(0.25, seed=0)
    assert again.data["y"].tolist() == part.data["y"].tolist()  # seeded
    first, second = ds.split(1, 2)
    assert (len(first), len(second), len(ds)) == (1, 2, 4)
    chosen = _dataset(5).split([4, 0])
    assert chosen.data["y"].tolist() == [4, 0]


@pytest.mark.parametrize("parts, error, match", [
    ((), ValueError, "at least one part"),
    ((1.0,), ValueError, r"fractions must be in \(0, 1\), got 1.0"),
    ((0,), ValueError, "must be >= 1, got 0"),
    ((5,), ValueError, "take all 5 samples"),
    ((0.5, [1]), ValueError, "either numbers .* or index lists, not both"),
    (([0, 1], [1]), ValueError, "overlap"),
    (([7],), ValueError, r"indices in \[0, 5\), got \[7\]"),
    (("0.2",), TypeError, "got str: '0.2'"),
    (((0.1, 0.2),), TypeError, r"index lists hold ints, got \(0.1, 0.2\); pass fractions as separate arguments"),
    (([[0, 1]],), TypeError, r"index lists hold ints, got \[\[0, 1\]\]; pass each part as its own flat list"),
    (([[0, 1], [2]],), TypeError, "pass each part as its own flat list"),
])
def test_bad_splits_are_named(parts: tuple, error: type[Exception], match: str) -> None:
    ds = _dataset(5)
    with pytest.raises(error, match=match):
        ds.split(*parts)
    assert len(ds) == 5  # nothing moved


def test_a_key_gives_its_column_and_bad_indices_are_named() -> None:
    ds = _dataset()
    np.testing.assert_array_equal(ds["y"], np.arange(5))  # FastEstimator's ds["y"]: every label at once
    assert ds[np.int64(2)]["y"] == 2
    with pytest.raises(ValueError, match=r"no key 'label'; its keys are \['x', 'y'\]"):
        ds["label"]
    with pytest.raises(TypeError, match="must be an int .* got float: 1.5"):
        ds[1.5]


def test_a_ragged_list_is_kept_one_sample_each_and_batched_with_pad_value() -> None:
    """FastEstimator keeps a list as a list: images of several sizes and token sequences of several lengths; numpy
    refused them ("inhomogeneous shape")."""
    images = [np.zeros((4, 4, 3)), np.ones((5, 6, 3))]
    ds = NumpyDataset({"x": images, "y": [0, 1]})
    assert ds.ragged and ds[1]["x"].shape == (5, 6, 3) and ds[0]["y"] == 0
    assert NumpyDataset({"t": [[1, 2], [3, 4, 5]]})[1]["t"] == [3, 4, 5]
    tokens = NumpyDataset({"t": [np.array([1, 2]), np.array([3, 4, 5]), np.array([6])], "y": [0, 1, 2]})
    batch = fe.Pipeline(train_data=tokens, batch_size=3, pad_value=0).get_results()
    assert batch["t"].tolist() == [[1, 2, 0], [3, 4, 5], [6, 0, 0]]
    with pytest.raises(ValueError, match=r"Cannot batch key 't': samples have different shapes.*pad_value"):
        fe.Pipeline(train_data=tokens, batch_size=3).get_results()
    assert not NumpyDataset({"x": np.zeros((2, 3))}).ragged


def test_a_seeded_split_takes_fastestimators_samples_and_stratify_keeps_the_classes() -> None:
    """The same seed takes the same samples as FastEstimator's split (Python's random.Random(seed).sample), and
    stratify (which fe_ray lacked) keeps each class's share, by FastEstimator's rules."""
    import random

    ds = NumpyDataset({"x": np.arange(20), "y": np.array([0] * 10 + [1] * 10)})
    assert ds.split(0.25, seed=42)["x"].tolist() == random.Random(42).sample(range(20), 5)
    ds = NumpyDataset({"x": np.arange(20), "y": np.array([0] * 10 + [1] * 10)})
    part = ds.split(0.2, stratify="y", seed=0)
    assert sorted(part["y"].tolist()) == [0, 0, 1, 1] and len(ds) == 16
    assert part["x"].tolist() == [9, 12, 11, 6]  # FastEstimator 1.7's draw for this seed
    skewed = NumpyDataset({"x": np.arange(30), "y": np.array([0] * 27 + [1] * 3)})
    small, big = skewed.split(2, 10, stratify="y", seed=1)
    assert sorted(small["y"].tolist()) == [0, 1] and sorted(big["y"].tolist()) == [0] * 9 + [1]
    with pytest.raises(ValueError, match=r"stratify='z'\): no key 'z'"):
        NumpyDataset({"x": np.arange(4)}).split(1, stratify="z")
    with pytest.raises(ValueError, match="needs fractions or numbers of samples, not index lists"):
        NumpyDataset({"x": np.arange(4), "y": np.arange(4)}).split([0, 1], stratify="y")


def test_summary_is_its_line_and_fastestimators_fields() -> None:
    import pickle

    from fe_ray.dataset import DatasetSummary

    summary = NumpyDataset({"x": np.zeros((5, 2, 3), np.float32), "y": np.array([0, 1, 1, 2, 0])}).summary()
    assert isinstance(summary, DatasetSummary) and summary == "NumpyDataset(5 samples; x: float32 (2, 3), y: int64 ())"
    assert summary.num_instances == 5 and summary.num_classes is None
    assert (summary.keys["x"].dtype, summary.keys["x"].shape, summary.keys["x"].num_unique_values) == \
        ("float32", [2, 3], None)
    assert (summary.keys["y"].shape, summary.keys["y"].num_unique_values) == ([], 3)
    again = pickle.loads(pickle.dumps(summary))
    assert again == summary and again.keys["y"].num_unique_values == 3


def test_summary_repr_is_fastestimators() -> None:
    summary = NumpyDataset({"x": np.zeros((3, 28, 28), np.uint8), "y": np.array([0, 1, 1], np.uint8)}).summary()
    assert repr(summary) == ("<DatasetSummary {'num_instances': 3, 'keys': {'x': <KeySummary {'shape': [28, 28], "
                             "'dtype': 'uint8'}>, 'y': <KeySummary {'num_unique_values': 2, 'shape': [], "
                             "'dtype': 'uint8'}>}}>")
    assert str(summary) == "NumpyDataset(3 samples; x: uint8 (28, 28), y: uint8 ())"


def test_setitem_edits_columns_and_rows_as_fastestimator() -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([0, 1, 0, 1], np.uint8)
    ds = NumpyDataset({"x": x, "y": y})
    ds["x"] = (ds["x"] - 1) / 2  # global editing before the Pipeline (FastEstimator's advanced tutorial 1)
    ds["index"] = np.arange(4).reshape(4, 1)  # a new key for every sample (its XAI tutorial)
    assert list(ds[2]) == ["x", "y", "index"] and ds[2]["index"].tolist() == [2]
    np.testing.assert_array_equal(ds["x"], (x - 1) / 2)
    ds[1] = {"x": np.full(3, 7.0, np.float32), "y": 1.5, "index": np.array([9])}  # float into uint8: widened
    assert ds["y"].dtype == np.float64 and ds["y"].tolist() == [0, 1.5, 0, 1]
    assert ds[1]["x"].tolist() == [7.0] * 3 and ds[1]["index"].tolist() == [9]
    assert y.tolist() == [0, 1, 0, 1] and x[1].tolist() == [3, 4, 5]  # the caller's arrays are untouched
    ds["tag"] = ["a", "b", "c", "d"]  # a list stays Python values
    assert ds[3]["tag"] == "d" and ds["tag"] == ["a", "b", "c", "d"]
    ds[3] = {"x": np.zeros(3, np.float32), "y": 0, "index": np.array([3]), "tag": "z"}
    assert ds[3]["tag"] == "z" and ds.get_batch([3])["tag"].tolist() == ["z"]
    batch = fe.Pipeline(train_data=ds, batch_size=4).get_results()
    assert batch["index"].tolist() == [[0], [9], [2], [3]]


@pytest.mark.parametrize("key, value, error, match", [
    ("x", np.zeros(3), ValueError, r"needs 4 values \(one per sample\), got 3"),
    ("x", 5, TypeError, "needs a sequence of 4 values"),
    (4, {"x": 1}, IndexError, "index 4 out of range for 4 samples"),
    (0, [1], TypeError, "needs a {key: value} dict of the sample"),
    (0, {"z": 1}, ValueError, r"needs the dataset's keys \['x'\]"),
    (0, {"x": np.zeros(2)}, ValueError, r"has shape \(2,\), but the key's samples have shape \(\)"),
    (1.0, {"x": 1}, TypeError, "takes a key .* or an int"),
])
def test_bad_setitem_is_named(key: object, value: object, error: type[Exception], match: str) -> None:
    ds = NumpyDataset({"x": np.arange(4)})
    with pytest.raises(error, match=match):
        ds[key] = value
    assert ds["x"].tolist() == [0, 1, 2, 3]
