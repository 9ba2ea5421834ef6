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
