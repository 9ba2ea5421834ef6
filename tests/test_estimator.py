"""Estimator behaviour: summaries, cut/extend, warmup key checks, stop_training, test(), the network contract."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.trace import Accuracy, RestoreWizard, Trace
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, model_weights, tf_mlp, torch_mlp


def _setup(n_train: int = 64, n_eval: int = 16, test: bool = False, framework: str = "torch"):
    train, evaluation = digits_arrays(framework, n_train=n_train, n_eval=n_eval)
    model = torch_mlp() if framework == "torch" else tf_mlp()
    pipeline = ToyPipeline(train, evaluation, batch_size=8, test=evaluation if test else None)
    return pipeline, classifier_network(model), model


def test_fit_without_name_returns_history() -> None:
    pipeline, network, _ = _setup()
    summary = fe.Estimator(pipeline, network, epochs=2, traces=Accuracy("y", "y_pred"), log_steps=None).fit()
    assert summary.name is None
    assert summary.history["eval"]["epoch"] == {8: 1, 16: 2}
    assert set(summary.history["eval"]) >= {"ce", "accuracy"}
    assert summary.history["train"]["epoch"] == {8: 1, 16: 2}
    named = fe.Estimator(*_setup()[:2], epochs=1, log_steps=None).fit("exp")
    assert named.name == "exp"


def test_training_reduces_loss() -> None:
    pipeline, network, _ = _setup(n_train=256)
    summary = fe.Estimator(pipeline, network, epochs=3, log_steps=None).fit()
    ce = summary.history["eval"]["ce"]
    assert ce[max(ce)] < ce[min(ce)]


@pytest.mark.parametrize("steps, expected", [(3, 6), (12, 24)])
def test_train_steps_per_epoch_cut_and_extend(steps: int, expected: int) -> None:
    pipeline, network, _ = _setup(n_train=64)
    estimator = fe.Estimator(pipeline, network, epochs=2, train_steps_per_epoch=steps, eval_steps_per_epoch=1,
                             log_steps=None)
    estimator.fit()
    assert estimator.system.global_step == expected
    assert estimator.system.batch_idx == 1  # the last eval epoch was cut to one step


def test_warmup_reports_missing_keys() -> None:
    pipeline, network, _ = _setup()
    estimator = fe.Estimator(pipeline, network, epochs=1, traces=Accuracy("label", "y_pred"),
                             monitor_names="nowhere", log_steps=None)
    with pytest.raises(ValueError, match=r"Accuracy needs key 'label' \(mode 'eval', epoch 1\).*nowhere"):
        estimator.fit()


def test_warmup_does_not_update_or_move_the_data() -> None:
    pipeline, network, model = _setup()
    before = model_weights(model)
    state = pipeline.state_dict()
    estimator = fe.Estimator(pipeline, network, epochs=1, log_steps=None)
    estimator._prepare_traces(("train", "eval"))
    estimator._warmup(eager=False)
    for a, b in zip(model_weights(model), before):
        np.testing.assert_array_equal(a, b)
    assert pipeline.state_dict()["rng"] == state["rng"]


class StopAt(Trace):
    def __init__(self, step: int) -> None:
        super().__init__(mode="train")
        self.step = step

    def on_batch_end(self, data: Any) -> None:
        if self.system.global_step == self.step:
            self.system.stop_training = True


def test_stop_training_from_a_trace() -> None:
    pipeline, network, _ = _setup()
    estimator = fe.Estimator(pipeline, network, epochs=5, traces=StopAt(3), log_steps=None)
    summary = estimator.fit()
    assert estimator.system.global_step == 3 and estimator.system.epoch_idx == 1
    assert 1 in summary.history["eval"]["epoch"].values()  # the current epoch still evaluates


def test_test_mode_runs_test_traces() -> None:
    pipeline, network, _ = _setup(test=True)
    estimator = fe.Estimator(pipeline, network, epochs=1, traces=Accuracy("y", "y_pred"), log_steps=None)
    estimator.fit()
    summary = estimator.test()
    assert 0.0 <= summary.history["test"]["accuracy"][8] <= 1.0
    assert "accuracy" in summary.history["eval"]


@pytest.mark.parametrize("kwargs, match", [({"epochs": 0}, "epochs"), ({"epochs": 1, "log_steps": -1}, "log_steps"),
                                           ({"epochs": 1, "train_steps_per_epoch": 0}, "train_steps_per_epoch"),
                                           ({"epochs": 1, "traces": ["x"]}, "not a Trace")])
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    pipeline, network, _ = _setup()
    with pytest.raises(ValueError, match=match):
        fe.Estimator(pipeline, network, **kwargs)


class ProxyNetwork:
    """A BaseNetwork-like wrapper using only the documented contract, recording the hook calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.models = inner.models
        self.calls: list[str] = []
        self.desired: list[set] = []

    def __call__(self, mode, epoch, ds_id="", desired_output_keys=None, warmup=False, eager=False):
        self.desired.append(set(desired_output_keys or ()))
        return self.inner(mode, epoch, ds_id, desired_output_keys=desired_output_keys, warmup=warmup, eager=eager)

    def get_loss_keys(self):
        return self.inner.get_loss_keys()

    def get_scheduled_items(self, mode):
        return self.inner.get_scheduled_items(mode)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)

    def sync_models_to_driver(self) -> None:
        self.calls.append("sync")

    def load_models_from_driver(self) -> None:
        self.calls.append("push")


def test_network_contract_and_hooks(tmp_path) -> None:
    pipeline, network, _ = _setup(n_train=16, n_eval=8)
    proxy = ProxyNetwork(network)
    traces = [Accuracy("y", "y_pred"), RestoreWizard(str(tmp_path))]
    fe.Estimator(pipeline, proxy, epochs=1, traces=traces, log_steps=None).fit()
    assert proxy.calls == ["sync"]  # one epoch-end checkpoint
    assert {"y", "y_pred", "ce"} <= proxy.desired[-1]
    pipeline2, network2, _ = _setup(n_train=16, n_eval=8)
    proxy2 = ProxyNetwork(network2)
    fe.Estimator(pipeline2, proxy2, epochs=1, traces=[Accuracy("y", "y_pred"), RestoreWizard(str(tmp_path))],
                 log_steps=None).fit()
    assert proxy2.calls == ["push"]  # restored, nothing left to train


def test_tf_fit_and_accuracy() -> None:
    pipeline, network, _ = _setup(n_train=128, framework="tf")
    summary = fe.Estimator(pipeline, network, epochs=2, traces=Accuracy("y", "y_pred"), log_steps=None).fit()
    assert set(summary.history["eval"]["accuracy"]) == {16, 32}


def test_multiple_eval_datasets_and_progress_output(capsys) -> None:
    pytest.importorskip("fe_ray.pipeline")
    from fe_ray.dataset.data import digits
    from fe_ray.op.numpyop.univariate import ExpandDims
    from fe_ray.trace import ProgressBar

    train, evaluation = digits.load_data()
    seen: list[str] = []

    class DsRecorder(Trace):
        def on_batch_end(self, data: Any) -> None:
            seen.append(self.system.ds_id)

    pipeline = fe.Pipeline(train_data=train.subset(np.arange(32)),
                           eval_data={"a": evaluation.subset(np.arange(16)), "b": evaluation.subset(np.arange(8))},
                           batch_size=8, ops=[ExpandDims("x", "x", axis=0)])
    network = classifier_network(torch_mlp())
    traces = [Accuracy("y", "y_pred"), DsRecorder(mode="eval"), ProgressBar(force=True)]
    estimator = fe.Estimator(pipeline, network, epochs=1, traces=traces, log_steps=0, eval_log_steps=[1])
    summary = estimator.fit()
    assert seen == ["a", "a", "b"]
    assert set(summary.history["eval"]) >= {"accuracy", "ce"}
    out = capsys.readouterr()
    assert "FastEstimator-Eval: step: 4; progress: 1/?;" in out.out
    assert "train epoch 1" in out.out + out.err  # the tqdm bar
