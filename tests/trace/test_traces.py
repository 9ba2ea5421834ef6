"""Trace machinery (order, Data, sorting) and the built-in traces."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.backend import get_lr
from fe_ray.trace import Accuracy, BestModelSaver, Data, EarlyStopping, LRScheduler, ModelSaver, Trace, sort_traces
from tests.estimator_helpers import (
    Feed,
    ToyPipeline,
    classifier_network,
    digits_arrays,
    model_weights,
    tf_mlp,
    torch_mlp,
)
from tests.helpers.state import assert_same_state


def _estimator(traces, epochs: int = 2, n_train: int = 32, n_eval: int = 16, log_steps=None, **kwargs):
    train, evaluation = digits_arrays(n_train=n_train, n_eval=n_eval)
    model = torch_mlp()
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=epochs,
                             traces=traces, log_steps=log_steps, **kwargs)
    return estimator, model


class Recorder(Trace):
    def __init__(self, events: list, name: str = "rec", **kwargs) -> None:
        super().__init__(**kwargs)
        self.events = events
        self.name = name

    def _log(self, event: str) -> None:
        self.events.append((self.name, event, self.system.mode, self.system.epoch_idx, self.system.batch_idx))

    def on_begin(self, data):
        self._log("begin")

    def on_epoch_begin(self, data):
        self._log("epoch_begin")

    def on_batch_begin(self, data):
        self._log("batch_begin")

    def on_batch_end(self, data):
        assert "y_pred" in data and "ce" in data
        self._log("batch_end")

    def on_epoch_end(self, data):
        self._log("epoch_end")

    def on_end(self, data):
        self._log("end")


def test_trace_event_order() -> None:
    events: list = []
    estimator, _ = _estimator([Recorder(events, inputs="y_pred")], epochs=2, n_train=16, n_eval=8)
    estimator.fit(warmup=False)
    got = [(event, mode, epoch, batch) for _, event, mode, epoch, batch in events]
    epoch = [("epoch_begin", "train", 1, None), ("batch_begin", "train", 1, 1), ("batch_end", "train", 1, 1),
             ("batch_begin", "train", 1, 2), ("batch_end", "train", 1, 2), ("epoch_end", "train", 1, 2),
             ("epoch_begin", "eval", 1, None), ("batch_begin", "eval", 1, 1), ("batch_end", "eval", 1, 1),
             ("epoch_end", "eval", 1, 1)]
    second = [(e, m, 2, b) for e, m, _, b in epoch]
    assert got == [("begin", "train", 0, None), *epoch, *second, ("end", "train", 2, 1)]


def test_traces_sorted_by_dependencies() -> None:
    events: list = []
    consumer = Recorder(events, name="consumer", inputs="made")
    producer = Recorder(events, name="producer", outputs="made")
    star = Recorder(events, name="star", inputs="*")
    plain = Recorder(events, name="plain")
    # FastEstimator 1.7.0's order: the consumer, deferred, follows the traces listed after it.
    assert sort_traces([star, consumer, producer, plain]) == [producer, plain, consumer, star]
    x = Recorder(events, inputs="a", outputs="b")
    y = Recorder(events, inputs="b", outputs="c")
    z = Recorder(events, inputs="c")
    assert sort_traces([z, y, x, plain]) == [x, plain, y, z]
    a, b = Recorder(events, inputs="k1", outputs="k2"), Recorder(events, inputs="k2", outputs="k1")
    with pytest.raises(ValueError, match="cycle"):
        sort_traces([a, b])


def test_data_logs() -> None:
    """FastEstimator's layout: logged values (kept as written; the Summary gets numpy), the batch itself, and
    per-instance values."""
    torch = pytest.importorskip("torch")
    written: dict = {}
    batch = {"x": 1}
    data = Data(batch, on_log=written.__setitem__)
    loss = torch.tensor(0.5)
    data.write_with_log("loss", loss)
    data["acc"] = 0.9  # a plain assignment logs too, as in FastEstimator
    data.write_without_log("tmp", 3)
    assert data["loss"] is loss and list(data.read_logs()) == ["loss", "acc"]
    assert written == {"loss": np.float32(0.5), "acc": 0.9} and isinstance(written["loss"], np.floating)
    assert batch == {"x": 1, "tmp": 3} and data["tmp"] == 3 and data["x"] == 1  # into the batch dict itself
    data.write_per_instance_log("ids", [4, 5])
    assert data.read_per_instance_logs() == {"ids": [4, 5]} and "ids" not in data.read_logs()
    data.per_instance_enabled = False
    data.write_per_instance_log("skipped", [1])
    assert "skipped" not in data


def test_trace_ds_ids_cannot_mix_plain_and_negated() -> None:
    with pytest.raises(ValueError, match=r"Cannot mix plain and negated .* \['!b', 'a'\]"):
        Trace(ds_id=["a", "!b"])


def test_accuracy_counts_and_state() -> None:
    accuracy = Accuracy("y", "pred")
    data = Data({"y": np.array([0, 1, 2, 1]), "pred": np.eye(3)[[0, 1, 1, 1]]})
    accuracy.on_epoch_begin(data)
    accuracy.on_batch_end(data)
    binary = Data({"y": np.array([[1], [0]]), "pred": np.array([[0.8], [0.7]])})
    accuracy.on_batch_end(binary)
    accuracy.on_epoch_end(data)
    assert data["accuracy"] == pytest.approx(4 / 6)
    assert accuracy.state_dict() == {"correct": 4, "total": 6, "ds_counts": {}}
    with pytest.raises(ValueError, match="2 labels"):
        accuracy.on_batch_end(Data({"y": np.array([0, 1]), "pred": np.eye(3)}))


def test_early_stopping_stops_training() -> None:
    values = [1.0, 0.5, 0.6, 0.7, 0.8, 0.2, 0.1, 0.0]
    estimator, _ = _estimator([Feed(values), EarlyStopping(monitor="score", patience=2)], epochs=len(values),
                              n_train=8, n_eval=8)
    summary = estimator.fit()
    assert sorted(summary.history["eval"]["score"].values(), reverse=True) == [1.0, 0.7, 0.6, 0.5]
    assert estimator.system.epoch_idx == 4


def test_early_stopping_baseline_and_max() -> None:
    estimator, _ = _estimator([Feed([0.5, 0.6, 0.9]), EarlyStopping("score", compare="max", baseline=0.8)],
                              epochs=3, n_train=8, n_eval=8)
    estimator.fit()
    assert estimator.system.epoch_idx == 1
    with pytest.raises(ValueError, match="compare"):
        EarlyStopping(compare="bigger")


class WeightsAtEvalEnd(Trace):
    """Records the model's weights at the end of each evaluation epoch (weights do not change during one)."""

    def __init__(self, model) -> None:
        super().__init__(mode="eval")
        self.model = model
        self.by_epoch: dict[int, list[np.ndarray]] = {}

    def on_epoch_end(self, data) -> None:
        self.by_epoch[self.system.epoch_idx] = model_weights(self.model)


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("restore", [True, False])
def test_early_stopping_restores_the_best_epochs_weights_when_asked(framework: str, restore: bool) -> None:
    if framework == "tf":
        pytest.importorskip("tensorflow")
    train, evaluation = digits_arrays(framework, n_train=32, n_eval=16)
    model = torch_mlp() if framework == "torch" else tf_mlp()
    snapshots = WeightsAtEvalEnd(model)
    # The best score is epoch 2's; two epochs without improvement stop the run at epoch 4.
    stopper = EarlyStopping("score", patience=2, compare="max", restore_best_weights=restore)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=6,
                             traces=[snapshots, Feed([0.5, 0.9, 0.3, 0.2, 0.8, 0.8]), stopper], log_steps=None)
    estimator.fit()
    assert estimator.system.epoch_idx == 4
    final = model_weights(model)
    # Training moved the weights after epoch 2, so the two outcomes can be told apart.
    assert any(not np.array_equal(a, b) for a, b in zip(snapshots.by_epoch[2], snapshots.by_epoch[4]))
    assert_same_state(final, snapshots.by_epoch[2] if restore else snapshots.by_epoch[4])
    assert (stopper.best_weights is not None) == restore


def test_early_stopping_state_round_trips_with_its_best_weights() -> None:
    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    model = torch_mlp()
    stopper = EarlyStopping("score", patience=5, compare="max", restore_best_weights=True)
    fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=3,
                 traces=[Feed([0.5, 0.9, 0.3]), stopper], log_steps=None).fit()
    state = stopper.state_dict()
    assert (state["wait"], state["best"]) == (1, 0.9)
    resumed = EarlyStopping("score", patience=5, compare="max", restore_best_weights=True)
    resumed.load_state_dict(state)
    assert (resumed.wait, resumed.best) == (1, 0.9)
    assert resumed.best_weights is not None and set(resumed.best_weights) == {model.model_name}
    assert_same_state(resumed.best_weights, stopper.best_weights)


def test_early_stopping_positional_order_is_fastestimators() -> None:
    stopper = EarlyStopping("score", 0.1, 3, "max", 0.5, "train")
    assert (stopper.monitor, stopper.min_delta, stopper.patience, stopper.compare, stopper.baseline) == (
        "score", 0.1, 3, "max", 0.5)
    assert stopper.mode == {"train"} and stopper.restore_best_weights is False
    assert EarlyStopping("score", 0.0, 0, "min", None, "eval", True).restore_best_weights is True


def test_lr_scheduler_sets_lr_per_step_and_epoch() -> None:
    model = torch_mlp()
    scheduler = LRScheduler(model, lambda step: 0.1 / step if step else 0.1)
    train, evaluation = digits_arrays(n_train=32, n_eval=8)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=2,
                             traces=[scheduler], log_steps=1)
    summary = estimator.fit(warmup=False)
    assert get_lr(model) == pytest.approx(0.1 / 8)
    assert summary.history["train"]["mlp_lr"][3] == pytest.approx(0.1 / 3)

    model2 = torch_mlp(name="m2")
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model2), epochs=3,
                             traces=[LRScheduler(model2, lambda epoch: 0.01 * epoch)], log_steps=None)
    estimator.fit(warmup=False)
    assert get_lr(model2) == pytest.approx(0.03)
    with pytest.raises(ValueError, match="'step' or 'epoch'"):
        LRScheduler(model2, lambda x: 0.1)


def test_model_saver_keeps_last_files(tmp_path, capsys) -> None:
    model = torch_mlp()
    train, evaluation = digits_arrays(n_train=8, n_eval=8)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=3,
                             traces=[ModelSaver(model, str(tmp_path), max_to_keep=2)], log_steps=None)
    estimator.fit()
    assert sorted(os.listdir(tmp_path)) == ["mlp_epoch_2.pt", "mlp_epoch_3.pt"]
    # FastEstimator's wording of the removal line.
    removed = os.path.join(str(tmp_path), "mlp_epoch_1.pt")
    assert (f"FastEstimator-ModelSaver: Removed model {removed} due to file number exceeding max_to_keep\n"
            in capsys.readouterr().out)


def test_model_saver_keeps_counting_its_files_across_a_resume(tmp_path) -> None:
    """The files an interrupted run saved still count towards max_to_keep after the resume (ModelSaver's state is in
    the checkpoint): the resumed run deletes them in turn."""
    from fe_ray.trace import RestoreWizard

    weights_dir, checkpoint_dir = tmp_path / "weights", str(tmp_path / "ckpt")
    train, evaluation = digits_arrays(n_train=8, n_eval=8)

    def run(epochs: int) -> None:
        model = torch_mlp()
        fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=epochs,
                     traces=[ModelSaver(model, str(weights_dir), max_to_keep=3), RestoreWizard(checkpoint_dir)],
                     log_steps=None).fit()

    run(epochs=2)  # stops after epoch 2, as an interrupted run would
    assert sorted(os.listdir(weights_dir)) == ["mlp_epoch_1.pt", "mlp_epoch_2.pt"]
    run(epochs=5)  # resumes at epoch 3
    assert sorted(os.listdir(weights_dir)) == ["mlp_epoch_3.pt", "mlp_epoch_4.pt", "mlp_epoch_5.pt"]


def test_a_recoverable_runs_starting_checkpoint_is_committed_before_the_first_step(tmp_path, monkeypatch) -> None:
    """With max_failures the RestoreWizard's checkpoint of the starting state is what a failure before the first
    periodic one resumes from; written in the background, a replica failure at step 1 found none committed (its
    writer, rank 0, was the replica killed). It is committed before the first step now."""
    import time

    from fe_ray.io import background_save
    from fe_ray.io.checkpoint import CheckpointStore
    from fe_ray.trace import RestoreWizard

    write = background_save.write_checkpoint

    def slow_write(payload, directory):  # a large model's write, still in flight when training starts
        time.sleep(1.0)
        return write(payload, directory)

    monkeypatch.setattr(background_save, "write_checkpoint", slow_write)
    directory = str(tmp_path / "ckpt")
    committed_at_step_1: list = []

    class Probe(Trace):  # what a replica failure at the first step could resume from
        def on_batch_begin(self, data) -> None:
            if not committed_at_step_1:
                committed_at_step_1.append(CheckpointStore(directory).latest())

    model = torch_mlp()
    network = classifier_network(model)
    network.max_failures = 1  # as a recoverable RayNetwork's
    train, evaluation = digits_arrays(n_train=8, n_eval=8)
    fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), network, epochs=1,
                 traces=[RestoreWizard(directory), Probe(mode="train")], log_steps=None).fit()
    assert committed_at_step_1[0] is not None and committed_at_step_1[0].endswith("ckpt-000001")


def test_best_model_saver(tmp_path, capsys) -> None:
    model = torch_mlp()
    train, evaluation = digits_arrays(n_train=8, n_eval=8)
    saver = BestModelSaver(model, str(tmp_path), metric="score", save_best_mode="max", load_best_final=True)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(model), epochs=3,
                             traces=[Feed([0.1, 0.9, 0.5]), saver], log_steps=None)
    summary = estimator.fit()
    assert os.listdir(tmp_path) == ["mlp_best_score.pt"]
    assert summary.history["eval"]["since_best_score"] == {1: 0, 2: 0, 3: 1}
    assert summary.history["eval"]["max_score"][3] == pytest.approx(0.9)
    assert "Restoring model from" in capsys.readouterr().out
    assert BestModelSaver(model, str(tmp_path)).metric == "ce"  # defaults to the model's loss


def test_logger_lines(capsys) -> None:
    train, evaluation = digits_arrays(n_train=32, n_eval=16)
    model = torch_mlp()
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8, test=evaluation),
                             classifier_network(model), epochs=1, traces=Accuracy("y", "y_pred"), log_steps=2)
    estimator.fit()
    lines = capsys.readouterr().out.splitlines()
    # FastEstimator's warning first: no ModelSaver among the traces
    assert lines.pop(0) == "\033[93mFastEstimator-Warn: No ModelSaver Trace detected. Models will not be saved.\033[00m"
    # keys in natural order, as FastEstimator's humansorted
    assert lines[0].startswith("FastEstimator-Start: step: 1; logging_interval: 2; num_device: 1;")
    assert lines[1].startswith("FastEstimator-Train: step: 1; ce: ")
    assert lines[2].startswith("FastEstimator-Train: step: 2; ce: ") and "steps/sec" in lines[2]
    assert any(line.startswith("FastEstimator-Eval: step: 4; epoch: 1; accuracy: ") and "; ce: " in line
               for line in lines)
    # the final learning rate of each model, as FastEstimator logs
    assert lines[-1].startswith("FastEstimator-Finish: step: 4; mlp_lr: 0.05; total_time(sec): ")
    estimator.test()
    test_lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in test_lines] == ["FastEstimator-Test"]


def test_eval_essential_averages_array_keys_element_wise_as_fastestimator() -> None:
    """FastEstimator averages a monitored array over the batches element by element; fe_ray took each batch's mean
    first and logged a scalar. Per-sample values whose last batch is shorter average over all samples."""
    from types import SimpleNamespace

    from fe_ray.trace.essential import TestEssential, epoch_mean

    trace = TestEssential({"per_class", "per_sample", "loss"})
    trace.system = SimpleNamespace(ds_id="", batch_idx=0, eval_log_steps=([], False))
    data = Data()
    trace.on_epoch_begin(data)
    batches = [(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0, 1.0]), np.float32(2.0)),
               (np.array([3.0, 4.0, 5.0]), np.array([4.0]), np.float32(4.0))]
    for per_class, per_sample, loss in batches:
        trace.on_batch_end(Data({"per_class": per_class, "per_sample": per_sample, "loss": loss}))
    trace.on_epoch_end(data)
    np.testing.assert_allclose(data["per_class"], [2.0, 3.0, 4.0])
    assert data["per_sample"] == pytest.approx(8.0 / 5)  # over the 5 samples, not (1 + 4) / 2
    assert data["loss"] == pytest.approx(3.0) and np.asarray(data["loss"]).dtype == np.float32
    assert epoch_mean([np.float64(1.0), np.array([[2.0, 4.0]])]) == pytest.approx(2.0)
