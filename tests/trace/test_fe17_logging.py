"""What a run logs, against FastEstimator 1.7.0's traces: per-dataset losses in training and evaluation, a non-loss
EarlyStopping monitor averaged over evaluation, Accuracy's per-sample rows, and the Logger's layout."""

from __future__ import annotations

import csv
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import NumpyDataset
from fe_ray.op.tensorop import LambdaOp
from fe_ray.trace import Accuracy, EarlyStopping, Trace
from fe_ray.trace.io import CSVLogger
from fe_ray.trace.logger import natural_key
from tests.estimator_helpers import classifier_network, digits_arrays, torch_mlp


def datasets(n: int, with_ids: bool = False) -> dict[str, NumpyDataset]:
    train, _ = digits_arrays(n_train=2 * n, n_eval=8)
    halves = [{key: value[i * n:(i + 1) * n] for key, value in train.items()} for i in range(2)]
    if with_ids:
        for i, half in enumerate(halves):
            half["id"] = np.arange(i * n, (i + 1) * n)
    return {"a": NumpyDataset(halves[0]), "b": NumpyDataset(halves[1])}


def test_training_on_several_datasets_logs_each_loss_under_its_dataset(capsys) -> None:
    """FastEstimator's TrainEssential writes through DSData: 'ce|a' while dataset a trains, 'ce|b' for b."""
    pipeline = fe.Pipeline(train_data=datasets(8), batch_size=8)
    estimator = fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, log_steps=1)
    train = estimator.fit().history["train"]
    assert sorted(train["ce|a"]) == [1] and sorted(train["ce|b"]) == [2]
    assert "ce" not in train and sorted(train["steps/sec|b"]) == [2]
    out = capsys.readouterr().out
    assert "FastEstimator-Train: step: 2; ce|b: " in out


def test_early_stopping_on_a_network_output_that_is_no_loss_stops_the_run(capsys) -> None:
    """EarlyStopping asks for its monitor to be averaged over evaluation, as FastEstimator's does: a network output
    that is not a loss was never logged and the run went on to its last epoch."""
    counter = {"n": 0.0}

    def rising(x: Any) -> Any:
        counter["n"] += 1.0
        return x.sum() * 0 + counter["n"]

    network = classifier_network(torch_mlp())
    network = fe.Network([*network.ops, LambdaOp(fn=rising, inputs="x", outputs="m", mode="eval")])
    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    pipeline = fe.Pipeline(train_data=NumpyDataset(train), eval_data=NumpyDataset(evaluation), batch_size=8)
    estimator = fe.Estimator(pipeline, network, epochs=4, traces=EarlyStopping(monitor="m", patience=1))
    summary = estimator.fit()
    assert sorted(summary.history["eval"]["m"]) == [2, 4]  # epoch 2 did not improve on epoch 1: stop
    assert "triggered an early stop" in capsys.readouterr().out


def test_accuracy_writes_each_samples_hit_for_csv_logger(tmp_path) -> None:
    """FastEstimator's Accuracy writes a 0/1 per sample (per_instance log), under 'accuracy|<ds_id>' when the mode
    has several datasets: CSVLogger(instance_id_key=...) wrote no per-sample rows for it."""
    path = tmp_path / "log.csv"
    train, _ = digits_arrays(n_train=16, n_eval=8)
    pipeline = fe.Pipeline(train_data=NumpyDataset(train), eval_data=datasets(4, with_ids=True), batch_size=4)
    traces = [Accuracy("y", "y_pred"), CSVLogger(str(path), instance_id_key="id", mode="eval")]
    fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, traces=traces, log_steps=None).fit()
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    per_sample = [row for row in rows if row.get("instance_id")]
    assert sorted(int(row["instance_id"]) for row in per_sample) == list(range(8))
    assert {row["accuracy|a"] for row in per_sample if int(row["instance_id"]) < 4} <= {"0", "1"}
    assert {row["accuracy|b"] for row in per_sample if int(row["instance_id"]) >= 4} <= {"0", "1"}


def test_logger_sorts_keys_naturally_and_prints_arrays_on_their_own_lines(capsys) -> None:
    class Writes(Trace):
        def on_epoch_end(self, data: Any) -> None:
            data.write_with_log("x10", 1)
            data.write_with_log("x2", 2)
            data.write_with_log("Matrix", np.arange(12).reshape(3, 4))

    train, evaluation = digits_arrays(n_train=8, n_eval=8)
    pipeline = fe.Pipeline(train_data=NumpyDataset(train), eval_data=NumpyDataset(evaluation), batch_size=8)
    fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, traces=Writes(mode="eval"), log_steps=0).fit()
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("FastEstimator-Eval: step: 1; epoch: 1;"))
    assert line.index("x2: 2;") < line.index("x10: 1;") and "Matrix" not in line
    assert f"{line}\nMatrix:\n[[ 0, 1, 2, 3],\n [ 4, 5, 6, 7],\n [ 8, 9,10,11]];" in out


@pytest.mark.parametrize("keys, ordered", [(["b", "A", "a10", "a2"], ["A", "a2", "a10", "b"]),
                                           (["ce|ds10", "ce|ds9", "ce"], ["ce", "ce|ds9", "ce|ds10"])])
def test_natural_key_orders_numbers_by_value_and_ignores_case(keys: list[str], ordered: list[str]) -> None:
    assert sorted(keys, key=natural_key) == ordered


def test_val_with_error_compares_and_computes_on_its_value_as_fastestimators() -> None:
    """FastEstimator's ValWithError compares, adds and multiplies by y (so BestModelSaver / EarlyStopping can
    watch one); it was a plain tuple: ``v > 1.5`` raised, ``v * 2`` repeated it and max() compared y_min first."""
    from fe_ray.summary import ValWithError
    from fe_ray.trace.best_value import epoch_value
    from fe_ray.trace.io.csv_logger import csv_value
    from fe_ray.trace.trace import Data

    band = ValWithError(1.0, 2.0, 3.0)
    assert band > 1.5 and band <= 2.0 and band == 2.0 and band != 2.5
    assert (band + 1, 1 + band, band - 1, 3 - band, band * 2, 2 * band, abs(ValWithError(-3, -2, -1))) == \
        (3.0, 3.0, 1.0, 1.0, 4.0, 4.0, 2)
    assert max([band, ValWithError(0.0, 5.0, 6.0)]).as_tuple() == (0.0, 5.0, 6.0)
    assert tuple(band) == (1.0, 2.0, 3.0) and band[2] == 3.0  # still indexes and unpacks
    # an asymmetric band is watched by its value, not the mean of the triple
    assert epoch_value(Data({"err": ValWithError(0.0, 0.1, 0.8)}), "err") == pytest.approx(0.1)
    assert csv_value(ValWithError(0.1, 0.2, 0.3)) == "(0.1; 0.2; 0.3)"  # FastEstimator's CSV cell


def test_logged_values_print_as_fastestimators_logger_prints_them() -> None:
    """FastEstimator 1.7.0 prints str(to_number(value)): numpy's text of a float32, Python floats in full, a
    one-element array as an array; fe_ray printed 7 significant digits ('2.311319', '0.0001', '1')."""
    from fe_ray.summary.summary import ValWithError
    from fe_ray.trace.logger import format_value

    assert [format_value(value) for value in (np.float32(2.3113186), np.float32(1e-4), 1.0, 0.7555555555555555,
                                              np.array([1.0]), np.int64(7), "adam")] == [
        "2.3113186", "1e-04", "1.0", "0.7555555555555555", "[1.]", "7", "adam"]
    assert format_value(ValWithError(0.1, 0.5949536561965942, 0.9)) == "(0.1, 0.5949536561965942, 0.9)"


def test_the_final_learning_rate_prints_as_fastestimator_logs_it(capsys) -> None:
    """The Finish line's rate: a float32 rate (LRScheduler's, TensorFlow's) prints as FastEstimator's numpy float32
    does ('0.0009'), not as the float32's binary expansion ('0.0008999999845400453'); a Python rate stays as set."""
    from fe_ray.trace.adapt import LRScheduler

    train, _ = digits_arrays(n_train=8, n_eval=8)
    model = torch_mlp(lr=1 / 3)
    pipeline = fe.Pipeline(train_data=NumpyDataset(train), batch_size=8)
    estimator = fe.Estimator(pipeline, classifier_network(model), epochs=1, log_steps=1)
    estimator.fit()
    assert "mlp_lr: 0.3333333333333333; total_time" in capsys.readouterr().out  # not float32-exact: kept
    estimator = fe.Estimator(pipeline, classifier_network(model), epochs=1, log_steps=1,
                             traces=LRScheduler(model=model, lr_fn=lambda epoch: 0.0009))
    history = estimator.fit().history["train"]["mlp_lr"]
    out = capsys.readouterr().out
    assert "FastEstimator-Finish: step: 1; mlp_lr: 0.0009; total_time" in out
    assert isinstance(history[1], np.float32)


def test_lines_before_any_training_step_print_step_none(capsys) -> None:
    """As FastEstimator: test() without fit(), and a fit stopped in on_begin, print 'step: None' (the Summary keeps
    their values at step 0)."""
    class Stop(Trace):
        def on_begin(self, data: Any) -> None:
            self.system.stop_training = True

    train, evaluation = digits_arrays(n_train=8, n_eval=8)
    pipeline = fe.Pipeline(train_data=NumpyDataset(train), test_data=NumpyDataset(evaluation), batch_size=8)
    network = classifier_network(torch_mlp())
    summary = fe.Estimator(pipeline, network, epochs=1, traces=Accuracy("y", "y_pred")).test()
    stopped = fe.Estimator(pipeline, network, epochs=1, traces=Stop(mode="train")).fit()
    out = capsys.readouterr().out
    assert "FastEstimator-Test: step: None; epoch: 1; accuracy: " in out
    assert "FastEstimator-Finish: step: None; mlp_lr: " in out
    assert list(summary.history["test"]["accuracy"]) == [0] and list(stopped.history["train"]["mlp_lr"]) == [0]
