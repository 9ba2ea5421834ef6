"""Estimator.fit on a 2-replica RayNetwork: same result as in-process, and exact recovery from a killed replica."""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.state_files import read_checkpoint
from fe_ray.op.tensorop import LambdaOp
from fe_ray.op.tensorop.loss import CrossEntropy
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.trace import Accuracy, RestoreWizard, Trace
from tests.estimator_helpers import ToyPipeline, digits_arrays, model_weights, tf_global_noise, tf_mlp, torch_mlp


def setup(framework: str, n_train: int = 128, **network_kwargs: Any) -> tuple[Any, Any, Any]:
    train, evaluation = digits_arrays(framework, n_train=n_train, n_eval=64)
    model = torch_mlp(seed=0) if framework == "torch" else tf_mlp(seed=0)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")], **network_kwargs)
    return ToyPipeline(train, evaluation, batch_size=10, seed=0), network, model


class KillReplica(Trace):
    """SIGKILLs replica rank 1 once, after the given training step (state-free, so restores do not re-arm it)."""

    def __init__(self, network: Any, step: int, done: list[bool]) -> None:
        super().__init__(mode="train")
        self.network, self.step, self.done = network, step, done

    def on_batch_end(self, data: Any) -> None:
        if not self.done and self.system.global_step == self.step:
            self.done.append(True)
            os.kill(self.network.replica_info()[1]["pid"], signal.SIGKILL)


def halve_weights(model: Any, factor: float = 0.5) -> None:
    """Scale every weight of ``model`` in place, as a user's load_model or set_weights writes the driver's model."""
    if hasattr(model, "parameters"):
        import torch

        with torch.no_grad():
            for param in model.parameters():
                param.mul_(factor)
    else:
        model.set_weights([weight * factor for weight in model.get_weights()])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_fit_matches_in_process(ray_session: None, framework: str, tmp_path: Any) -> None:
    pipeline, network, model = setup(framework)
    expected = fe.Estimator(pipeline, network, epochs=2, traces=Accuracy("y", "y_pred"), log_steps=None).fit()
    pipeline, dist, dist_model = setup(framework, num_replicas=2)
    try:
        estimator = fe.Estimator(pipeline, dist, epochs=2, traces=Accuracy("y", "y_pred"), log_steps=None)
        got = estimator.fit()
        # Background checkpoint: rank 0 adds its models to the System's snapshot and commits it while the driver
        # goes on.
        payload = estimator.system.capture_state(models=False)
        with pytest.raises(ValueError, match="without model states"):
            dist.save_checkpoint_async(str(tmp_path), {**payload, "models": {}})
        dist.save_checkpoint_async(str(tmp_path), payload, info={"global_step": 26})
        url = dist.flush_checkpoints()
        assert url is not None and CheckpointStore(str(tmp_path)).latest() == url
        restored = read_checkpoint(url)
        assert restored["system"] == payload["system"] and restored["summary"] == payload["summary"]
        for name, state in estimator.system.capture_state()["models"].items():  # rank 0's state, pulled
            saved = restored["models"][name]["model"]
            for key in (state["model"] if isinstance(state["model"], dict) else range(len(state["model"]))):
                np.testing.assert_array_equal(saved[key], state["model"][key])
        trained = model_weights(dist_model)
        # Weights written on the driver after fit (as load_model does) reach the replicas with the next context.
        batch = {key: value[:10] for key, value in pipeline.data["eval"][""].items()}
        for each in (model, dist_model):
            halve_weights(each)
        scored = dist.transform(batch, mode="eval")
        np.testing.assert_allclose(fe.backend.to_number(scored["y_pred"]),
                                   fe.backend.to_number(network.transform(batch, mode="eval")["y_pred"]), atol=1e-6)
    finally:
        dist.shutdown()
    for each in (model, dist_model):
        halve_weights(each, factor=2.0)
    for mine, theirs in zip(model_weights(dist_model), trained):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)
    accuracy, ref = got.history["eval"]["accuracy"], expected.history["eval"]["accuracy"]
    assert accuracy.keys() == ref.keys()
    np.testing.assert_allclose(list(accuracy.values()), list(ref.values()), atol=1e-6)
    assert list(accuracy.values())[-1] > 0.5  # it learned something
    np.testing.assert_allclose(got.history["eval"]["ce"][26], expected.history["eval"]["ce"][26], rtol=1e-4)
    for mine, theirs in zip(model_weights(dist_model), model_weights(model)):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


@pytest.mark.timeout(180)
# Each transport with torch, and TF with the default one: a replica's framework and its transport are independent
# parts of recovery (the reliability tests kill torch replicas on the stream at random steps).
@pytest.mark.parametrize("framework, transport", [("torch", "calls"), ("torch", "compiled"), ("tf", "stream")])
def test_killed_replica_recovers_from_checkpoint(ray_session: None, tmp_path: Any, framework: str,
                                                 transport: str) -> None:
    pipeline, network, model = setup(framework, n_train=80)
    fe.Estimator(pipeline, network, epochs=2, log_steps=None).fit()
    ckpt = str(tmp_path / "ckpt")
    pipeline, dist, dist_model = setup(framework, n_train=80, num_replicas=2, max_failures=1, checkpoint_dir=ckpt,
                                       step_transport=transport)
    done: list[bool] = []
    traces = [RestoreWizard(ckpt, steps=4), KillReplica(dist, step=10, done=done)]
    try:
        fe.Estimator(pipeline, dist, epochs=2, traces=traces, log_steps=None).fit()
    finally:
        dist.shutdown()
    assert done and dist.recoveries == 1  # killed once after step 10, resumed from the step-8 checkpoint
    for mine, theirs in zip(model_weights(dist_model), model_weights(model)):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


class KillReplicaAtEpochEnd(Trace):
    """SIGKILLs replica rank 1 once at the end of training epoch 1: the failure shows when the evaluation context
    is configured, between steps."""

    def __init__(self, network: Any, done: list[bool]) -> None:
        super().__init__(mode="train")
        self.network, self.done = network, done

    def on_epoch_end(self, data: Any) -> None:
        if not self.done:
            self.done.append(True)
            os.kill(self.network.replica_info()[1]["pid"], signal.SIGKILL)


def recovered_equals_uninterrupted(ckpt: str, wizard: Any, killer: Any) -> None:
    """Fit 2 epochs in process, then on 2 replicas with ``max_failures=1``, ``wizard`` and ``killer(network, done)``
    as traces: the killer must have struck, the run recovered once, and its weights equal the in-process ones."""
    pipeline, network, model = setup("torch", n_train=80)
    fe.Estimator(pipeline, network, epochs=2, log_steps=None).fit()
    pipeline, dist, dist_model = setup("torch", n_train=80, num_replicas=2, max_failures=1, checkpoint_dir=ckpt)
    done: list[bool] = []
    try:
        fe.Estimator(pipeline, dist, epochs=2, traces=[wizard, killer(dist, done)], log_steps=None).fit()
    finally:
        dist.shutdown()
    assert done and dist.recoveries == 1
    for mine, theirs in zip(model_weights(dist_model), model_weights(model)):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


@pytest.mark.timeout(180)
def test_replica_dead_when_a_context_starts_recovers(ray_session: None, tmp_path: Any) -> None:
    ckpt = str(tmp_path / "ckpt")
    recovered_equals_uninterrupted(ckpt, RestoreWizard(ckpt, steps=4), KillReplicaAtEpochEnd)


@pytest.mark.timeout(180)
def test_failure_before_the_first_periodic_checkpoint_recovers_from_memory(ray_session: None) -> None:
    """With max_failures the RestoreWizard commits the starting state at on_begin, so a replica killed at step 2,
    before the epoch-end checkpoint, is recovered; a memory:// directory (this process only) is written by the
    driver, where recovery reads it."""
    from fe_ray.io.checkpoint import CheckpointStore

    ckpt = "memory://fe_ray_tests/early_failure"
    recovered_equals_uninterrupted(ckpt, RestoreWizard(ckpt),
                                   lambda network, done: KillReplica(network, step=2, done=done))
    assert CheckpointStore(ckpt).latest() is not None  # the driver's memory filesystem holds the run's checkpoints


def input_dropout(x: Any) -> Any:
    """A random op: drops 30% of the input features with each replica's own torch generator."""
    import torch

    return torch.nn.functional.dropout(x, p=0.3, training=True)


def random_ops_network(framework: str, directory: str) -> tuple[Any, Any]:
    """A network with random ops: torch's input dropout on each replica's global generator; for TF, input noise from
    each replica's global tf.random.Generator and a Keras Dropout layer."""
    if framework == "torch":
        model = torch_mlp(seed=0)
        ops = [LambdaOp(fn=input_dropout, inputs="x", outputs="x", mode="train")]
    else:
        model = tf_mlp(seed=0, dropout=0.3)
        ops = [LambdaOp(fn=tf_global_noise, inputs="x", outputs="x", mode="train")]
    ops += [ModelOp(model=model, inputs="x", outputs="y_pred"), CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
            UpdateOp(model=model, loss_name="ce")]
    return fe.Network(ops, num_replicas=2, max_failures=1, checkpoint_dir=directory), model


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_recovery_with_random_ops_is_exact(ray_session: None, tmp_path: Any, framework: str) -> None:
    """Replicas run deterministic kernels, and their generator states (Keras models' seed generators included) are
    seeded per rank from enable_deterministic's seed and checkpointed, so a run with dropout repeats exactly, and a
    recovered run repeats the uninterrupted run's random draws exactly."""

    def run(directory: str, kill: bool) -> tuple[Any, Any]:
        fe.enable_deterministic(3)
        train, evaluation = digits_arrays(framework, n_train=80, n_eval=64)
        network, model = random_ops_network(framework, directory)
        done: list[bool] = []
        traces = [RestoreWizard(directory, steps=4)] + ([KillReplica(network, step=10, done=done)] if kill else [])
        try:
            fe.Estimator(ToyPipeline(train, evaluation, batch_size=10, seed=0), network, epochs=2, traces=traces,
                         log_steps=None).fit()
            # enable_deterministic's kernel switches reach the replicas (the recovered ones too), as on the driver.
            assert [info["deterministic_kernels"] for info in network.replica_info()] == [True, True]
        finally:
            network.shutdown()
        assert bool(done) == kill and network.recoveries == int(kill)
        return model, network

    expected, _ = run(str(tmp_path / "uninterrupted"), kill=False)
    got, _ = run(str(tmp_path / "killed"), kill=True)
    for mine, theirs in zip(model_weights(got), model_weights(expected)):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)


class CountSteps(Trace):
    """Records the global step of every training step this run executes (stateless: not restored)."""

    def __init__(self, steps: list[int]) -> None:
        super().__init__(mode="train")
        self.steps = steps

    def on_batch_end(self, data: Any) -> None:
        self.steps.append(self.system.global_step)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("first, second", [(2, None), (None, 2)], ids=["2replicas-then-in-process",
                                                                       "in-process-then-2replicas"])
def test_checkpoint_resumes_across_replica_counts(ray_session: None, tmp_path: Any, first: int | None,
                                                  second: int | None) -> None:
    pipeline, network, model = setup("torch", n_train=80)
    expected = fe.Estimator(pipeline, network, epochs=2, traces=Accuracy("y", "y_pred"), log_steps=None).fit()
    ckpt = str(tmp_path / "ckpt")
    runs, steps_run = [], []
    for epochs, replicas in ((1, first), (2, second)):  # the second run resumes after epoch 1 and trains epoch 2
        kwargs = {"num_replicas": replicas} if replicas else {}
        pipeline, net, trained = setup("torch", n_train=80, **kwargs)
        counted: list[int] = []
        steps_run.append(counted)
        traces = [Accuracy("y", "y_pred"), RestoreWizard(ckpt), CountSteps(counted)]
        try:
            got = fe.Estimator(pipeline, net, epochs=epochs, traces=traces, log_steps=None).fit()
        finally:
            if replicas:
                net.shutdown()
        runs.append(got)
    assert len(steps_run[0]) == 8 and steps_run[1] == list(range(9, 17))  # resumed: only epoch 2 was trained
    assert runs[1].history["eval"]["accuracy"].keys() == expected.history["eval"]["accuracy"].keys()
    np.testing.assert_allclose(list(runs[1].history["eval"]["accuracy"].values()),
                               list(expected.history["eval"]["accuracy"].values()), atol=1e-6)
    for mine, theirs in zip(model_weights(trained), model_weights(model)):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


class SlowState(Trace):
    """A trace whose checkpointed state takes ``seconds`` to pickle in the checkpoint writer (rank 0's process)."""

    def __init__(self, seconds: float, marker: str) -> None:
        super().__init__(mode="train")
        self.seconds, self.marker = seconds, marker

    def state_dict(self) -> dict[str, Any]:
        from tests.reliability.helpers import SlowToPickle

        return {"slow": SlowToPickle(os.getpid(), self.marker, self.seconds)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class FailAt(Trace):
    """Raises before training step ``step`` (a failing driver); never with None."""

    def __init__(self, step: int | None) -> None:
        super().__init__(mode="train")
        self.step = step

    def on_batch_begin(self, data: Any) -> None:
        if self.system.global_step == self.step:
            raise RuntimeError("training failed (simulated)")


@pytest.mark.timeout(180)
def test_fit_that_raises_commits_the_checkpoint_rank0_is_writing(ray_session: None, tmp_path: Any) -> None:
    pipeline, network, _ = setup("torch", num_replicas=2)
    directory = str(tmp_path / "ckpt")
    # The checkpoint of step 3 takes 2 s to write; training fails at step 4, while it is still being written.
    traces = [SlowState(2.0, str(tmp_path / "writer.pid")), RestoreWizard(directory, steps=3), FailAt(step=4)]
    estimator = fe.Estimator(pipeline, network, epochs=1, traces=traces, log_steps=None)
    try:
        with pytest.raises(RuntimeError, match="simulated"):
            estimator.fit()
        assert int((tmp_path / "writer.pid").read_text()) == network.replica_info()[0]["pid"]  # rank 0 wrote it
        latest = CheckpointStore(directory).latest()
        assert latest is not None, "the checkpoint of step 3 must be committed before fit's exception is raised"
        assert CheckpointStore(directory).manifest(latest)["info"]["global_step"] == 3
    finally:
        network.shutdown()


@pytest.mark.timeout(120)
def test_the_pipeline_makes_the_next_batch_while_the_replica_computes(ray_session: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from fe_ray.dataset import NumpyDataset
    from fe_ray.op.numpyop import LambdaOp as NumpyLambdaOp

    train, _ = digits_arrays("torch", n_train=40, n_eval=0)
    made: list[int] = []

    def make(x: np.ndarray) -> np.ndarray:
        made.append(1)
        return x

    class Made(Trace):
        def __init__(self) -> None:
            super().__init__(mode="train")
            self.at_end: list[int] = []

        def on_epoch_begin(self, data: Any) -> None:
            made.clear()  # (the Estimator's warm-up made a batch)

        def on_batch_end(self, data: Any) -> None:
            self.at_end.append(len(made))

    _, network, _ = setup("torch", num_replicas=1)
    pipeline = fe.Pipeline(train_data=NumpyDataset(train), batch_size=10,
                           ops=[NumpyLambdaOp(fn=make, inputs="x", outputs="x")])
    trace = Made()
    puts: list[int] = []
    put_slices = type(network)._put_slices
    monkeypatch.setattr(type(network), "_put_slices", lambda self, batch: puts.append(1) or put_slices(self, batch))
    try:
        fe.Estimator(pipeline, network, epochs=1, traces=trace, log_steps=None).fit()
    finally:
        network.shutdown()
    # When step k ends, batch k+1 is already made (during step k), not only after it: 20 samples after step 1.
    assert trace.at_end == [20, 30, 40, 40]
    # Each batch's slices are made once: the step reuses those put ahead (the warm-up batch is the fifth).
    assert len(puts) == 5



@pytest.mark.timeout(180)
def test_a_stateful_pipeline_op_resumes_exactly_on_a_replica(ray_session: None, tmp_path: Any) -> None:
    """The replica computes while the driver would make the next batch; with a stateful op that would put the next
    batch's samples into the checkpoint of the current step, so its loader makes each batch in turn instead."""
    from fe_ray.dataset import NumpyDataset
    from tests.helpers.ops import Warmup

    train, _ = digits_arrays("torch", n_train=40, n_eval=0)

    steps_run: list[int] = []

    def run(ckpt: str, stop: int | None = None) -> tuple[dict[int, Any], list[np.ndarray]]:
        _, network, model = setup("torch", num_replicas=1)
        pipeline = fe.Pipeline(train_data=NumpyDataset(train), batch_size=10, ops=[Warmup()], shuffle_seed=0)
        steps_run.clear()
        # Every run has the same traces (a checkpoint restores only into the same ones).
        traces = [RestoreWizard(ckpt, steps=3), FailAt(stop), CountSteps(steps_run)]
        try:
            summary = fe.Estimator(pipeline, network, epochs=2, traces=traces, log_steps=1).fit()
        finally:
            network.shutdown()
        return dict(summary.history["train"]["ce"]), model_weights(model)

    expected_ce, expected_weights = run(str(tmp_path / "reference"))
    with pytest.raises(RuntimeError, match="training failed"):
        run(str(tmp_path / "ckpt"), stop=4)
    assert read_checkpoint(CheckpointStore(str(tmp_path / "ckpt")).latest())["system"]["global_step"] == 3
    got_ce, got_weights = run(str(tmp_path / "ckpt"))
    assert steps_run == list(range(4, 9))  # resumed after step 3, mid-epoch (4 steps an epoch)
    assert list(got_ce) == list(expected_ce) == list(range(1, 9))
    np.testing.assert_allclose(list(got_ce.values()), list(expected_ce.values()), rtol=1e-6)
    for got, expected in zip(got_weights, expected_weights):
        np.testing.assert_allclose(got, expected, atol=1e-6)

class ZeroInputs(Trace):
    """Zeroes the batch's x in on_batch_begin (replacing it, or editing it in place) and records what the step saw
    (the sum of |x|)."""

    def __init__(self, in_place: bool) -> None:
        super().__init__(mode="train", inputs="x_abs")
        self.in_place = in_place
        self.seen: list[float] = []

    def on_batch_begin(self, data: Any) -> None:
        if self.in_place:
            data["x"][:] = 0  # the batch holds torch tensors, as in FastEstimator
        else:
            data.write_without_log("x", np.zeros_like(data["x"]))

    def on_batch_end(self, data: Any) -> None:
        self.seen.append(float(np.abs(np.asarray(data["x_abs"])).sum()))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_place, transport", [(False, "stream"), (True, "calls")])
def test_on_batch_begin_writes_reach_the_replicas(ray_session: None, monkeypatch: pytest.MonkeyPatch,
                                                  in_place: bool, transport: str) -> None:
    """A value a trace writes into the batch in on_batch_begin is what the replicas run, also where the network
    puts a batch's slices ahead during the previous step (step pipelining): with actor calls and slices through
    the object store, an in-place edit made after that put was lost."""
    from fe_ray.dataset import NumpyDataset
    from fe_ray.distributed import coordinator

    monkeypatch.setattr(coordinator, "INLINE_SLICE_BYTES", -1)  # every slice through ray.put, as large ones go
    train, _ = digits_arrays("torch", n_train=40, n_eval=0)
    model = torch_mlp(seed=0)
    network = fe.Network([LambdaOp(fn=lambda x: x.abs().sum(dim=1), inputs="x", outputs="x_abs"),
                          ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")], num_replicas=2, step_transport=transport)
    trace = ZeroInputs(in_place)
    try:
        # A Pipeline (whose loader reports its position), so the network can put the next batch's slices ahead.
        fe.Estimator(fe.Pipeline(train_data=NumpyDataset(train), batch_size=10), network, epochs=1, traces=trace,
                     log_steps=None).fit()
    finally:
        network.shutdown()
    assert trace.seen == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.timeout(180)
def test_interleaved_batches_of_two_sizes_match_in_process(ray_session: None) -> None:
    # An InterleaveDataset changes the batch size (and source) from step to step: the replicas must still make the
    # update one process makes on each whole batch.
    from fe_ray.dataset import InterleaveDataset, NumpyDataset

    train, _ = digits_arrays("torch", n_train=160, n_eval=8)

    def fit(**network_kwargs: Any) -> list[np.ndarray]:
        first = NumpyDataset({key: value[:96] for key, value in train.items()})
        second = NumpyDataset({key: value[96:] for key, value in train.items()})
        data = InterleaveDataset([first, second], pattern=[0, 0, 1])
        data.set_batch_sizes([16, 7])  # 7: slices of 4 and 3
        model = torch_mlp(seed=1)
        network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                              CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                              UpdateOp(model=model, loss_name="ce")], **network_kwargs)
        fe.Estimator(fe.Pipeline(train_data=data, batch_size=16, shuffle_seed=3), network, epochs=2,
                     log_steps=None).fit()
        if network_kwargs:
            network.shutdown()
        return model_weights(model)

    for expected, got in zip(fit(), fit(num_replicas=2)):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def freeze_first_layer_and_reset_optimizer(model: Any) -> None:
    """What a fine-tuning script does on the driver between two fits: freeze the first hidden layer, and (torch) start
    the optimizer afresh."""
    if hasattr(model, "parameters"):
        for param in model[1].parameters():
            param.requires_grad_(False)
        model.current_optimizer.state.clear()
    else:
        model.layers[1].trainable = False


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_trainability_and_optimizer_changes_between_fits_reach_the_replicas(ray_session: None,
                                                                            framework: str) -> None:
    # Before, torch replicas kept training the frozen layer and their old Adam moments; TF replicas failed at the
    # first epoch's end (their copy still trained the layer). Now the replicas restart from the driver's models when
    # which weights train changed, and a driver optimizer state written between fits is sent with the weights.
    results = []
    for replicas in (None, 2):
        kwargs = {} if replicas is None else {"num_replicas": replicas}
        pipeline, network, model = setup(framework, n_train=60, **kwargs)
        try:
            fe.Estimator(pipeline, network, epochs=1, log_steps=None).fit()
            freeze_first_layer_and_reset_optimizer(model)
            frozen = [weight.copy() for weight in model_weights(model)[:2]]
            summary = fe.Estimator(pipeline, network, epochs=1, log_steps=None).fit()
        finally:
            if replicas:
                network.shutdown()
        for before, after in zip(frozen, model_weights(model)[:2]):
            np.testing.assert_array_equal(before, after)  # the frozen layer did not move
        results.append((summary.history["eval"]["ce"], model_weights(model)))
    (expected_ce, expected), (got_ce, got) = results
    np.testing.assert_allclose(list(got_ce.values()), list(expected_ce.values()), rtol=1e-4)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)
