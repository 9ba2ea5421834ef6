"""TerminateOnNaN, ReduceLROnPlateau and CSVLogger in in-process runs: when training stops, which rates are set and
logged, what the CSV holds, and that an interrupted run resumed from its checkpoint ends exactly as an
uninterrupted one."""

from __future__ import annotations

import csv
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_lr  # noqa: E402
from fe_ray.trace import RestoreWizard, Trace  # noqa: E402
from fe_ray.trace.adapt import ReduceLROnPlateau, TerminateOnNaN  # noqa: E402
from fe_ray.trace.adapt.terminate_on_nan import has_nan  # noqa: E402
from fe_ray.trace.io import CSVLogger  # noqa: E402
from fe_ray.trace.io.csv_logger import csv_value  # noqa: E402
from fe_ray.trace.metric import F1Score  # noqa: E402
from tests.estimator_helpers import (  # noqa: E402
    AtTrainStep,
    Feed,
    ToyPipeline,
    classifier_network,
    digits_arrays,
    torch_mlp,
)

TIMING = {"steps/sec", "epoch_time(sec)", "total_time(sec)"}


def _estimator(traces: list[Any], epochs: int, model: Any = None, log_steps: int | None = None, n_train: int = 32,
               n_eval: int = 16, test: bool = False, seed: int = 0, **arrays: np.ndarray) -> tuple[Any, Any]:
    train, evaluation = digits_arrays(n_train=n_train, n_eval=n_eval)
    for key, values in arrays.items():  # extra per-sample keys (e.g. ids), cut like the digits
        train[key], evaluation[key] = values[:n_train], values[n_train:n_train + n_eval]
    model = model or torch_mlp(lr=0.05)
    pipeline = ToyPipeline(train, evaluation, batch_size=8, seed=seed, test=evaluation if test else None)
    estimator = fe.Estimator(pipeline, classifier_network(model), epochs=epochs, traces=traces, log_steps=log_steps)
    return estimator, model


class PoisonInputs(AtTrainStep):
    """Replaces the inputs of training step ``step`` with NaN (so the loss turns NaN there)."""

    def act(self, data: Any) -> None:
        data.write_without_log("x", data["x"] * float("nan"))


class Interrupted(RuntimeError):
    pass


class Interrupt(AtTrainStep):
    """Raises before training step ``step`` (None: never), as a crash would."""

    def act(self, data: Any) -> None:
        raise Interrupted(f"before step {self.step}")


# ---------------------------------------------------------------------------------------------------- TerminateOnNaN
def test_terminate_on_nan_stops_at_the_batch_with_a_nan_loss(capsys: pytest.CaptureFixture) -> None:
    estimator, _ = _estimator([PoisonInputs(step=6), TerminateOnNaN()], epochs=3, log_steps=1)
    history = estimator.fit().history
    assert estimator.system.global_step == 6  # 4 steps per epoch: stopped in epoch 2, right after step 6
    assert max(history["train"]["ce"]) == 6 and np.isnan(history["train"]["ce"][6])
    assert sorted(history["eval"]["ce"]) == [4]  # no evaluation after the NaN
    assert "FastEstimator-TerminateOnNaN: NaN Detected in: ce" in capsys.readouterr().out


def test_terminate_on_nan_watches_named_keys_and_trace_outputs() -> None:
    # A named key is checked at epoch ends too (an eval-only key here, so eval-only, or warmup would report the
    # key missing in training, as FastEstimator's does); '*' covers what the traces write.
    for trace in (TerminateOnNaN(monitor_names="score", mode="eval"), TerminateOnNaN(monitor_names="*")):
        estimator, _ = _estimator([Feed([0.5, float("inf"), 0.2, 0.1]), trace], epochs=4, n_train=8, n_eval=8)
        history = estimator.fit().history
        assert estimator.system.epoch_idx == 2 and sorted(history["eval"]["score"]) == [1, 2], trace.inputs
    # a NaN in a key that is not watched lets training go on
    estimator, _ = _estimator([Feed([float("nan"), 0.2]), TerminateOnNaN()], epochs=2, n_train=8, n_eval=8)
    estimator.fit()
    assert estimator.system.epoch_idx == 2


def test_terminate_on_nan_sees_a_replica_whose_own_loss_was_nan(capsys: pytest.CaptureFixture) -> None:
    """On replicas a per-replica loss is merged by a mean over the finite replicas, so the merged loss of a batch
    whose slice on rank 1 was NaN is finite; one process would have computed NaN over that batch and stopped."""
    from types import SimpleNamespace

    from fe_ray.trace.trace import Data

    trace = TerminateOnNaN(monitor_names="ce")
    network = SimpleNamespace(replica_outputs={"ce": {0: np.float32(0.5), 1: np.float32(np.nan)}})
    trace.system = SimpleNamespace(network=network, mode="train", epoch_idx=1, stop_training=False)
    trace.on_batch_end(Data({"ce": np.float32(0.5)}))
    assert trace.system.stop_training
    assert "FastEstimator-TerminateOnNaN: NaN Detected in: ce (on replica rank(s) [1])" in capsys.readouterr().out
    network.replica_outputs = {"ce": {0: np.float32(0.5), 1: np.float32(0.7)}}
    trace.system.stop_training = False
    trace.on_batch_end(Data({"ce": np.float32(0.58)}))
    assert not trace.system.stop_training


def test_has_nan() -> None:
    torch = pytest.importorskip("torch")
    assert has_nan(float("nan")) and has_nan(np.array([1.0, -np.inf])) and has_nan(torch.tensor([0.0, np.nan]))
    assert not has_nan(np.array([1.0, 2.0])) and not has_nan(np.array([1, 2])) and not has_nan("nan")


# ------------------------------------------------------------------------------------------------- ReduceLROnPlateau
def test_reduce_lr_on_plateau_cuts_the_rate_after_patience_epochs(capsys: pytest.CaptureFixture) -> None:
    # best 0.5 at epoch 2; epochs 3 and 4 do not improve -> cut after 4; 5 and 6 neither -> cut after 6 (counting
    # restarts after a cut); 7 improves.
    scores = [0.9, 0.5, 0.6, 0.5, 0.7, 0.8, 0.1]
    model = torch_mlp(lr=0.05)
    trace = ReduceLROnPlateau(model, metric="score", patience=2, factor=0.5)
    estimator, _ = _estimator([Feed(scores), trace], epochs=len(scores), model=model, n_train=8, n_eval=8)
    history = estimator.fit().history
    # 1 step per epoch: the rate is logged at the evaluation of epochs 4 and 6, float32 as in FastEstimator
    assert history["eval"]["mlp_lr"] == {4: float(np.float32(0.025)), 6: float(np.float32(np.float32(0.025) * 0.5))}
    assert get_lr(model) == pytest.approx(0.0125) and get_lr(model) == float(np.float32(get_lr(model)))
    assert (trace.best, trace.wait) == (0.1, 0)
    assert capsys.readouterr().out.count("FastEstimator-ReduceLROnPlateau: learning rate reduced to") == 2


def test_reduce_lr_on_plateau_max_mode_min_lr_and_default_metric() -> None:
    model = torch_mlp(lr=0.01)
    network = classifier_network(model)  # the UpdateOp names the model's loss: 'ce'
    trace = ReduceLROnPlateau(model, patience=0, factor=0.1, min_lr=0.002)
    assert trace.inputs == ["ce"] and "ce" in trace.fe_monitor_names
    maximize = ReduceLROnPlateau(model, metric="score", patience=1, best_mode="max", min_lr=0.002)
    train, evaluation = digits_arrays(n_train=8, n_eval=8)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), network, epochs=3,
                             traces=[Feed([0.5, 0.4, 0.3]), maximize], log_steps=None)
    estimator.fit()
    # epochs 2 and 3 are worse than 0.5: two cuts, the second stopped at min_lr, exactly as given (FastEstimator)
    assert get_lr(model) == 0.002
    assert maximize.best == 0.5 and maximize.wait == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"best_mode": "bigger"}, r"best_mode must be one of \['min', 'max'\], got 'bigger'"),
    ({"factor": 1.5}, r"factor must be a number strictly between 0 and 1 .* got 1.5; e.g. factor=0.1"),
    ({"factor": 0}, r"strictly between 0 and 1 .* got 0"),
    ({"patience": -1}, r"patience must be a non-negative int .* got -1"),
    ({"min_lr": -1e-3}, r"min_lr must be a non-negative number, got -0.001"),
])
def test_reduce_lr_on_plateau_argument_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReduceLROnPlateau(torch_mlp(), metric="ce", **kwargs)


def test_reduce_lr_on_plateau_needs_a_metric_without_a_unique_loss() -> None:
    with pytest.raises(ValueError, match=r"cannot pick a metric for model 'lonely': it has loss keys \[\].*metric="):
        ReduceLROnPlateau(torch_mlp(name="lonely"))


# ------------------------------------------------------------------------------------------------------- CSVLogger
def _read(path: Any) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def test_csv_logger_rows_match_the_summary(tmp_path: Any) -> None:
    path = tmp_path / "logs" / "run.csv"
    estimator, _ = _estimator([F1Score("y", "y_pred", average="macro"), CSVLogger(str(path))], epochs=2,
                              log_steps=3, test=True)
    history = estimator.fit().history
    columns, rows = _read(path)
    assert columns[:3] == ["mode", "step", "epoch"] and {"ce", "f1_score", "steps/sec"} <= set(columns)
    train = [row for row in rows if row["mode"] == "train"]
    # log steps 1 and 3 of epoch 1, 6 of epoch 2, plus each epoch's end (steps 4 and 8)
    assert [(row["step"], row["epoch"]) for row in train] == [("1", "1"), ("3", "1"), ("4", "1"), ("6", "2"),
                                                              ("8", "2")]
    for row in train:
        if row["ce"]:
            assert float(row["ce"]) == pytest.approx(float(history["train"]["ce"][int(row["step"])]), rel=1e-6)
    evals = [row for row in rows if row["mode"] == "eval"]
    assert [row["step"] for row in evals] == ["4", "8"]
    for row in evals:
        step = int(row["step"])
        assert float(row["f1_score"]) == pytest.approx(history["eval"]["f1_score"][step], rel=1e-6)
        assert float(row["ce"]) == pytest.approx(float(history["eval"]["ce"][step]), rel=1e-6)
    # test() appends its row to what fit() wrote
    test_history = estimator.test().history["test"]
    _, after = _read(path)
    assert after[:len(rows)] == rows and [row["mode"] for row in after[len(rows):]] == ["test"]
    assert float(after[-1]["f1_score"]) == pytest.approx(test_history["f1_score"][8], rel=1e-6)


def test_csv_logger_named_keys_and_instance_rows(tmp_path: Any) -> None:
    path = tmp_path / "named.csv"

    class PerSampleLoss(Trace):
        """Writes a per-sample value for the detailed loggers (and a value that is not per-sample)."""

        def __init__(self) -> None:
            super().__init__(inputs=("y", "y_pred"), outputs="sample_ce", mode="eval")

        def on_batch_end(self, data: Any) -> None:
            y_pred, y = np.asarray(data["y_pred"]), np.asarray(data["y"])
            data.write_per_instance_log("sample_ce", -np.log(y_pred[np.arange(len(y)), y]))
            data.write_per_instance_log("batch_note", "not per sample")

    ids = np.array([f"s{index}" for index in range(64)])
    estimator, _ = _estimator([PerSampleLoss(), CSVLogger(str(path), monitor_names=["ce", "sample_ce"],
                                                          instance_id_key="id", mode="eval")],
                              epochs=2, n_train=16, n_eval=12, id=ids)
    history = estimator.fit().history
    columns, rows = _read(path)
    assert columns == ["instance_id", "mode", "step", "epoch", "ce", "sample_ce"]
    samples = [row for row in rows if row["instance_id"]]
    assert len(samples) == 24 and samples[0]["instance_id"] == "s16"  # 12 eval samples x 2 epochs, ids kept
    assert {row["mode"] for row in rows} == {"eval"} and all(row["sample_ce"] and not row["ce"] for row in samples)
    epochs = [row for row in rows if not row["instance_id"]]
    assert [row["step"] for row in epochs] == ["2", "4"] and not any(row["sample_ce"] for row in epochs)
    # epoch 1's per-sample losses, batch by batch (8 + 4 samples), average to its ce (a mean of batch means)
    losses = [float(row["sample_ce"]) for row in samples[:12]]
    assert np.mean([np.mean(losses[:8]), np.mean(losses[8:])]) == pytest.approx(float(history["eval"]["ce"][2]),
                                                                                 rel=1e-5)


def test_csv_values() -> None:
    torch = pytest.importorskip("torch")
    assert csv_value(np.float32(0.1)) == "0.1" and csv_value(torch.tensor(2.5)) == "2.5" and csv_value(None) == ""
    assert csv_value(np.arange(4).reshape(2, 2)) == "[[0;1]; [2;3]]"  # one line, no ',' of the file's
    assert csv_value(np.array([b"cat"])) == "cat" and csv_value("as is") == "as is" and csv_value(np.int64(3)) == "3"


# ---------------------------------------------------------------------------------------------- checkpoint resume
def _resumable_run(directory: str, csv_path: str, interrupt: int | None = None) -> tuple[Any, Any, Any]:
    fe.enable_deterministic(5)
    model = torch_mlp(seed=5, lr=0.05)
    reduce = ReduceLROnPlateau(model, metric="score", patience=1, factor=0.5)
    # F1Score also in training, so the checkpoint in the middle of an epoch holds part of an epoch's labels
    traces = [Feed([0.5, 0.6, 0.4, 0.7, 0.8]), reduce, F1Score("y", "y_pred", mode=("train", "eval")),
              CSVLogger(csv_path), Interrupt(interrupt), RestoreWizard(directory, steps=3)]
    estimator, _ = _estimator(traces, epochs=5, model=model, log_steps=2, n_train=32, n_eval=16, seed=2)
    return estimator.fit(), model, reduce


def test_interrupted_run_resumes_exactly(tmp_path: Any) -> None:
    """ReduceLROnPlateau's counters, F1Score's labels and CSVLogger's rows come back from the checkpoint: the
    resumed run ends with the uninterrupted run's rates, history and CSV."""
    reference, ref_model, ref_reduce = _resumable_run(str(tmp_path / "ref"), str(tmp_path / "ref.csv"))
    with pytest.raises(Interrupted):  # after the checkpoint of step 15, in epoch 4 (4 steps per epoch)
        _resumable_run(str(tmp_path / "ckpt"), str(tmp_path / "run.csv"), interrupt=16)
    resumed, model, reduce = _resumable_run(str(tmp_path / "ckpt"), str(tmp_path / "run.csv"))
    assert get_lr(model) == get_lr(ref_model) == float(np.float32(0.00625))  # cut after epochs 2, 4 and 5
    assert (reduce.best, reduce.wait) == (ref_reduce.best, ref_reduce.wait)
    for mode in ("train", "eval"):
        for key in set(reference.history[mode]) - TIMING:
            want, got = reference.history[mode][key], resumed.history[mode][key]
            assert want.keys() == got.keys(), (mode, key)
            for step in want:  # per step: F1Score's per-class arrays differ in length between epochs
                np.testing.assert_allclose(got[step], want[step], rtol=1e-6, err_msg=f"{mode}/{key}/{step}")
    ref_columns, ref_rows = _read(tmp_path / "ref.csv")
    columns, rows = _read(tmp_path / "run.csv")
    assert columns == ref_columns
    keep = [column for column in columns if column not in TIMING]
    assert [[row[c] for c in keep] for row in rows] == [[row[c] for c in keep] for row in ref_rows]


def test_lr_scheduler_restore_leaves_scheduled_optimizers_their_own_rates() -> None:
    """The LRScheduler saved the current optimizer's rate and set it, on restore, into whichever optimizer was
    current then (which one depends on the warm-up's last epoch): a TF run resumed in epoch 3 trained Adam at SGD's
    rate. The model's snapshot restores each scheduled optimizer's own rate; the trace leaves them alone."""
    import torch

    from fe_ray.schedule import RepeatScheduler
    from fe_ray.trace.adapt import LRScheduler

    model = fe.build(lambda: torch.nn.Linear(2, 1), model_name="rep",
                     optimizer_fn=RepeatScheduler([lambda p: torch.optim.Adam(p, lr=1e-3),
                                                   lambda p: torch.optim.SGD(p, lr=0.05)]))
    trace = LRScheduler(model=model, lr_fn=lambda epoch: 0.01 / epoch)
    trace.load_state_dict({"lr": 0.5})
    assert [opt.param_groups[0]["lr"] for opt in model.optimizer.get_all_values()] == [1e-3, 0.05]
    single = torch_mlp(lr=0.05)  # one optimizer: the saved rate is its own, and restored
    LRScheduler(model=single, lr_fn=lambda epoch: 0.01 / epoch).load_state_dict({"lr": 0.5})
    assert single.current_optimizer.param_groups[0]["lr"] == 0.5


def test_early_stopping_decides_an_improvement_of_exactly_min_delta_as_fastestimator() -> None:
    """FastEstimator's expressions (current - min_delta > best; current + min_delta < best): an accuracy step of
    k / N with min_delta 1 / N rounds as there."""
    from fe_ray.trace import EarlyStopping

    stopper = EarlyStopping(monitor="accuracy", compare="max", min_delta=0.01)
    stopper.best = 0.5
    assert not stopper._improved(0.51) and stopper._improved(0.52)
    lower = EarlyStopping(monitor="ce", compare="min", min_delta=0.01)
    lower.best = 0.4
    assert not lower._improved(0.39) and lower._improved(0.38)


def test_best_model_saver_logs_its_best_in_the_metrics_float_dtype(tmp_path: Any) -> None:
    """As FastEstimator logs the metric's own value: a float32 loss's best is float32, so a CSV reads the same number
    for the metric and its best."""
    import types

    from fe_ray.trace import BestModelSaver, Data

    saver = BestModelSaver(torch_mlp(), str(tmp_path), metric="ce")
    saver.system = types.SimpleNamespace(sync_models=lambda: None, mode="eval")
    saver.on_begin(Data())
    data = Data({"ce": np.float32(4.51819)})
    saver.on_epoch_end(data)
    assert type(data["min_ce"]) is np.float32 and data["min_ce"] == data["ce"]
    later = Data({"ce": np.float32(5.0)})
    saver.on_epoch_end(later)
    assert later["min_ce"] == np.float32(4.51819) and later["since_best_ce"] == 1

