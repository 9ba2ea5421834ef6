"""FastEstimator 1.7's offline loaders built on scikit-learn's bundled data: skl_digits and breast_cancer."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import NumpyDataset
from fe_ray.dataset.data import breast_cancer, skl_digits


def test_skl_digits_is_one_unsplit_dataset_of_sklearn_arrays() -> None:
    from sklearn.datasets import load_digits

    dataset = skl_digits.load_data()
    assert isinstance(dataset, NumpyDataset) and len(dataset) == 1797
    assert dataset["x"].shape == (1797, 8, 8) and dataset["x"].dtype == np.float64
    assert dataset["y"].dtype == np.int64 and sorted(set(dataset["y"].tolist())) == list(range(10))
    bunch = load_digits()
    np.testing.assert_array_equal(dataset["x"], bunch.images)
    # The 8x8 image is the 64-feature row reshaped (an independent view of the same data).
    np.testing.assert_array_equal(dataset["x"][5].reshape(-1), bunch.data[5])
    np.testing.assert_array_equal(dataset["y"], bunch.target)


def test_skl_digits_custom_keys() -> None:
    dataset = skl_digits.load_data(image_key="image", label_key="label")
    assert sorted(dataset[0]) == ["image", "label"]
    with pytest.raises(ValueError, match="different keys"):
        skl_digits.load_data(image_key="x", label_key="x")


def test_breast_cancer_matches_fastestimators_split() -> None:
    from sklearn.datasets import load_breast_cancer

    train, evaluation = breast_cancer.load_data()
    assert (len(train), len(evaluation)) == (455, 114)
    assert train["x"].shape == (455, 30) and train["x"].dtype == np.float32 and evaluation["x"].dtype == np.float32
    assert train["y"].dtype == np.int64 and set(train["y"].tolist()) == {0, 1}
    # train_test_split(test_size=0.2, random_state=42) is one ShuffleSplit draw: a RandomState(42) permutation whose
    # first ceil(0.2 * n) rows are held out and whose next rows are the training set, in that order.
    features, labels = load_breast_cancer(return_X_y=True)
    order = np.random.RandomState(42).permutation(len(labels))
    held_out = math.ceil(0.2 * len(labels))
    np.testing.assert_array_equal(evaluation["x"], features[order[:held_out]].astype(np.float32))
    np.testing.assert_array_equal(evaluation["y"], labels[order[:held_out]])
    np.testing.assert_array_equal(train["x"], features[order[held_out:]].astype(np.float32))
    np.testing.assert_array_equal(train["y"], labels[order[held_out:]])


def test_loaders_are_reachable_from_the_fe_namespace() -> None:
    assert fe.dataset.data.skl_digits.load_data is skl_digits.load_data
    assert fe.dataset.data.breast_cancer.load_data is breast_cancer.load_data


def _dnn(framework: str) -> object:
    if framework == "torch":
        import torch

        return fe.build(model_fn=lambda: torch.nn.Sequential(torch.nn.Linear(30, 16), torch.nn.ReLU(),
                                                             torch.nn.Linear(16, 2), torch.nn.Softmax(dim=-1)),
                        optimizer_fn=lambda params: torch.optim.Adam(params, lr=0.01))
    from tensorflow import keras

    return fe.build(model_fn=lambda: keras.Sequential([keras.Input((30,)), keras.layers.Dense(16, activation="relu"),
                                                       keras.layers.Dense(2, activation="softmax")]),
                    optimizer_fn=lambda: keras.optimizers.Adam(0.01))


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_breast_cancer_trains_from_interleaved_and_extended_data(framework: str) -> None:
    """FastEstimator's breast-cancer tutorial, fed by an InterleaveDataset of two batch sizes and an ExtendDataset."""
    from fe_ray.dataset import ExtendDataset, InterleaveDataset
    from fe_ray.op.tensorop.loss import CrossEntropy
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp
    from fe_ray.trace.metric import Accuracy

    train, evaluation = breast_cancer.load_data()
    mean, std = train["x"].mean(axis=0), train["x"].std(axis=0)
    train = NumpyDataset({"x": (train["x"] - mean) / std, "y": train["y"]})
    evaluation = NumpyDataset({"x": (evaluation["x"] - mean) / std, "y": evaluation["y"]})
    other = train.split(0.5, seed=0)
    interleaved = InterleaveDataset({"small": train, "large": other}, pattern=["small", "large", "large"])
    interleaved.set_batch_sizes([8, 16])
    pipeline = fe.Pipeline(train_data=interleaved, eval_data=ExtendDataset(evaluation, 64), batch_size=32)
    model = _dnn(framework)
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                              CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                              UpdateOp(model=model, loss_name="ce")])
    estimator = fe.Estimator(pipeline=pipeline, network=network, epochs=2, log_steps=None,
                             traces=Accuracy(true_key="y", pred_key="y_pred"))
    summary = estimator.fit()
    # 228 + 227 samples: min(228 // 8, 227 // 32) = 7 repeats of the 3-step pattern per epoch, 2 epochs.
    assert estimator.system.global_step == 2 * 7 * 3
    accuracy = list(summary.history["eval"]["accuracy"].values())
    assert len(accuracy) == 2 and accuracy[-1] > 0.85
