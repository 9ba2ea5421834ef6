"""Precision, Recall, F1Score, MCC and ConfusionMatrix: values equal sklearn's over the whole epoch (whatever the
batching), FastEstimator's choice of average, per-dataset keys, argument checks, and exact checkpoint state."""

from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.trace import Accuracy, Data  # noqa: E402
from fe_ray.trace.metric import MCC, ConfusionMatrix, F1Score, Precision, Recall  # noqa: E402
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp  # noqa: E402

SCORES = [(Precision, skm.precision_score, "precision"), (Recall, skm.recall_score, "recall"),
          (F1Score, skm.f1_score, "f1_score")]


def _batches(n_classes: int, sizes: tuple[int, ...] = (7, 5, 9), seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Batches of integer labels and class scores (a biased, imperfect classifier); the second batch's labels are
    one-hot rows, which the traces must read the same way."""
    rng = np.random.default_rng(seed)
    batches = []
    for index, size in enumerate(sizes):
        y = rng.integers(0, n_classes, size)
        scores = rng.random((size, n_classes))
        scores[np.arange(size), y] += rng.random(size) * 0.8  # right more often than not
        labels = np.eye(n_classes)[y] if index == 1 else y
        batches.append({"y": labels, "pred": scores})
    return batches


def _epoch(trace: Any, batches: list[dict[str, np.ndarray]]) -> Data:
    data = Data()
    trace.on_epoch_begin(data)
    for batch in batches:
        trace.on_batch_end(Data(batch))
    trace.on_epoch_end(data)
    return data


def _flat(batches: list[dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    y_true = np.concatenate([b["y"].argmax(-1) if b["y"].shape[-1] > 1 and b["y"].ndim > 1 else b["y"].ravel()
                             for b in batches])
    pred = np.concatenate([b["pred"] for b in batches])
    y_pred = np.round(pred).ravel() if pred.shape[-1] == 1 else pred.argmax(-1)
    return y_true, y_pred.astype(np.int64)


@pytest.mark.parametrize("trace_cls, sk_fn, key", SCORES, ids=[s[2] for s in SCORES])
def test_multiclass_scores_are_sklearns_per_class_arrays(trace_cls: Any, sk_fn: Any, key: str) -> None:
    batches = _batches(4)
    y_true, y_pred = _flat(batches)
    got = _epoch(trace_cls("y", "pred"), batches)[key]
    assert isinstance(got, np.ndarray) and got.shape == (4,)  # FastEstimator: one value per class
    np.testing.assert_allclose(got, sk_fn(y_true, y_pred, average=None))
    macro = _epoch(trace_cls("y", "pred", average="macro", zero_division=0), batches)[key]
    assert macro == pytest.approx(sk_fn(y_true, y_pred, average="macro", zero_division=0))


@pytest.mark.parametrize("trace_cls, sk_fn, key", SCORES, ids=[s[2] for s in SCORES])
def test_single_column_predictions_give_the_binary_score(trace_cls: Any, sk_fn: Any, key: str) -> None:
    rng = np.random.default_rng(1)
    batches = [{"y": rng.integers(0, 2, (n, 1)), "pred": rng.random((n, 1))} for n in (6, 10)]
    y_true, y_pred = _flat(batches)
    got = _epoch(trace_cls("y", "pred"), batches)[key]
    assert np.ndim(got) == 0 and got == pytest.approx(sk_fn(y_true, y_pred, average="binary"))
    assert 0 < got < 1
    # sklearn's pos_label reaches the call: the score of class 0 instead
    flipped = _epoch(trace_cls("y", "pred", pos_label=0), batches)[key]
    assert flipped == pytest.approx(sk_fn(y_true, y_pred, average="binary", pos_label=0))


def test_mcc_and_confusion_matrix_equal_sklearn_over_the_epoch() -> None:
    batches = _batches(3, sizes=(4, 11, 6, 3))
    y_true, y_pred = _flat(batches)
    assert _epoch(MCC("y", "pred"), batches)["mcc"] == pytest.approx(skm.matthews_corrcoef(y_true, y_pred))
    matrix = _epoch(ConfusionMatrix("y", "pred", num_classes=5), batches)["confusion_matrix"]
    np.testing.assert_array_equal(matrix, skm.confusion_matrix(y_true, y_pred, labels=range(5)))
    assert matrix.sum() == y_true.size and not matrix[3:].any()
    # normalize applies to the epoch's matrix, so each row sums to 1 (a per-batch sum would not)
    rows = _epoch(ConfusionMatrix("y", "pred", num_classes=3, normalize="true"), batches)["confusion_matrix"]
    np.testing.assert_allclose(rows, skm.confusion_matrix(y_true, y_pred, normalize="true"))
    np.testing.assert_allclose(rows.sum(axis=1), 1.0)


def test_tensors_from_either_framework() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    batches = _batches(3)
    y_true, y_pred = _flat(batches)
    expected = skm.f1_score(y_true, y_pred, average=None)
    for convert in (torch.as_tensor, tf.convert_to_tensor):
        tensors = [{key: convert(value) for key, value in batch.items()} for batch in batches]
        np.testing.assert_allclose(_epoch(F1Score("y", "pred"), tensors)["f1_score"], expected)


def test_state_round_trip_mid_epoch_gives_the_uninterrupted_value() -> None:
    batches = _batches(4, sizes=(5, 6, 7, 8))
    for make in (lambda: F1Score("y", "pred"), lambda: MCC("y", "pred"),
                 lambda: ConfusionMatrix("y", "pred", num_classes=4), lambda: Recall("y", "pred", average="weighted")):
        reference = make()
        expected = _epoch(reference, batches)[reference.outputs[0]]
        first = make()
        first.on_epoch_begin(Data())
        for batch in batches[:2]:
            first.on_batch_end(Data(batch))
        state = copy.deepcopy(first.state_dict())  # as a checkpoint stores it
        first.on_batch_end(Data(batches[2]))  # later batches must not leak into the saved state
        resumed = make()
        resumed.load_state_dict(state)
        for batch in batches[2:]:
            resumed.on_batch_end(Data(batch))
        data = Data()
        resumed.on_epoch_end(data)
        np.testing.assert_allclose(data[reference.outputs[0]], expected)
    binary = F1Score("y", "pred")
    binary.on_batch_end(Data({"y": np.array([1, 0]), "pred": np.array([[0.9], [0.2]])}))
    fresh = F1Score("y", "pred")
    fresh.load_state_dict(binary.state_dict())
    assert fresh.binary is True  # the rule survives a resume at an epoch's last batch


def test_per_dataset_values_and_agreement_with_accuracy() -> None:
    """With two eval datasets each metric also logs '<name>|<ds_id>'; micro-averaged F1 equals Accuracy and the
    confusion matrix's diagonal holds the correct predictions."""
    train, evaluation = digits_arrays(n_train=32, n_eval=24)
    pipeline = ToyPipeline(train, evaluation, batch_size=8)
    pipeline.data["eval"] = {"a": {key: value[:8] for key, value in evaluation.items()},
                             "b": {key: value[8:] for key, value in evaluation.items()}}
    traces = [Accuracy("y", "y_pred"), F1Score("y", "y_pred", average="micro", output_name="f1_micro"),
              ConfusionMatrix("y", "y_pred", num_classes=10), MCC("y", "y_pred", per_ds=False),
              Precision("y", "y_pred", zero_division=0)]
    estimator = fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=2, traces=traces, log_steps=None)
    history = estimator.fit().history["eval"]
    for step in (4, 8):
        assert history["f1_micro"][step] == pytest.approx(history["accuracy"][step])
        for ds_id in ("a", "b"):
            assert history[f"f1_micro|{ds_id}"][step] == pytest.approx(history[f"accuracy|{ds_id}"][step])
        matrix = history["confusion_matrix"][step]
        np.testing.assert_array_equal(matrix, history["confusion_matrix|a"][step] + history["confusion_matrix|b"][step])
        assert matrix.sum() == 24 and np.trace(matrix) / 24 == pytest.approx(history["accuracy"][step])
        assert history["precision"][step].shape == (10,)
    assert "mcc" in history and not any(key.startswith("mcc|") for key in history)


def test_argument_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"average must be one of \['auto', None, 'binary', .* got 'mean'"):
        F1Score("y", "pred", average="mean")
    with pytest.raises(ValueError, match=r"sets \['y_true'\] itself .* remove"):
        Precision("y", "pred", y_true=[1])
    with pytest.raises(ValueError, match=r"does not accept \['zero_divison'\]; the accepted ones are .*zero_division"):
        Recall("y", "pred", zero_divison=0)
    with pytest.raises(ValueError, match=r"sets \['labels'\] itself"):
        ConfusionMatrix("y", "pred", num_classes=3, labels=[0, 1, 2])
    with pytest.raises(ValueError, match=r"num_classes must be a positive int .* got 0"):
        ConfusionMatrix("y", "pred", num_classes=0)
    with pytest.raises(ValueError, match=r"does not accept \['average'\]"):
        MCC("y", "pred", average="macro")
    trace = MCC("y", "pred")
    with pytest.raises(ValueError, match=r"got 3 labels \('y'\) but 2 predictions \('pred'\)"):
        trace.on_batch_end(Data({"y": np.array([0, 1, 1]), "pred": np.eye(2)}))
    with pytest.raises(ValueError, match="NaN or infinite predictions under 'pred'.*TerminateOnNaN"):
        trace.on_batch_end(Data({"y": np.array([0, 1]), "pred": np.array([[0.2], [np.nan]])}))
    with pytest.raises(ValueError, match=r"class indices .* non-integer values such as \[0.5\]"):
        trace.on_batch_end(Data({"y": np.array([0.5, 1.0]), "pred": np.array([[0.2], [0.9]])}))
