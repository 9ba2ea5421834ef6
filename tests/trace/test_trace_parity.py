"""Built-in traces behave as FastEstimator's do for what users pass and read: save_dir=None, max_to_keep=0,
metrics that are not losses, Accuracy's from_logits / per-dataset values, float32 learning rates, the
EarlyStopping line."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.backend import get_backend, get_lr
from fe_ray.op.tensorop.loss import CrossEntropy
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.summary import System
from fe_ray.trace import Accuracy, BestModelSaver, Data, EarlyStopping, LRScheduler, ModelSaver, sort_traces
from tests.estimator_helpers import Feed, ToyPipeline, classifier_network, digits_arrays, tf_mlp, torch_mlp


def _fit(model, traces, epochs: int = 3, network=None, pipeline=None, **kwargs):
    train, evaluation = digits_arrays(n_train=16, n_eval=16)
    estimator = fe.Estimator(pipeline or ToyPipeline(train, evaluation, batch_size=8),
                             network or classifier_network(model), epochs=epochs, traces=traces,
                             log_steps=kwargs.pop("log_steps", None), **kwargs)
    return estimator, estimator.fit()


def test_savers_with_save_dir_none_save_nothing(tmp_path, monkeypatch) -> None:
    """FastEstimator's savers skip saving when save_dir is None (smoke tests keep the real trace list); the best
    value is still tracked and logged."""
    monkeypatch.chdir(tmp_path)
    model = torch_mlp()
    _, summary = _fit(model, [Feed([0.3, 0.1, 0.2]), ModelSaver(model, None),
                              BestModelSaver(model, None, metric="score", load_best_final=True)])
    assert os.listdir(tmp_path) == []
    assert summary.history["eval"]["since_best_score"] == {2: 0, 4: 0, 6: 1}
    assert summary.history["eval"]["min_score"][6] == pytest.approx(0.1)


def test_model_saver_max_to_keep_zero_keeps_every_file(tmp_path) -> None:
    model = torch_mlp()
    _fit(model, [ModelSaver(model, str(tmp_path), max_to_keep=0)])
    assert sorted(os.listdir(tmp_path)) == ["mlp_epoch_1.pt", "mlp_epoch_2.pt", "mlp_epoch_3.pt"]
    with pytest.raises(ValueError, match=r"max_to_keep must be a non-negative int .* got -1"):
        ModelSaver(model, str(tmp_path), max_to_keep=-1)


def test_savers_weights_name_names_the_files(tmp_path) -> None:
    """FastEstimator's weights_name: ModelSaver's file prefix in place of the model's name, BestModelSaver's whole
    file name; both are positional in FastEstimator's places."""
    model = torch_mlp()
    every = ModelSaver(model, str(tmp_path / "every"), 1, 2, "clf")
    best = BestModelSaver(model, str(tmp_path / "best"), "score", "max", "top_model", True)
    assert (every.weights_name, best.weights_name, best.load_best_final) == ("clf", "top_model", True)
    _fit(model, [Feed([0.1, 0.9, 0.5]), every, best])
    assert sorted(os.listdir(tmp_path / "every")) == ["clf_epoch_2.pt", "clf_epoch_3.pt"]
    assert os.listdir(tmp_path / "best") == ["top_model.pt"]
    assert best.model_path == str(tmp_path / "best" / "top_model.pt")
    for trace in (ModelSaver, BestModelSaver):
        for bad in ("", 3):
            with pytest.raises(ValueError, match=rf"{trace.__name__} weights_name must be None .* got {bad!r}"):
                trace(model, str(tmp_path), weights_name=bad)


def test_savers_save_the_architecture_of_tf_models_and_refuse_torch_ones(tmp_path) -> None:
    import keras

    model = tf_mlp()
    _fit(model, [ModelSaver(model, str(tmp_path / "every"), max_to_keep=1, save_architecture=True),
                 BestModelSaver(model, str(tmp_path / "best"), metric="ce", save_architecture=True)], epochs=2)
    # max_to_keep removes an old epoch's whole-model file with its weights
    assert sorted(os.listdir(tmp_path / "every")) == ["mlp_epoch_2.keras", "mlp_epoch_2.weights.h5"]
    restored = keras.models.load_model(str(tmp_path / "every" / "mlp_epoch_2.keras"))
    x = np.ones((2, 8, 8, 1), np.float32)
    np.testing.assert_allclose(np.asarray(restored(x)), np.asarray(model(x)), rtol=1e-6)
    assert sorted(os.listdir(tmp_path / "best")) == ["mlp_best_ce.keras", "mlp_best_ce.weights.h5"]
    for trace in (ModelSaver, BestModelSaver):
        with pytest.raises(ValueError, match=rf"{trace.__name__}\(save_architecture=True\) cannot save torch model"):
            trace(torch_mlp(), str(tmp_path), save_architecture=True)


def test_model_saver_max_to_keep_removes_an_old_exported_saved_model_folder(tmp_path) -> None:
    """A subclassed Keras model without get_config is exported as a SavedModel folder beside its weights; the folder
    goes with its epoch's weights under max_to_keep."""
    import keras

    class Sub(keras.Model):
        def __init__(self, units: int, **kwargs) -> None:  # noqa: ANN003
            super().__init__(**kwargs)
            self.flat = keras.layers.Flatten()
            self.dense = keras.layers.Dense(units, activation="softmax")

        def call(self, x):  # noqa: ANN001, ANN201
            return self.dense(self.flat(x))

    def make():  # noqa: ANN202
        model = Sub(10)
        model(np.zeros((1, 8, 8, 1), np.float32))
        return model

    model = fe.build(make, "adam", model_name="sub")
    _fit(model, [ModelSaver(model, str(tmp_path), max_to_keep=1, save_architecture=True)], epochs=2)
    assert sorted(os.listdir(tmp_path)) == ["sub_epoch_2", "sub_epoch_2.weights.h5"]
    assert os.path.isfile(tmp_path / "sub_epoch_2" / "saved_model.pb")


def test_best_model_saver_metric_that_is_no_loss_is_averaged_over_eval(tmp_path) -> None:
    """A BestModelSaver metric that the network computes but no UpdateOp uses is monitored as losses are (mean over
    the evaluation epoch, logged in training too), as FastEstimator's traces ask their essentials to."""
    model = torch_mlp()
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                              CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                              CrossEntropy(inputs=("y_pred", "y"), outputs="ce_watch"),
                              UpdateOp(model=model, loss_name="ce")])
    _, summary = _fit(model, [BestModelSaver(model, str(tmp_path), metric="ce_watch")], epochs=2, network=network,
                      log_steps=1)
    evaluation = summary.history["eval"]
    assert evaluation["ce_watch"] == pytest.approx(evaluation["ce"])  # the same loss, averaged the same way
    assert evaluation["min_ce_watch"][4] == pytest.approx(min(evaluation["ce"].values()))
    assert summary.history["train"]["ce_watch"] == pytest.approx(summary.history["train"]["ce"])
    assert os.listdir(tmp_path) == ["mlp_best_ce_watch.pt"]


def test_accuracy_from_logits() -> None:
    data = Data({"y": np.array([1, 0, 0]), "logit": np.array([[2.0], [-1.0], [0.5]])})
    for from_logits, expected in ((True, 2 / 3), (False, 1 / 3)):  # sigmoid first: [1, 0, 1]; raw: [2, -1, 0]
        accuracy = Accuracy("y", "logit", from_logits=from_logits)
        accuracy.on_epoch_begin(data)
        accuracy.on_batch_end(data)
        accuracy.on_epoch_end(data)
        assert data["accuracy"] == pytest.approx(expected)


def _two_eval_sets() -> ToyPipeline:
    train, evaluation = digits_arrays(n_train=16, n_eval=24)
    pipeline = ToyPipeline(train, evaluation, batch_size=8)
    pipeline.data["eval"] = {"a": {key: value[:8] for key, value in evaluation.items()},
                             "b": {key: value[8:] for key, value in evaluation.items()}}
    return pipeline


def test_accuracy_per_dataset_values() -> None:
    """With several eval datasets, Accuracy also logs 'accuracy|<ds_id>' (unless per_ds=False or the name has a
    '|'), and a trace reading such a key runs after it."""
    model = torch_mlp()
    _, summary = _fit(model, [Accuracy("y", "y_pred"), Accuracy("y", "y_pred", output_name="acc", per_ds=False),
                              Accuracy("y", "y_pred", output_name="a|cc")], epochs=1,
                      pipeline=_two_eval_sets())
    evaluation = summary.history["eval"]
    assert {"accuracy|a", "accuracy|b", "accuracy", "acc", "a|cc"} <= set(evaluation)
    assert not any(key.startswith(("acc|", "a|cc|")) for key in evaluation)
    per_a, per_b, overall = evaluation["accuracy|a"][2], evaluation["accuracy|b"][2], evaluation["accuracy"][2]
    assert overall == pytest.approx((per_a * 8 + per_b * 16) / 24)
    assert per_a * 8 == pytest.approx(round(per_a * 8)) and per_b * 16 == pytest.approx(round(per_b * 16))

    accuracy = Accuracy("y", "y_pred")
    saver = BestModelSaver(model, None, metric="accuracy|b", save_best_mode="max")
    assert sort_traces([saver, accuracy]) == [accuracy, saver]
    assert accuracy.get_outputs(["a", "b"]) == ["accuracy", "accuracy|a", "accuracy|b"]


def test_a_per_dataset_key_passes_the_warmup_check() -> None:
    """The warm-up's missing-key check counts the per-dataset keys a trace writes (FastEstimator's get_outputs)."""
    model = torch_mlp()
    saver = BestModelSaver(model, None, metric="accuracy|b", save_best_mode="max")
    _, summary = _fit(model, [Accuracy("y", "y_pred"), saver], epochs=1, pipeline=_two_eval_sets())
    assert summary.history["eval"]["max_accuracy|b"][2] == summary.history["eval"]["accuracy|b"][2]


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_lr_scheduler_sets_float32_rates(framework: str) -> None:
    """The rate is rounded to float32 as FastEstimator does; for TF the rate the backend remembers setting is then
    the one its variable holds (a distributed network compares the two at every epoch's end)."""
    model = torch_mlp() if framework == "torch" else tf_mlp()
    scheduler = LRScheduler(model, lambda step: 0.05 / step)
    scheduler.system = System(classifier_network(model), pipeline=None)
    scheduler.system.global_step = 3
    scheduler.on_batch_begin(Data({}))
    remembered = get_backend(model).known_lr(model)  # before get_lr, which remembers what it reads
    assert get_lr(model) == float(np.float32(0.05 / 3)) != 0.05 / 3
    assert remembered == get_lr(model)


def test_lr_scheduler_frequency() -> None:
    """frequency=N calls lr_fn at steps (epochs) 1, N+1, 2N+1, ... only; the rate holds in between."""
    model = torch_mlp()
    calls: list[int] = []
    _, summary = _fit(model, [LRScheduler(model, lambda step: calls.append(step) or 0.1 / step, frequency=3)],
                      epochs=3, log_steps=1)
    assert calls == [1, 4]
    assert summary.history["train"]["mlp_lr"] == pytest.approx({step: 0.1 / (1 if step < 4 else 4)
                                                                for step in range(1, 7)})
    epochs: list[int] = []
    _fit(model, [LRScheduler(model, lambda epoch: epochs.append(epoch) or 0.1, frequency=2)], epochs=3)
    assert epochs == [1, 3]
    with pytest.raises(ValueError, match="frequency must be a positive int .* got 0"):
        LRScheduler(model, lambda step: 0.1, frequency=0)


def test_lr_scheduler_ds_id_filters_step_calls() -> None:
    """FastEstimator's third argument, ds_id: a step schedule runs only before batches of the chosen datasets."""
    model = torch_mlp()
    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    pipeline = ToyPipeline(train, evaluation, batch_size=8)
    pipeline.data["train"] = {"a": {key: value[:8] for key, value in train.items()},
                              "b": {key: value[8:] for key, value in train.items()}}
    calls: dict[str, list[int]] = {"a": [], "!a": [], "all": []}
    traces = [LRScheduler(model, lambda step: calls["a"].append(step) or 0.1, "a"),
              LRScheduler(model, lambda step: calls["!a"].append(step) or 0.1, ds_id="!a"),
              LRScheduler(model, lambda step: calls["all"].append(step) or 0.1)]
    assert traces[0].ds_id == {"a"} and traces[2].ds_id == set()  # FastEstimator's empty set: every dataset
    _fit(model, traces, epochs=2, pipeline=pipeline)
    assert calls == {"a": [1, 3], "!a": [2, 4], "all": [1, 2, 3, 4]}  # one batch of 'a', then one of 'b'
    epochs: list[int] = []
    _fit(model, [LRScheduler(model, lambda epoch: epochs.append(epoch) or 0.1, "b")], epochs=2, pipeline=pipeline)
    assert epochs == [1, 2]  # epoch events are not per dataset


def test_early_stopping_line_and_single_monitor(capsys) -> None:
    model = torch_mlp()
    estimator, _ = _fit(model, [Feed([1.0, 0.5, 0.6, 0.7]), EarlyStopping(monitor="score", patience=2)], epochs=4)
    assert estimator.system.epoch_idx == 4
    assert ("FastEstimator-EarlyStopping: 'score' triggered an early stop. Its best value was 0.5 at epoch 2"
            in capsys.readouterr().out)
    with pytest.raises(ValueError, match=r"monitor must be a str, got \['a', 'b'\]"):
        EarlyStopping(monitor=["a", "b"])
