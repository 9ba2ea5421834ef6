"""NumpyDataset: indexing, batching, validation and its (empty) state."""

from __future__ import annotations

import numpy as np
import pytest

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
