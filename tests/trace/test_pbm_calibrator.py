"""PBMCalibrator and the Calibrate op: the numpy Platt-binner fit against sklearn's logistic regression and a
hand-computed binning, lower calibration error on an over-confident classifier, the saved file reproducing the
in-memory calibrator in Calibrate (directly and as a Network pop in Estimator.test()), save_if_key, exact
mid-epoch resume, and errors."""

from __future__ import annotations

import copy
import os
import pickle
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.op.numpyop.univariate.calibrate import Calibrate  # noqa: E402
from fe_ray.trace import Data, RestoreWizard, Trace  # noqa: E402
from fe_ray.trace.adapt import PBMCalibrator  # noqa: E402
from fe_ray.trace.adapt.platt_binner import PlattBinnerMarginal, equal_mass_bounds, fit_platt, logit  # noqa: E402
from fe_ray.trace.metric.calibration_error import calibration_error  # noqa: E402
from tests.estimator_helpers import AtTrainStep, ToyPipeline, digits_arrays, tf_mlp, torch_mlp  # noqa: E402


def _overconfident(n: int, k: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels and softmax probabilities of a classifier whose logits are 4x too large (right ~70% of the time but
    almost always nearly certain)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(0.0, 1.0, (n, k))
    logits[np.arange(n), labels] += 1.0
    logits *= 4.0
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    return labels, probs / probs.sum(axis=1, keepdims=True)


def _batches(labels: np.ndarray, probs: np.ndarray, size: int) -> list[dict[str, np.ndarray]]:
    return [{"y": labels[i:i + size], "pred": probs[i:i + size]} for i in range(0, len(labels), size)]


def _epoch(trace: PBMCalibrator, batches: list[dict[str, Any]], logs: dict[str, Any] | None = None) -> Data:
    data = Data()
    trace.on_epoch_begin(data)
    for batch in batches:
        trace.on_batch_end(Data(batch))
    for key, value in (logs or {}).items():
        data.write_with_log(key, value)
    trace.on_epoch_end(data)
    return data


# ------------------------------------------------------------------------------------------ the calibrator itself
def test_platt_fit_equals_sklearns_unregularized_logistic_regression() -> None:
    labels, probs = _overconfident(500)
    for c in range(3):
        slope, intercept = fit_platt(probs[:, c], labels == c)
        reference = LogisticRegression(C=1e10, tol=1e-12, max_iter=10000).fit(logit(probs[:, c])[:, None],
                                                                               labels == c)
        np.testing.assert_allclose([slope, intercept], [reference.coef_[0, 0], reference.intercept_[0]], rtol=1e-6,
                                   atol=1e-8)
    assert fit_platt(np.array([0.2, 0.7]), np.array([0, 0])) == (0.0, -np.inf)  # never the label: the limit, 0


def test_equal_mass_bins_and_bin_values_by_hand() -> None:
    values = np.array([0.9, 0.1, 0.3, 0.2, 0.6, 0.8, 0.4])
    # sorted 0.1 0.2 0.3 0.4 0.6 0.8 0.9 split 3/2/2 -> bounds between 0.3|0.4 and 0.6|0.8, then 1.0
    np.testing.assert_allclose(equal_mass_bounds(values, 3), [0.35, 0.7, 1.0])
    np.testing.assert_allclose(equal_mass_bounds(values, 20), [0.15, 0.25, 0.35, 0.5, 0.7, 0.85, 1.0])
    # A Platt map that is the identity (slope 1, intercept 0): calibrated values are the bins' means.
    calibrator = PlattBinnerMarginal([1.0], [0.0], [[0.35, 0.7, 1.0]], [[0.2, 0.5, 0.85]], columns=0)
    np.testing.assert_allclose(calibrator(np.array([0.05, 0.35, 0.36, 0.99])), [0.2, 0.2, 0.5, 0.85])


def test_fit_is_platt_then_binning_per_class() -> None:
    labels, probs = _overconfident(300, seed=1)
    calibrator = PlattBinnerMarginal.fit(probs, labels, num_bins=10)
    out = calibrator(probs)
    assert out.shape == probs.shape and out.dtype == np.float64
    for c in range(3):
        slope, intercept = fit_platt(probs[:, c], labels == c)
        mapped = 1.0 / (1.0 + np.exp(-(slope * logit(probs[:, c]) + intercept)))
        order = np.argsort(mapped, kind="stable")
        # 300 samples in 10 equal-mass bins of 30: each sample gets its bin's mean mapped probability
        expected = np.empty(300)
        for group in np.array_split(order, 10):
            expected[group] = mapped[group].mean()
        np.testing.assert_allclose(out[:, c], expected, rtol=1e-9)
        assert np.unique(out[:, c]).size == 10


def test_binary_column_and_absent_class() -> None:
    labels, probs = _overconfident(200, k=2, seed=2)
    binary = PlattBinnerMarginal.fit(probs[:, 1:], labels)
    full = PlattBinnerMarginal.fit(probs, labels)
    np.testing.assert_allclose(binary(probs[:, 1:]), full(probs)[:, 1:])
    np.testing.assert_allclose(PlattBinnerMarginal.fit(probs[:, 1], labels)(probs[:, 1]), full(probs)[:, 1])
    # class 2 never occurs: its column becomes 0, the others are calibrated as usual
    padded = np.concatenate([probs * 0.9, np.full((200, 1), 0.1)], axis=1)
    calibrated = PlattBinnerMarginal.fit(padded, labels)(padded)
    assert np.all(calibrated[:, 2] == 0.0) and np.all(calibrated[:, :2] > 0.0)


# --------------------------------------------------------------------------------------------------- the trace
def test_calibration_error_drops_and_the_saved_file_matches_in_calibrate(tmp_path: Any) -> None:
    labels, probs = _overconfident(900, seed=3)
    path = tmp_path / "calib" / "pbm.pkl"
    trace = PBMCalibrator("y", "pred", save_path=str(path))
    assert trace.outputs == ["pred_calibrated"] and trace.mode == {"eval"}
    data = _epoch(trace, _batches(labels, probs, 64))
    calibrated = data["pred_calibrated"]
    assert "pred_calibrated" not in data.read_logs()  # written for later traces, not logged
    before, after = calibration_error(probs, labels, "marginal"), calibration_error(calibrated, labels, "marginal")
    assert before > 0.15 and after < 0.05, (before, after)
    # on fresh samples of the same classifier too
    new_labels, new_probs = _overconfident(900, seed=4)
    assert calibration_error(trace.calibrator(new_probs), new_labels, "marginal") < 0.5 * calibration_error(
        new_probs, new_labels, "marginal")
    # the file holds the same function: given to Calibrate by path, it reproduces the in-memory outputs
    with open(path, "rb") as file:
        np.testing.assert_array_equal(pickle.load(file)(probs), calibrated)
    op = Calibrate(inputs="pred", outputs="pred_cal", calibration_fn=str(path))
    assert op.mode == {"test", "infer"}
    assert op.forward_batch([new_probs], {"warmup": True})[0] is new_probs  # not read during warmup
    np.testing.assert_array_equal(op.forward_batch([new_probs], {})[0], trace.calibrator(new_probs))
    np.testing.assert_array_equal(op.forward([new_probs[5]], {})[0], trace.calibrator(new_probs)[5])  # one sample
    direct = Calibrate(inputs=["a", "b"], outputs=["a_cal", "b_cal"], calibration_fn=trace.calibrator)
    got = direct.forward_batch([probs, new_probs], {})
    np.testing.assert_array_equal(got[1], trace.calibrator(new_probs))


def test_tensors_from_either_framework() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    labels, probs = _overconfident(120, seed=5)
    expected = _epoch(PBMCalibrator("y", "pred"), _batches(labels, probs, 32))["pred_calibrated"]
    for convert in (torch.as_tensor, tf.convert_to_tensor):
        onehot = np.eye(3)[labels]  # one-hot labels read as their argmax
        batches = [{key: convert(value) for key, value in batch.items()} for batch in _batches(labels, probs, 32)]
        for start, batch in zip(range(0, 120, 32), batches):
            batch["y"] = convert(onehot[start:start + 32])
        np.testing.assert_allclose(_epoch(PBMCalibrator("y", "pred"), batches)["pred_calibrated"], expected)


def test_save_if_key_writes_only_when_the_key_is_zero(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "pbm.pkl"
    trace = PBMCalibrator("y", "pred", output_name="cal", save_path=str(path), save_if_key="since_best")
    assert trace.inputs == ["y", "pred", "since_best"] and trace.outputs == ["cal"]
    written = []
    for epoch, since_best in enumerate([0, 1, 0, 2]):
        labels, probs = _overconfident(100, seed=10 + epoch)
        _epoch(trace, _batches(labels, probs, 50), logs={"since_best": np.int64(since_best)})
        with open(path, "rb") as file:
            written.append(pickle.load(file).state_dict()["slopes"])
        if since_best == 0:
            np.testing.assert_array_equal(written[-1], trace.calibrator.slopes)
    np.testing.assert_array_equal(written[1], written[0])  # epoch 2 kept epoch 1's file
    np.testing.assert_array_equal(written[3], written[2])
    assert not np.array_equal(written[2], written[0])
    assert capsys.readouterr().out.count("FastEstimator-PBMCalibrator: Calibrator written to") == 2


def test_state_round_trip_mid_epoch_gives_the_uninterrupted_calibrator() -> None:
    labels, probs = _overconfident(200, seed=6)
    batches = _batches(labels, probs, 40)
    expected = _epoch(PBMCalibrator("y", "pred"), batches)["pred_calibrated"]
    first = PBMCalibrator("y", "pred")
    first.on_epoch_begin(Data())
    for batch in batches[:2]:
        first.on_batch_end(Data(batch))
    state = copy.deepcopy(first.state_dict())  # as a checkpoint stores it
    first.on_batch_end(Data(batches[2]))  # later batches must not leak into the saved state
    resumed = PBMCalibrator("y", "pred")
    resumed.load_state_dict(pickle.loads(pickle.dumps(state)))
    for batch in batches[2:]:
        resumed.on_batch_end(Data(batch))
    data = Data()
    resumed.on_epoch_end(data)
    np.testing.assert_array_equal(data["pred_calibrated"], expected)
    # the fitted calibrator travels with the state too
    again = PBMCalibrator("y", "pred")
    again.load_state_dict(resumed.state_dict())
    np.testing.assert_array_equal(again.calibrator(probs), resumed.calibrator(probs))
    empty = PBMCalibrator("y", "pred")
    empty.load_state_dict(PBMCalibrator("y", "pred").state_dict())
    assert _epoch(empty, []).get("pred_calibrated") is None and empty.calibrator is None  # nothing to fit


def test_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"save_if_key='since_best_acc' .* save_path is None; pass save_path="):
        PBMCalibrator("y", "pred", save_if_key="since_best_acc")
    trace = PBMCalibrator("y", "pred")
    with pytest.raises(ValueError, match=r"got 3 labels \('y'\) but 2 predictions \('pred'\)"):
        trace.on_batch_end(Data({"y": np.array([0, 1, 1]), "pred": np.full((2, 2), 0.5)}))
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\] under 'pred'.*apply a softmax"):
        trace.on_batch_end(Data({"y": np.array([0, 1]), "pred": np.array([[2.0, -1.0], [0.5, 0.5]])}))
    with pytest.raises(ValueError, match=r"class indices in 0..1 .* under 'y'"):
        trace.on_batch_end(Data({"y": np.array([0, 2]), "pred": np.full((2, 2), 0.5)}))
    trace.on_batch_end(Data({"y": np.array([0, 1]), "pred": np.full((2, 2), 0.5)}))
    with pytest.raises(ValueError, match=r"shape \[3\] per sample .* after \[2\]"):
        trace.on_batch_end(Data({"y": np.array([0, 1]), "pred": np.full((2, 3), 0.3)}))
    with pytest.raises(TypeError, match=r"callable or the path of a pickled one, got int"):
        Calibrate("pred", "cal", calibration_fn=3)
    with pytest.raises(ValueError, match=r"2 input\(s\) .* 1 output\(s\)"):
        Calibrate(["a", "b"], "cal", calibration_fn=lambda x: x)
    with pytest.raises(FileNotFoundError, match=r"no calibration function at .*missing.pkl; run the PBMCalibrator"):
        Calibrate("pred", "cal", calibration_fn="missing.pkl").forward_batch([np.zeros((1, 2))], {})
    calibrator = PlattBinnerMarginal.fit(*_overconfident(60)[::-1])
    with pytest.raises(ValueError, match=r"fitted on predictions with 3 classes, but got .* shape \[4, 2\]"):
        calibrator(np.full((4, 2), 0.5))


# -------------------------------------------------------------------------------------------- in Estimator runs
class Record(Trace):
    """Keeps the test batches' predictions and their calibrated twin."""

    def __init__(self) -> None:
        super().__init__(inputs=["y_pred", "y_cal"], mode="test")
        self.pred: list[np.ndarray] = []
        self.cal: list[np.ndarray] = []

    def on_batch_end(self, data: Any) -> None:
        self.pred.append(np.asarray(fe.backend.to_number(data["y_pred"])))
        self.cal.append(np.asarray(data["y_cal"]))


class Interrupted(RuntimeError):
    pass


class Interrupt(AtTrainStep):
    def act(self, data: Any) -> None:
        raise Interrupted(f"before step {self.step}")


def _network(model: Any, pops: list[Any] | None = None) -> Any:
    from fe_ray.op.tensorop.loss import CrossEntropy
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp

    return fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                           CrossEntropy(inputs=("y_pred", "y"), outputs="ce"), UpdateOp(model=model, loss_name="ce")],
                      pops=pops)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_fit_saves_and_test_calibrates_with_the_pop(tmp_path: Any, framework: str) -> None:
    """fit(): the trace fits on the evaluation epoch and saves; test(): Calibrate reads that file as a Network pop
    (absent during fit's warmup) and calibrates each test batch as the trace's calibrator does."""
    path = tmp_path / "pbm.pkl"
    train, evaluation = digits_arrays(framework, n_train=64, n_eval=48)
    model = torch_mlp(lr=0.05) if framework == "torch" else tf_mlp(lr=0.05)
    network = _network(model, pops=[Calibrate(inputs="y_pred", outputs="y_cal", calibration_fn=str(path))])
    pbm, record = PBMCalibrator("y", "y_pred", save_path=str(path)), Record()
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=16, test=evaluation), network, epochs=2,
                             traces=[pbm, record], log_steps=None)
    estimator.fit()
    estimator.test()
    pred, cal = np.concatenate(record.pred), np.concatenate(record.cal)
    assert pred.shape == cal.shape == (48, 10)
    np.testing.assert_array_equal(cal, pbm.calibrator(pred))
    assert not np.allclose(cal, pred)


def _resumable(directory: str, interrupt: int | None = None) -> PBMCalibrator:
    fe.enable_deterministic(3)
    train, evaluation = digits_arrays(n_train=48, n_eval=16)
    pbm = PBMCalibrator("y", "y_pred", mode="train")  # a checkpoint in mid-epoch holds part of the epoch
    traces = [pbm, Interrupt(interrupt), RestoreWizard(directory, steps=2)]
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8, seed=1), _network(torch_mlp(seed=3)),
                             epochs=2, traces=traces, log_steps=None)
    estimator.fit()
    return pbm


def test_interrupted_run_resumes_with_the_same_calibrator(tmp_path: Any) -> None:
    reference = _resumable(str(tmp_path / "ref"))
    with pytest.raises(Interrupted):  # 6 steps per epoch: the checkpoint of step 8 is in the middle of epoch 2
        _resumable(str(tmp_path / "ckpt"), interrupt=9)
    resumed = _resumable(str(tmp_path / "ckpt"))
    want, got = reference.calibrator.state_dict(), resumed.calibrator.state_dict()
    np.testing.assert_allclose(got["slopes"], want["slopes"], rtol=1e-6)
    for key in ("bounds", "values"):
        for mine, theirs in zip(got[key], want[key]):
            np.testing.assert_allclose(mine, theirs, rtol=1e-6)
