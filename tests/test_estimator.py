"""Estimator behaviour: summaries, cut/extend, warmup key checks, stop_training, test(), the network contract."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.trace import Accuracy, RestoreWizard, Trace
from tests.estimator_helpers import (
    AtTrainStep,
    ToyPipeline,
    classifier_network,
    digits_arrays,
    model_weights,
    tf_mlp,
    torch_mlp,
)


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
    """Sets stop_training at one (mode, event, batch_idx) and records every event it sees."""

    def __init__(self, mode: str, event: str, batch_idx: int | None = None) -> None:
        super().__init__(mode=None)
        self.when = (mode, event, batch_idx)
        self.events: list[tuple[str, ...]] = []

    def _seen(self, event: str) -> None:
        self.events.append((self.system.mode, event, self.system.batch_idx))
        if (self.system.mode, event, self.system.batch_idx) == self.when:
            self.system.stop_training = True

    def on_epoch_begin(self, data: Any) -> None:
        self._seen("epoch_begin")

    def on_batch_begin(self, data: Any) -> None:
        self._seen("batch_begin")

    def on_batch_end(self, data: Any) -> None:
        self._seen("batch_end")

    def on_epoch_end(self, data: Any) -> None:
        self._seen("epoch_end")

    def on_end(self, data: Any) -> None:
        self.events.append((self.system.mode, "end"))


def test_stop_training_ends_the_run_after_the_event_that_set_it() -> None:
    """As FastEstimator's EarlyStop: no further batch, no on_epoch_end, no evaluation; on_end still runs."""
    pipeline, network, _ = _setup()
    stop = StopAt("train", "batch_end", 3)
    estimator = fe.Estimator(pipeline, network, epochs=5, traces=stop, log_steps=None)
    summary = estimator.fit()
    assert estimator.system.global_step == 3 and estimator.system.epoch_idx == 1
    assert stop.events[-2:] == [("train", "batch_end", 3), ("train", "end")]
    assert "eval" not in summary.history
    # Set during evaluation, the flag ends the evaluation epoch too.
    pipeline, network, _ = _setup()
    stop = StopAt("eval", "batch_end", 1)
    fe.Estimator(pipeline, network, epochs=5, traces=stop, log_steps=None).fit()
    assert stop.events[-3:] == [("eval", "batch_begin", 1), ("eval", "batch_end", 1), ("train", "end")]
    # Set before a batch runs, the batch is not run.
    pipeline, network, _ = _setup()
    stop = StopAt("train", "batch_begin", 2)
    estimator = fe.Estimator(pipeline, network, epochs=5, traces=stop, log_steps=None)
    estimator.fit()
    assert stop.events[-2:] == [("train", "batch_begin", 2), ("train", "end")]
    assert estimator.network.ctx_state == {} and not estimator.network.ctx_lock.locked()  # contexts were left


class FailAt(Trace):
    """Raises ``error`` at the end of training step ``step``; records the error its on_abort hears."""

    def __init__(self, step: int, error: BaseException) -> None:
        super().__init__(mode="train")
        self.step, self.error, self.heard = step, error, []

    def on_batch_end(self, data) -> None:
        if self.system.global_step == self.step:
            raise self.error

    def on_abort(self, error: BaseException) -> None:
        self.heard.append(error)


class BrokenAbort(Trace):
    def on_abort(self, error: BaseException) -> None:
        raise RuntimeError("cleanup went wrong")


@pytest.mark.parametrize("error", [ValueError("bad batch"), KeyboardInterrupt()])
def test_a_failing_fit_tells_every_trace_and_raises_the_original_error(error: BaseException,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    pipeline, network, _ = _setup()
    failing = FailAt(3, error)
    estimator = fe.Estimator(pipeline, network, epochs=2, traces=[BrokenAbort(), failing], log_steps=None)
    with caplog.at_level("WARNING", logger="fe_ray"), pytest.raises(type(error)) as raised:
        estimator.fit()
    assert raised.value is error  # neither the broken on_abort nor anything else replaced it
    assert failing.heard == [error]  # the trace after the broken one still heard it
    assert "BrokenAbort.on_abort failed: cleanup went wrong" in caplog.text
    assert estimator.system.global_step == 3 and not network.ctx_lock.locked()


def test_test_mode_runs_test_traces() -> None:
    pipeline, network, _ = _setup(test=True)
    estimator = fe.Estimator(pipeline, network, epochs=1, traces=Accuracy("y", "y_pred"), log_steps=None)
    estimator.fit()
    summary = estimator.test()
    assert 0.0 <= summary.history["test"]["accuracy"][8] <= 1.0
    assert "accuracy" in summary.history["eval"]
    # The test loss is averaged over the test batches as FastEstimator's TestEssential does; the test data is the
    # eval data and the weights did not change since the last evaluation, so the means agree.
    assert summary.history["test"]["ce"][8] == pytest.approx(summary.history["eval"]["ce"][8], rel=1e-6)


def test_a_trace_with_an_empty_mode_gets_every_event() -> None:
    # mode=[] parses to an empty set, which means every mode (as mode=None): on_begin / on_end as well as the epochs.
    class Events(Trace):
        def __init__(self) -> None:
            super().__init__(mode=[])
            self.events: list[str] = []

        def on_begin(self, data: Any) -> None:
            self.events.append("begin")

        def on_epoch_begin(self, data: Any) -> None:
            self.events.append(f"epoch:{self.system.mode}")

        def on_end(self, data: Any) -> None:
            self.events.append("end")

    pipeline, network, _ = _setup()
    trace = Events()
    assert trace.mode == set()
    fe.Estimator(pipeline, network, epochs=1, traces=trace, log_steps=None).fit()
    assert trace.events == ["begin", "epoch:train", "epoch:eval", "end"]


def test_evaluation_means_are_kept_only_for_modes_with_data() -> None:
    train, _ = digits_arrays("torch", n_train=64, n_eval=16)
    pipeline, network = ToyPipeline(train, None, batch_size=8), classifier_network(torch_mlp())
    estimator = fe.Estimator(pipeline, network, epochs=1, log_steps=None)
    summary = estimator.fit()
    assert "eval" not in summary.history
    assert [type(trace).__name__ for trace in estimator.traces_in_use] == ["TrainEssential"]


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
    # The loss per dataset and over both, as FastEstimator's EvalEssential writes them.
    assert set(summary.history["eval"]) >= {"accuracy", "ce", "ce|a", "ce|b", "accuracy|a", "accuracy|b"}
    overall, first, second = (summary.history["eval"][key][4] for key in ("ce", "ce|a", "ce|b"))
    assert overall == pytest.approx((2 * first + second) / 3)  # the mean over the 3 batches (2 of "a")
    out = capsys.readouterr()
    assert "Eval Progress (a): 1/2;" in out.out  # 16 samples of "a" in batches of 8
    assert "Eval Progress (b): 1/1;" in out.out  # the 8 of "b"
    assert "2/2" not in out.out  # only the requested batch
    assert "FastEstimator-Train: step: 4; epoch: 1;" in out.out  # log_steps=0 still prints the epoch's line
    assert "train epoch 1" in out.out + out.err  # the tqdm bar
    # FastEstimator's System fields: the request, and (steps that print, batches) of the latest eval dataset.
    assert estimator.system.eval_log_steps_request == [1]
    assert estimator.system.eval_log_steps == ([1], 1)


def test_eval_progress_is_logged_at_four_points_by_default(capsys) -> None:
    from fe_ray.dataset.data import digits
    from fe_ray.op.numpyop.univariate import ExpandDims

    train, evaluation = digits.load_data()
    pipeline = fe.Pipeline(train_data=train.subset(np.arange(16)), eval_data=evaluation.subset(np.arange(48)),
                           batch_size=8, ops=[ExpandDims("x", "x", axis=0)])  # 6 eval batches: progress at 1, 2, 4, 6
    estimator = fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, log_steps=0)
    estimator.fit()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Eval Progress: ")]
    assert [line.split(": ")[1].split(";")[0] for line in lines] == ["1/6", "2/6", "4/6", "6/6"]
    # steps/sec since the last progress line, after the first (FastEstimator's EvalEssential)
    assert "steps/sec" not in lines[0] and all("; steps/sec: " in line for line in lines[1:])
    assert estimator.system.eval_log_steps == ([1, 2, 4, 6], 6)


class LossTypes(Trace):
    """Replaces x with zeros before each step, and records what a user trace sees of the loss and of the step."""

    def __init__(self) -> None:
        super().__init__(mode="train", inputs=["ce", "x_abs"])
        self.loss_types: list[str] = []
        self.x_sums: list[float] = []

    def on_batch_begin(self, data: Any) -> None:
        data.write_without_log("x", np.zeros_like(data["x"]))

    def on_batch_end(self, data: Any) -> None:
        self.loss_types.append(type(data["ce"]).__name__)
        self.x_sums.append(float(data["x_abs"].sum()))


def test_traces_see_the_steps_values_as_written() -> None:
    """on_batch_begin's write_without_log reaches the step (FastEstimator's Data writes into the batch itself), and
    a loss keeps its tensor type on logging steps too (it was numpy on every log_steps-th step only)."""
    from fe_ray.op.tensorop import LambdaOp

    pipeline, network, _ = _setup(n_train=32)
    network.ops.insert(0, LambdaOp(fn=lambda x: x.abs().sum(dim=1), inputs="x", outputs="x_abs"))
    trace = LossTypes()
    summary = fe.Estimator(pipeline, network, epochs=1, traces=trace, log_steps=2).fit()
    assert trace.loss_types == ["Tensor"] * 4
    assert trace.x_sums == [0.0] * 4
    assert all(isinstance(value, np.floating) for value in summary.history["train"]["ce"].values())


class InputTypes(Trace):
    def __init__(self) -> None:
        super().__init__(mode=None, inputs=["x", "y", "y_pred"])
        self.seen: set[tuple[str, str, str]] = set()

    def on_batch_begin(self, data: Any) -> None:
        self.seen |= {("begin", key, type(data[key]).__module__.split(".")[0]) for key in ("x", "y")}

    def on_batch_end(self, data: Any) -> None:
        self.seen |= {("end", key, type(data[key]).__module__.split(".")[0]) for key in ("x", "y", "y_pred")}


@pytest.mark.parametrize("framework, module", [("torch", "torch"), ("tf", "tensorflow")])
def test_traces_see_the_batch_as_framework_tensors(framework: str, module: str) -> None:
    """As in FastEstimator, whose loaders yield the framework's tensors: a trace written for it (``data["y"].numpy()``,
    ``.argmax(dim=1)``) finds tensors for the inputs as for the outputs, from on_batch_begin on."""
    pipeline, network, _ = _setup(n_train=16, n_eval=8, framework=framework)
    trace = InputTypes()
    fe.Estimator(pipeline, network, epochs=1, traces=trace, log_steps=None).fit()
    assert {kind for _, _, kind in trace.seen} == {module}
    out = network.transform({"x": pipeline.data["train"][""]["x"][:2]}, mode="infer")
    assert type(out["x"]).__module__.split(".")[0] == module  # transform's inputs too, as FastEstimator's


class _Events(Trace):
    """Records the events it sees, with the mode."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(mode=None)
        self.events = events

    def on_begin(self, data: Any) -> None:
        self.events.append(f"begin {self.system.mode}")

    def on_batch_end(self, data: Any) -> None:
        self.events.append(f"batch {self.system.mode}")

    def on_epoch_end(self, data: Any) -> None:
        self.events.append(f"epoch_end {self.system.mode}")

    def on_end(self, data: Any) -> None:
        self.events.append(f"end {self.system.mode}")


def test_test_without_test_data_warns_and_runs_the_traces_without_batches() -> None:
    """As FastEstimator: no error; the test-mode traces begin and end (with an empty epoch), and a warning names the
    modes with data and the fix."""
    pipeline, network, _ = _setup()  # train and eval data only
    events: list[str] = []
    estimator = fe.Estimator(pipeline, network, epochs=1, traces=[Accuracy("y", "y_pred"), _Events(events)],
                             log_steps=None)
    with pytest.warns(UserWarning, match=r"\['eval', 'train'\].*Pipeline\(test_data=\.\.\.\)"):
        summary = estimator.test(summary="no_test")
    assert events == ["begin test", "epoch_end test", "end test"]
    assert summary.name == "no_test"


def test_a_pipeline_or_network_of_the_wrong_kind_is_a_type_error() -> None:
    pipeline, network, model = _setup()
    with pytest.raises(TypeError, match="pipeline must be an fe.Pipeline.*got TorchNetwork"):
        fe.Estimator(network, pipeline, epochs=1)  # swapped
    with pytest.raises(TypeError, match="pipeline must be an fe.Pipeline.*got NoneType"):
        fe.Estimator(None, network, epochs=1)
    with pytest.raises(TypeError, match=f"network must be an fe.Network.*got {type(model).__name__}"):
        fe.Estimator(pipeline, model, epochs=1)  # a bare model


class _CountPerDataset(fe.trace.PerDSTrace):
    """Counts each dataset's samples; writes ``count|<ds_id>`` when the dataset ends; records its events."""

    def __init__(self, events: list[str], mode: str) -> None:
        super().__init__(inputs="y", outputs="count", mode=mode)
        self.events, self.count = events, 0

    def on_ds_begin(self, data: Any) -> None:
        self.events.append(f"begin {self.system.ds_id}")
        self.count = 0
        data["not_logged"] = 1

    def on_batch_end(self, data: Any) -> None:
        self.count += len(data["y"])

    def on_ds_end(self, data: Any) -> None:
        self.events.append(f"end {self.system.ds_id}")
        data[f"count|{self.system.ds_id}"] = self.count

    def on_epoch_end(self, data: Any) -> None:
        self.events.append(f"epoch end sees {sorted(key for key in data.read_logs() if key.startswith('count'))}")

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


def _two_dataset_pipeline(mode: str) -> Any:
    from fe_ray.dataset.data import digits
    from fe_ray.op.numpyop.univariate import ExpandDims

    train, evaluation = digits.load_data()
    datasets = {"a": evaluation.subset(np.arange(16)), "b": evaluation.subset(np.arange(16, 40))}
    if mode == "eval":
        return fe.Pipeline(train_data=train.subset(np.arange(16)), eval_data=datasets, batch_size=8,
                           ops=[ExpandDims("x", "x", axis=0)])
    return fe.Pipeline(train_data=datasets, batch_size=8, ops=[ExpandDims("x", "x", axis=0)])


def test_per_ds_trace_hears_each_dataset_and_its_results_reach_the_epoch_end(capsys) -> None:
    events: list[str] = []
    estimator = fe.Estimator(_two_dataset_pipeline("eval"), classifier_network(torch_mlp()), epochs=1,
                             traces=[_CountPerDataset(events, mode="eval")], log_steps=0)
    summary = estimator.fit()
    assert events == ["begin a", "end a", "begin b", "end b", "epoch end sees ['count|a', 'count|b']"]
    assert summary.history["eval"]["count|a"] == {2: 16} and summary.history["eval"]["count|b"] == {2: 24}
    assert "not_logged" not in summary.history["eval"]  # FastEstimator logs nothing written in on_ds_begin
    assert "count|a: 16; count|b: 24" in capsys.readouterr().out  # printed with the epoch's results


def test_per_ds_trace_is_not_restarted_in_the_dataset_a_resumed_run_continues(tmp_path) -> None:
    class Crash(Trace):
        def __init__(self, armed: bool) -> None:
            super().__init__()
            self.armed = armed

        def on_batch_end(self, data: Any) -> None:
            if self.armed and self.system.ds_id == "b" and self.system.batch_idx == 2:
                raise RuntimeError("simulated crash")

    def run(crash: bool) -> tuple[list[str], Any]:
        events: list[str] = []
        traces = [_CountPerDataset(events, mode="train"), RestoreWizard(str(tmp_path), steps=1), Crash(crash)]
        estimator = fe.Estimator(_two_dataset_pipeline("train"), classifier_network(torch_mlp()), epochs=1,
                                 traces=traces, log_steps=None)
        if crash:
            with pytest.raises(RuntimeError, match="simulated crash"):
                estimator.fit()
            return events, None
        return events, estimator.fit()

    first, _ = run(crash=True)
    assert first == ["begin a", "end a", "begin b"]
    resumed, summary = run(crash=False)
    assert resumed[:1] == ["end b"]  # no "begin b": the count of b's first two batches came from the checkpoint
    assert summary.history["train"]["count|b"] == {5: 24}
    # Dataset a ended before the checkpoint: its result still reaches the resumed epoch's end (Logger prints it).
    assert resumed[1] == "epoch end sees ['count|a', 'count|b']"


class _EpochMean(Trace):
    """FastEstimator's style: accumulators set up in on_epoch_begin, no state in checkpoints."""

    def __init__(self) -> None:
        super().__init__(mode="train", inputs="y", outputs="batches")

    def on_epoch_begin(self, data: Any) -> None:
        self.seen = 0

    def on_batch_end(self, data: Any) -> None:
        self.seen += 1

    def on_epoch_end(self, data: Any) -> None:
        data.write_with_log("batches", self.seen)


def test_a_stateless_trace_of_the_users_gets_on_epoch_begin_when_a_run_resumes_inside_an_epoch(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A resumed run skips on_epoch_begin (the traces' state comes from the checkpoint); a trace that keeps none
    met attributes never set (AttributeError 'seen'). It now gets the event, its count starting at the resume."""
    import logging

    class Crash(AtTrainStep):
        def act(self, data: Any) -> None:
            raise RuntimeError("simulated crash")

    def run(crash: bool) -> Any:
        pipeline, network, _ = _setup(n_train=32, n_eval=8)  # 4 steps an epoch
        traces = [_EpochMean(), RestoreWizard(str(tmp_path), steps=2), Crash(7 if crash else None)]
        return fe.Estimator(pipeline, network, epochs=2, traces=traces, log_steps=None).fit()

    with pytest.raises(RuntimeError, match="simulated crash"):
        run(crash=True)
    with caplog.at_level(logging.WARNING, logger="fe_ray.estimator"):
        summary = run(crash=False)  # resumes after step 6, inside epoch 2
    assert summary.history["train"]["batches"] == {4: 4, 8: 2}
    assert "resumed inside epoch 2: _EpochMean keep(s) no state in checkpoints" in caplog.text


def test_fastestimator_entry_points_monitor_names_with_none_and_record_history(caplog, monkeypatch) -> None:
    """FastEstimator drops None from monitor_names (sorted() of the set raised), exports record_history (fe_ray keeps
    no history database: False is accepted, asking for a history says so) and summary.average_summaries."""
    import logging

    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(torch_mlp()), epochs=1,
                             monitor_names=["ce", None], log_steps=None)
    assert estimator.monitor_names == {"ce"}
    estimator.fit()
    import fe_ray.estimator

    monkeypatch.setattr(fe_ray.estimator, "_history_note_shown", False)
    with caplog.at_level(logging.WARNING, logger="fe_ray.estimator"):
        fe.record_history(False)
        assert caplog.text == ""
        fe.record_history(True)
    assert "keeps no experiment-history database" in caplog.text
    from fe_ray.summary import average_summaries

    assert callable(average_summaries)


def _real_estimator(traces: list[Any], eval_data: Any = None, test_data: Any = None) -> Any:
    """An fe.Pipeline (not the toy one) and a small classifier: 32 train samples in batches of 8."""
    train, evaluation = digits_arrays("torch", n_train=32, n_eval=16)
    data = fe.dataset.NumpyDataset(train)
    pipeline = fe.Pipeline(train_data=data, eval_data=eval_data, test_data=test_data, batch_size=8)
    return fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, traces=traces, log_steps=None)


class _StopAtBegin(Trace):
    def on_begin(self, data: Any) -> None:
        if self.system.mode == "train":
            self.system.stop_training = True  # e.g. "already trained": nothing to fit


def test_test_after_a_fit_stopped_in_on_begin_runs_at_epoch_0() -> None:
    """FastEstimator tests at epoch 0 after a fit() a trace stopped before its first epoch."""
    _, evaluation = digits_arrays("torch", n_train=32, n_eval=16)
    estimator = _real_estimator([_StopAtBegin()], test_data=fe.dataset.NumpyDataset(evaluation))
    estimator.fit()
    summary = estimator.test()
    assert summary.history["test"]["epoch"] == {0: 0} and "ce" in summary.history["test"]


class _Recorder(fe.trace.PerDSTrace):
    def __init__(self) -> None:
        super().__init__(mode="eval")
        self.seen: list[tuple[str, Any]] = []

    def on_begin(self, data: Any) -> None:
        self.seen.append(("traces", [type(trace).__name__ for trace in self.system.traces]))

    def on_ds_begin(self, data: Any) -> None:
        self.seen.append((self.system.ds_id, self.system.eval_log_steps))


def test_system_traces_are_the_users_and_eval_log_steps_are_set_before_on_ds_begin() -> None:
    """As FastEstimator: system.traces holds the user's traces only (not TrainEssential or Logger), and a
    dataset's eval_log_steps are known in its on_ds_begin."""
    _, evaluation = digits_arrays("torch", n_train=32, n_eval=24)
    recorder = _Recorder()
    eval_data = {"small": fe.dataset.NumpyDataset({k: v[:8] for k, v in evaluation.items()}),
                 "large": fe.dataset.NumpyDataset(evaluation)}
    _real_estimator([recorder], eval_data=eval_data).fit()
    assert recorder.seen[0] == ("traces", ["_Recorder"])
    assert dict(recorder.seen[1:]) == {"small": ([1, 0, 0, 1], 1), "large": ([1, 1, 2, 3], 3)}


def test_fastestimator_module_paths_of_data_dsdata_and_parse_freq() -> None:
    from fe_ray.trace.essential import EvalEssential, TestEssential, TrainEssential
    from fe_ray.trace.logger import Logger
    from fe_ray.trace.trace import EvalEssential as FEEval
    from fe_ray.trace.trace import Freq, parse_freq
    from fe_ray.trace.trace import Logger as FELogger
    from fe_ray.trace.trace import TestEssential as FETest
    from fe_ray.trace.trace import TrainEssential as FETrain

    assert (FETrain, FEEval, FETest, FELogger) == (TrainEssential, EvalEssential, TestEssential, Logger)
    assert fe.dataset.data.mnist.load_data is not None  # FastEstimator's lazy fe.dataset.data
    from fe_ray.util.base_util import IfElse, to_list
    from fe_ray.util.data import Data, DSData
    from fe_ray.util.util import to_number

    logged: list[tuple[str, Any]] = []
    data = Data({"x": 1}, on_log=lambda key, value: logged.append((key, value)))
    per_ds = DSData("ds1", data)
    per_ds.write_with_log("acc", 0.5)
    per_ds.write_without_log("tmp", 2)
    per_ds.write_per_instance_log("loss", [1, 2])
    assert data["acc|ds1"] == 0.5 and data["tmp|ds1"] == 2 and per_ds["x"] == 1
    assert logged == [("acc|ds1", 0.5)] and data.read_per_instance_logs() == {"loss|ds1": [1, 2]}
    assert parse_freq("3e") == Freq(False, 3) and parse_freq(None) == Freq(False, 0)
    assert IfElse(0, "y", "n") == "n" and to_list(None) == [] and to_number(3) == 3
    assert Trace().mode == set() and Trace().ds_id == set()  # FastEstimator's empty sets: every mode / dataset


def test_estimator_traces_is_the_systems_list_as_in_fastestimator() -> None:
    """FastEstimator's Estimator.traces returns system.traces; fe_ray kept a copy, so a trace appended to
    estimator.traces was missing from system.traces (where recovery and user traces look)."""
    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), classifier_network(torch_mlp()), epochs=1,
                             log_steps=None)
    extra = fe.trace.Accuracy(true_key="y", pred_key="y_pred")
    estimator.traces.append(extra)
    assert estimator.traces is estimator.system.traces and estimator.system.traces == [extra]
    assert "accuracy" in estimator.fit().history["eval"]


def test_warns_when_training_saves_no_model(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    """FastEstimator prints ``No ModelSaver Trace detected`` before training without a (Best)ModelSaver."""
    pipeline, network, model = _setup(n_train=8, n_eval=8, test=True)
    estimator = fe.Estimator(pipeline, network, epochs=1, log_steps=None)
    estimator._prepare_traces(["train", "eval"])
    assert "FastEstimator-Warn: No ModelSaver Trace detected. Models will not be saved." in capsys.readouterr().out
    estimator._prepare_traces(["test"])  # testing saves nothing anyway
    assert "No ModelSaver" not in capsys.readouterr().out
    saver = fe.schedule.EpochScheduler({1: None, 2: fe.trace.io.ModelSaver(model, str(tmp_path))})
    fe.Estimator(pipeline, network, epochs=2, traces=saver, log_steps=None)._prepare_traces(["train", "eval"])
    assert "No ModelSaver" not in capsys.readouterr().out
