"""CalibrationError, MeanAveragePrecision and BleuScore: hand-computed values, the estimators' properties, batching
and framework independence, per-dataset keys, exact mid-epoch checkpoint state, argument and input errors, and an
in-process Estimator run with all three."""

from __future__ import annotations

import copy
import math
import os
import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.summary import ValWithError  # noqa: E402
from fe_ray.trace import Data  # noqa: E402
from fe_ray.trace.metric import BleuScore, CalibrationError, MeanAveragePrecision  # noqa: E402
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp  # noqa: E402


def _epoch(trace: Any, batches: list[dict[str, Any]], ds_ids: list[str] | None = None) -> Data:
    """Run one epoch of ``batches`` (batch i in dataset ``ds_ids[i]``) and return the epoch end's Data."""
    trace.system = SimpleNamespace(ds_id="")
    trace.on_epoch_begin(Data())
    for index, batch in enumerate(batches):
        trace.system.ds_id = ds_ids[index] if ds_ids else ""
        trace.on_batch_end(Data(batch))
    data = Data()
    trace.on_epoch_end(data)
    return data


def _resumed(make: Any, batches: list[dict[str, Any]], split: int, ds_ids: list[str] | None = None) -> Data:
    """Run ``split`` batches, checkpoint (pickled, as on disk), feed one more batch to the original (which must not
    leak into the saved state), then finish the epoch on a fresh trace restored from the checkpoint."""
    ds_ids = ds_ids or [""] * len(batches)
    first = make()
    first.system = SimpleNamespace(ds_id="")
    first.on_epoch_begin(Data())
    for batch, ds_id in zip(batches[:split], ds_ids[:split]):
        first.system.ds_id = ds_id
        first.on_batch_end(Data(batch))
    state = pickle.loads(pickle.dumps(copy.deepcopy(first.state_dict())))
    first.system.ds_id = ds_ids[split]
    first.on_batch_end(Data(batches[split]))
    resumed = make()
    resumed.system = SimpleNamespace(ds_id="")
    resumed.load_state_dict(state)
    for batch, ds_id in zip(batches[split:], ds_ids[split:]):
        resumed.system.ds_id = ds_id
        resumed.on_batch_end(Data(batch))
    data = Data()
    resumed.on_epoch_end(data)
    return data


# ---------------------------------------------------------------------------------------------------- CalibrationError

def _two_level_example() -> tuple[np.ndarray, np.ndarray]:
    """12 binary samples: six predicted 0.2 (three positives: frequency 0.5), six predicted 0.8 (all positive).

    Two distinct values among 12 samples (fewer than 12 / 4) make each value its own bin. Debiased squared errors:
    bin 0.2: (0.2 - 0.5)^2 - 0.5 * 0.5 / 5 = 0.04; bin 0.8: (0.8 - 1)^2 - 0 = 0.04; weighted mean 0.04 -> 0.2.
    """
    probs = np.array([0.2] * 6 + [0.8] * 6)
    labels = np.array([1, 0, 1, 0, 1, 0] + [1] * 6)
    return probs, labels


def test_calibration_error_hand_computed_binned_model() -> None:
    probs, labels = _two_level_example()
    # binary (flat or single-column positive-class probabilities)
    assert _epoch(CalibrationError("y", "p"), [{"y": labels, "p": probs}])["calibration_error"] == pytest.approx(0.2)
    single = [{"y": labels[:5, None], "p": probs[:5, None]}, {"y": labels[5:, None], "p": probs[5:, None]}]
    assert _epoch(CalibrationError("y", "p"), single)["calibration_error"] == pytest.approx(0.2)
    # two columns: class 0's column mirrors class 1's, so the marginal error is the same 0.2
    two = np.stack([1 - probs, probs], axis=1)
    assert _epoch(CalibrationError("y", "p"), [{"y": labels, "p": two}])["calibration_error"] == pytest.approx(0.2)
    # top-label: every confidence is 0.8 and 9 of 12 argmaxes are right: (0.8 - 0.75)^2 - 0.75 * 0.25 / 11 < 0 -> 0
    top = _epoch(CalibrationError("y", "p", method="top-label"), [{"y": labels, "p": two}])
    assert top["calibration_error"] == 0.0


def test_calibration_error_hand_computed_equal_mass_bins() -> None:
    """150 distinct probabilities: 15 equal-mass bins of ten neighbouring samples each."""
    rng = np.random.default_rng(3)
    probs = np.sort(rng.uniform(0.05, 0.95, 150))
    labels = (rng.uniform(size=150) < probs ** 0.3).astype(np.int64)  # under-confident: a clear error
    bin_p, bin_y = probs.reshape(15, 10).mean(axis=1), labels.reshape(15, 10).mean(axis=1)
    squared = np.sum(10 / 150 * ((bin_p - bin_y) ** 2 - bin_y * (1 - bin_y) / (10 - 1)))
    expected = round(max(squared, 0.0) ** 0.5, 4)
    assert expected > 0.1
    order = rng.permutation(150)  # the order of samples does not matter
    batches = [{"y": labels[order[:61]], "p": probs[order[:61]]}, {"y": labels[order[61:]], "p": probs[order[61:]]}]
    assert _epoch(CalibrationError("y", "p"), batches)["calibration_error"] == expected


def _sampled(n: int, sharpen: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels drawn from true class probabilities; predictions are those probabilities raised to ``sharpen`` and
    renormalised (1: perfectly calibrated, > 1: overconfident)."""
    rng = np.random.default_rng(seed)
    truth = rng.dirichlet(np.ones(3) * 0.7, size=n)
    labels = (rng.uniform(size=(n, 1)) > np.cumsum(truth, axis=1)).sum(axis=1)
    preds = truth ** sharpen
    return preds / preds.sum(axis=1, keepdims=True), labels


@pytest.mark.parametrize("method", ["marginal", "top-label"])
def test_calibrated_predictions_score_near_zero_and_overconfident_ones_do_not(method: str) -> None:
    probs, labels = _sampled(6000, sharpen=1.0)
    calibrated = _epoch(CalibrationError("y", "p", method=method), [{"y": labels, "p": probs}])["calibration_error"]
    probs, labels = _sampled(6000, sharpen=3.0)
    overconfident = _epoch(CalibrationError("y", "p", method=method),
                           [{"y": labels, "p": probs}])["calibration_error"]
    assert 0.0 <= calibrated < 0.02
    assert overconfident > 0.08 and overconfident > 5 * calibrated


def test_calibration_confidence_interval_is_a_seeded_bootstrap_band() -> None:
    probs, labels = _sampled(400, sharpen=2.0, seed=1)
    batches = [{"y": labels, "p": probs}]
    np.random.seed(5)
    narrow = _epoch(CalibrationError("y", "p", confidence_interval=50), batches)["calibration_error"]
    np.random.seed(5)
    wide = _epoch(CalibrationError("y", "p", confidence_interval=99), batches)["calibration_error"]
    np.random.seed(5)
    again = _epoch(CalibrationError("y", "p", confidence_interval=50), batches)["calibration_error"]
    plain = _epoch(CalibrationError("y", "p"), batches)["calibration_error"]
    assert isinstance(narrow, ValWithError) and narrow.as_tuple() == again.as_tuple()  # repeatable under np.random.seed
    assert narrow.y == wide.y == plain  # the middle value is the debiased estimate itself
    assert wide.y_min < narrow.y_min < narrow.y_max < wide.y_max
    assert narrow.y_min < plain < narrow.y_max
    assert all(value == round(value, 4) for value in (*narrow, *wide))


def test_calibration_tensors_per_dataset_keys_and_resume() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    probs, labels = _sampled(90, sharpen=2.5, seed=2)
    one_hot = np.eye(3)[labels]
    batches = [{"y": one_hot[i:i + 20], "p": probs[i:i + 20]} for i in range(0, 90, 20)]
    ds_ids = ["a", "b", "a", "b", "b"]
    expected = _epoch(CalibrationError("y", "p"), [{"y": labels, "p": probs}])["calibration_error"]
    a_rows = np.r_[0:20, 40:60]
    expected_a = _epoch(CalibrationError("y", "p"), [{"y": labels[a_rows], "p": probs[a_rows]}])["calibration_error"]
    for convert in (np.asarray, torch.as_tensor, tf.convert_to_tensor):
        tensors = [{key: convert(value) for key, value in batch.items()} for batch in batches]
        data = _epoch(CalibrationError("y", "p"), tensors, ds_ids)
        assert data["calibration_error"] == expected and data["calibration_error|a"] == expected_a
        assert "calibration_error|b" in data
    trace = CalibrationError("y", "p", output_name="ce")
    assert trace.get_outputs(["a", "b"]) == ["ce", "ce|a", "ce|b"]
    assert CalibrationError("y", "p", per_ds=False).get_outputs(["a"]) == ["calibration_error"]
    make = lambda: CalibrationError("y", "p", confidence_interval=90)  # noqa: E731
    np.random.seed(0)
    uninterrupted = _epoch(make(), batches, ds_ids)
    np.random.seed(0)
    resumed = _resumed(make, batches, split=2, ds_ids=ds_ids)
    for key in ("calibration_error", "calibration_error|a", "calibration_error|b"):
        assert resumed[key] == uninterrupted[key]
    # a checkpoint at the start of an epoch restores an empty epoch: no value
    fresh = make()
    fresh.load_state_dict(make().state_dict())
    data = Data()
    fresh.on_epoch_end(data)
    assert "calibration_error" not in data


def test_calibration_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"method must be one of \['marginal', 'top-label'\], got 'top'"):
        CalibrationError("y", "p", method="top")
    with pytest.raises(ValueError, match=r"confidence_interval must be a percentage .* \(e.g. 95\) or None, got 100"):
        CalibrationError("y", "p", confidence_interval=100)
    trace = CalibrationError("y", "p")
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\] under 'p'.*softmax"):
        trace.on_batch_end(Data({"y": np.array([0, 1]), "p": np.array([[2.0, -1.0], [0.5, 0.5]])}))
    with pytest.raises(ValueError, match=r"class indices in 0..1 .* under 'y' .* such as \[0, 2\]"):
        trace.on_batch_end(Data({"y": np.array([0, 2]), "p": np.array([[0.5, 0.5], [0.5, 0.5]])}))
    with pytest.raises(ValueError, match=r"got 3 labels \('y'\) but 2 predictions \('p'\)"):
        trace.on_batch_end(Data({"y": np.array([0, 1, 1]), "p": np.array([[0.5, 0.5], [0.5, 0.5]])}))
    trace.on_batch_end(Data({"y": np.array([0, 1]), "p": np.array([[0.5, 0.5], [0.5, 0.5]])}))
    with pytest.raises(ValueError, match=r"shape \[3\] per sample .* after \[2\]"):
        trace.on_batch_end(Data({"y": np.array([0]), "p": np.array([[0.2, 0.3, 0.5]])}))


# ------------------------------------------------------------------------------------------------ MeanAveragePrecision

BOX_A, BOX_B = [10.0, 10.0, 20.0, 20.0], [50.0, 40.0, 10.0, 30.0]


def _gt(*images: list[tuple[list[float], int]], slots: int = 3) -> np.ndarray:
    """(batch, slots, 5) ground truth padded with zero rows."""
    array = np.zeros((len(images), slots, 5))
    for i, boxes in enumerate(images):
        for j, (box, label) in enumerate(boxes):
            array[i, j] = [*box, label]
    return array


def _pred(*images: list[tuple[list[float], int, float]], slots: int = 4) -> np.ndarray:
    """(batch, slots, 7) detections; unused slots have select 0 (and junk values that must be ignored)."""
    array = np.tile(np.array([1.0, 2.0, 3.0, 4.0, 0.0, 0.99, 0.0]), (len(images), slots, 1))
    for i, boxes in enumerate(images):
        for j, (box, label, score) in enumerate(boxes):
            array[i, j] = [*box, label, score, 1.0]
    return array


def _map(batches: list[tuple[np.ndarray, np.ndarray]], num_classes: int = 3, **kwargs: Any) -> tuple[Any, ...]:
    data = _epoch(MeanAveragePrecision(num_classes, **kwargs), [{"bbox": g, "pred": p} for g, p in batches])
    return data["mAP"], data["AP50"], data["AP75"]


def test_map_perfect_detector_and_missed_boxes() -> None:
    gt = _gt([(BOX_A, 0), (BOX_B, 1)], [(BOX_B, 0)])
    perfect = _pred([(BOX_A, 0, 0.9), (BOX_B, 1, 0.8)], [(BOX_B, 0, 0.7)])
    # (precision is tp / (tp + fp + eps), as in COCO: a hair under 1)
    assert _map([(gt, perfect)]) == pytest.approx((1.0, 1.0, 1.0))
    # class 0 misses one of its two boxes: precision 1 up to recall 0.5, i.e. at 51 of the 101 recall points;
    # class 1 is perfect
    half = _pred([(BOX_A, 0, 0.9), (BOX_B, 1, 0.8)], [])
    assert _map([(gt, half)]) == pytest.approx([(51 / 101 + 1) / 2] * 3)
    # a class with ground truth but no detection scores 0; a class with only detections (2) does not count
    none_for_1 = _pred([(BOX_A, 0, 0.9), (BOX_B, 2, 0.8)], [(BOX_B, 0, 0.7)])
    assert _map([(gt, none_for_1)]) == pytest.approx((0.5, 0.5, 0.5))
    # no ground truth anywhere: -1, as COCO and FastEstimator report
    assert _map([(_gt([]), _pred([(BOX_A, 0, 0.9)]))]) == (-1, -1, -1)


def test_map_localisation_sets_the_thresholds_met() -> None:
    # IoU 62.5 / 100 = 0.625: a match at thresholds 0.50, 0.55, 0.60 of the ten
    gt = _gt([([0.0, 0.0, 10.0, 10.0], 0)])
    pred = _pred([([0.0, 0.0, 10.0, 6.25], 0, 0.9)])
    assert _map([(gt, pred)]) == pytest.approx((0.3, 1.0, 0.0))


def test_map_ranking_across_images_and_the_detection_cap() -> None:
    gt_two = _gt([(BOX_A, 0)], [(BOX_B, 0)])
    # the false positive (image 2, far from BOX_B) outranks image 2's true positive: precisions 1, 1/2, 2/3 at
    # recalls 1/2, 1/2, 1 -> envelope 1 up to recall 1/2 (51 points), 2/3 beyond (50 points)
    pred = _pred([(BOX_A, 0, 0.9)], [([0.0, 0.0, 5.0, 5.0], 0, 0.8), (BOX_B, 0, 0.7)])
    assert _map([(gt_two, pred)])[0] == pytest.approx((51 + 50 * 2 / 3) / 101)
    # split over two batches, the ranking is the same
    assert _map([(gt_two[:1], pred[:1]), (gt_two[1:], pred[1:])])[0] == pytest.approx((51 + 50 * 2 / 3) / 101)
    # at most 100 detections per image and class, best scores first: 99 false positives leave the true one in at
    # rank 100 (precision 1/100 at recall 1), 100 push it out
    far = [([200.0 + i, 200.0, 5.0, 5.0], 0, 0.9) for i in range(100)]
    gt_one = _gt([(BOX_A, 0)])
    assert _map([(gt_one, _pred(far[:99] + [(BOX_A, 0, 0.1)], slots=101))])[0] == pytest.approx(0.01)
    assert _map([(gt_one, _pred(far + [(BOX_A, 0, 0.1)], slots=101))])[0] == 0.0
    # each ground-truth box matches one detection: a duplicate is a false positive (precision 1/2 after it)
    duplicate = _pred([(BOX_A, 0, 0.9), (BOX_A, 0, 0.8)])
    assert _map([(gt_one, duplicate)])[0] == pytest.approx(1.0)
    assert _map([(gt_one, _pred([(BOX_A, 0, 0.8), ([0.0, 0.0, 5.0, 5.0], 0, 0.9)]))])[0] == pytest.approx(0.5)


def test_map_six_columns_tensors_per_dataset_and_resume() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    gt = _gt([(BOX_A, 0), (BOX_B, 1)], [(BOX_B, 0)], [(BOX_A, 1), (BOX_B, 1)], [(BOX_A, 2)])
    pred = _pred([(BOX_A, 0, 0.9)], [(BOX_B, 0, 0.6), (BOX_A, 0, 0.95)], [(BOX_A, 1, 0.5), (BOX_B, 1, 0.4)],
                 [([12.0, 10.0, 20.0, 20.0], 2, 0.9)])
    batches = [{"bbox": gt[i:i + 1], "pred": pred[i:i + 1]} for i in range(4)]
    ds_ids = ["a", "b", "a", "b"]
    expected = _map([(gt, pred)])
    expected_a = _map([(gt[[0, 2]], pred[[0, 2]])])
    for convert in (torch.as_tensor, tf.convert_to_tensor):
        data = _epoch(MeanAveragePrecision(3), [{k: convert(v) for k, v in b.items()} for b in batches], ds_ids)
        assert (data["mAP"], data["AP50"], data["AP75"]) == pytest.approx(expected)
        assert (data["mAP|a"], data["AP50|a"], data["AP75|a"]) == pytest.approx(expected_a)
    # six columns (no select): every row is a detection; the unselected rows, turned into score-0 boxes far from
    # everything, rank last among class 0's detections, after all its boxes are found, and change nothing
    kept = pred[..., 6] > 0
    six = np.where(kept[..., None], pred[..., :6], np.array([300.0, 300.0, 1.0, 1.0, 0.0, 0.0]))
    assert _map([(gt, six)]) == pytest.approx(expected)
    assert MeanAveragePrecision(3, output_name=("m", "a5", "a7")).get_outputs(["x"]) == \
        ["m", "a5", "a7", "m|x", "a5|x", "a7|x"]
    uninterrupted = _epoch(MeanAveragePrecision(3), batches, ds_ids)
    resumed = _resumed(lambda: MeanAveragePrecision(3), batches, split=2, ds_ids=ds_ids)
    for key in ("mAP", "AP50", "AP75", "mAP|a", "AP75|b"):
        assert resumed[key] == uninterrupted[key]


def test_map_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"num_classes must be a positive int .* got 0"):
        MeanAveragePrecision(0)
    with pytest.raises(ValueError, match=r"output_name must name 3 keys .* got 'mAP'"):
        MeanAveragePrecision(2, output_name="mAP")
    trace = MeanAveragePrecision(2)
    with pytest.raises(ValueError, match=r"box labels \[2.0\] under 'bbox', outside 0..1; set num_classes"):
        trace.on_batch_end(Data({"bbox": _gt([(BOX_A, 2)]), "pred": _pred([])}))
    with pytest.raises(ValueError, match=r"\(batch, num_detections, 7\) .* under 'pred', got shape \[1, 4, 5\]"):
        trace.on_batch_end(Data({"bbox": _gt([(BOX_A, 1)]), "pred": _pred([])[..., :5]}))
    with pytest.raises(ValueError, match=r"got 2 images under 'bbox' but 1 under 'pred'"):
        trace.on_batch_end(Data({"bbox": _gt([], []), "pred": _pred([])}))


# ----------------------------------------------------------------------------------------------------------- BleuScore

def _bleu(references: Any, hypotheses: Any, **kwargs: Any) -> Any:
    data = _epoch(BleuScore("y", "p", **kwargs), [{"y": np.asarray(references), "p": np.asarray(hypotheses)}])
    return data["bleu_score"]


def test_bleu_hand_computed_values() -> None:
    assert _bleu([[4, 5, 6, 7, 8]], [[4, 5, 6, 7, 8]]) == 1.0
    # unigrams 4/6, bigrams 3/5, trigrams 2/4, 4-grams 1/3; equal lengths: no brevity penalty
    assert _bleu([[1, 2, 3, 4, 5, 6]], [[1, 2, 3, 4, 7, 8]]) == round((4 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, 5)
    # BLEU-2 of the same pair
    assert _bleu([[1, 2, 3, 4, 5, 6]], [[1, 2, 3, 4, 7, 8]], n_gram=2) == round((4 / 6 * 3 / 5) ** 0.5, 5)
    # no bigram right: orders 2, 3, 4 get smoothing 4's ln(4) / (2^i * 5) / (predicted n-grams 3, 2, 1)
    smoothed = [math.log(4) / (2 * 5) / 3, math.log(4) / (4 * 5) / 2, math.log(4) / (8 * 5) / 1]
    assert _bleu([[1, 2, 3, 4]], [[1, 3, 2, 4]]) == round(math.prod([1.0, *smoothed]) ** 0.25, 5)
    # short output: brevity penalty exp(1 - 6/3); no 4-gram predicted counts as 0 of 1, smoothed ln(3) / 10
    assert _bleu([[1, 2, 3, 4, 5, 6]], [[1, 2, 3, 0, 0, 0]]) == round(math.exp(-1) * (math.log(3) / 10) ** 0.25, 5)
    # not one token right: 0
    assert _bleu([[1, 2, 3]], [[4, 5, 6]]) == 0.0


def test_bleu_is_a_corpus_score_not_a_mean_of_sentences() -> None:
    # A (perfect): 4/4, 3/3, 2/2, 1/1; B: 2/4, 1/3, 0/2, 0/1 -> corpus 6/8, 4/6, 2/4, 1/2 over 8 tokens each side
    references, hypotheses = [[1, 2, 3, 4], [5, 6, 7, 8]], [[1, 2, 3, 4], [5, 6, 9, 9]]
    expected = round((6 / 8 * 4 / 6 * 2 / 4 * 1 / 2) ** 0.25, 5)
    batches = [{"y": np.array(references[:1]), "p": np.array(hypotheses[:1])},
               {"y": np.array(references[1:]), "p": np.array(hypotheses[1:])}]
    trace = BleuScore("y", "p")
    trace.system = SimpleNamespace(ds_id="")
    trace.on_epoch_begin(Data())
    per_sentence = []
    for batch in batches:
        data = Data(batch)
        trace.on_batch_end(data)
        per_sentence.append(data.read_per_instance_logs()["bleu_score"])
    end = Data()
    trace.on_epoch_end(end)
    assert end["bleu_score"] == expected
    # sentence B alone: 2/4, 1/3, then smoothed ln(4)/10/2 and ln(4)/20/1
    sentence_b = (2 / 4 * 1 / 3 * math.log(4) / 10 / 2 * math.log(4) / 20) ** 0.25
    np.testing.assert_allclose(np.concatenate(per_sentence), [1.0, sentence_b])


def test_bleu_reads_scores_padding_tensors_and_datasets() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    references = np.array([[1, 2, 3, 4, 5, 6], [3, 4, 5, 6, 0, 0]])
    hypotheses = np.array([[1, 2, 3, 4, 7, 8], [3, 4, 0, 5, 6, 0]])  # padding anywhere is dropped: b is perfect
    expected = _bleu(references, hypotheses)
    scores = np.eye(9)[hypotheses] * 0.8 + 0.02  # (batch, length, vocabulary) scores: argmax per position
    assert _bleu(references, scores) == expected
    for convert in (torch.as_tensor, tf.convert_to_tensor):
        data = _epoch(BleuScore("y", "p"), [{"y": convert(references[i:i + 1]), "p": convert(scores[i:i + 1])}
                                            for i in range(2)], ["a", "b"])
        assert data["bleu_score"] == expected
        assert data["bleu_score|a"] == round((1 / 15) ** 0.25, 5) and data["bleu_score|b"] == 1.0
    batches = [{"y": references[i:i + 1], "p": hypotheses[i:i + 1]} for i in range(2)] * 2
    make = lambda: BleuScore("y", "p", n_gram=3)  # noqa: E731
    uninterrupted = _epoch(make(), batches, ["a", "b", "b", "a"])
    resumed = _resumed(make, batches, split=1, ds_ids=["a", "b", "b", "a"])
    for key in ("bleu_score", "bleu_score|a", "bleu_score|b"):
        assert resumed[key] == uninterrupted[key]
    with pytest.raises(ValueError, match="n_gram=3 was given a checkpoint of n_gram=4"):
        make().load_state_dict(BleuScore("y", "p").state_dict())


def test_bleu_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"n_gram must be a positive int .* got 0"):
        BleuScore("y", "p", n_gram=0)
    trace = BleuScore("y", "p")
    with pytest.raises(ValueError, match=r"got 2 references \('y'\) but 1 predictions \('p'\)"):
        trace.on_batch_end(Data({"y": np.ones((2, 3)), "p": np.ones((1, 3))}))
    with pytest.raises(ValueError, match=r"whole-number token ids under 'y', got values such as \[1.5\]"):
        trace.on_batch_end(Data({"y": np.array([[1.5, 2.0]]), "p": np.ones((1, 2))}))
    with pytest.raises(ValueError, match=r"\(batch, length\) token ids .* under 'p', got shape \[3\]"):
        trace.on_batch_end(Data({"y": np.ones((3, 2)), "p": np.ones(3)}))


# ------------------------------------------------------------------------------------------------------------ Estimator

def test_estimator_logs_the_three_metrics_per_dataset(capsys: pytest.CaptureFixture) -> None:
    """In-process fit: pipeline keys reach the traces as torch tensors, two eval datasets of 12 samples give
    per-dataset keys next to the overall values, and the Logger prints them."""
    train, evaluation = digits_arrays(n_train=8, n_eval=24)
    probs, labels = _two_level_example()
    # dataset a: the two-level example (0.2); dataset b: always 0.5 with labels half and half (calibrated: 0)
    binary = np.concatenate([probs, np.full(12, 0.5)])
    evaluation.update(
        cal_y=np.concatenate([labels, np.arange(12) % 2]), cal_p=np.stack([1 - binary, binary], axis=1),
        # a: both boxes found; b: one of two
        bbox=np.concatenate([_gt([(BOX_A, 0), (BOX_B, 1)])] * 24),
        pred=np.concatenate([_pred([(BOX_A, 0, 0.9), (BOX_B, 1, 0.8)])] * 12 + [_pred([(BOX_A, 0, 0.9)])] * 12),
        tokens=np.array([[1, 2, 3, 4, 5, 6]] * 24), tokens_pred=np.array([[1, 2, 3, 4, 7, 8]] * 24))
    pipeline = ToyPipeline(train, evaluation, batch_size=8)
    pipeline.data["eval"] = {"a": {key: value[:12] for key, value in evaluation.items()},
                             "b": {key: value[12:] for key, value in evaluation.items()}}
    traces = [CalibrationError("cal_y", "cal_p"), MeanAveragePrecision(num_classes=2),
              BleuScore("tokens", "tokens_pred"), CalibrationError("y", "y_pred", output_name="model_ce")]
    estimator = fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, traces=traces, log_steps=1)
    history = estimator.fit().history["eval"]
    assert history["calibration_error|a"][1] == pytest.approx(0.2) and history["calibration_error|b"][1] == 0.0
    # over both: columns take 3 values (bins 0.2, 0.5, 0.8 of 6, 12, 6 samples, frequencies 0.5, 0.5, 1)
    both = (0.25 * 0.04 + 0.5 * (0.0 - 0.25 / 11) + 0.25 * 0.04) ** 0.5
    assert history["calibration_error"][1] == round(both, 4)
    assert history["mAP|a"][1] == pytest.approx(1.0) and history["AP50|b"][1] == pytest.approx((1 + 0) / 2)
    assert history["mAP"][1] == pytest.approx((1 + 51 / 101) / 2)  # class 1: half its 24 boxes found
    assert history["bleu_score"][1] == history["bleu_score|b"][1] == round((1 / 15) ** 0.25, 5)
    assert 0.0 <= history["model_ce"][1] <= 1.0 and "model_ce|a" in history
    assert "mAP: 0.752" in capsys.readouterr().out
