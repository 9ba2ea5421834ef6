"""Resume exactness: an interrupted run restarted from its RestoreWizard directory ends exactly like an
uninterrupted one (weights and Summary history), for epoch-end and mid-epoch checkpoints and a SIGKILLed process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.io import CheckpointStore
from fe_ray.op.tensorop import LambdaOp
from fe_ray.trace import Accuracy, RestoreWizard, Trace
from tests.estimator_helpers import (
    ToyPipeline,
    classifier_network,
    digits_arrays,
    model_weights,
    tf_global_noise,
    tf_mlp,
    torch_mlp,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMING_KEYS = {"steps/sec", "epoch_time(sec)", "total_time(sec)"}


class Interrupted(RuntimeError):
    pass


class Interrupt(Trace):
    """Raises before training epoch ``epoch`` starts, or before training step ``step`` runs (None: never)."""

    def __init__(self, epoch: int | None = None, step: int | None = None) -> None:
        super().__init__(mode="train")
        self.epoch = epoch
        self.step = step

    def on_epoch_begin(self, data: Any) -> None:
        if self.system.epoch_idx == self.epoch:
            raise Interrupted(f"before epoch {self.epoch}")

    def on_batch_begin(self, data: Any) -> None:
        if self.system.global_step == self.step:
            raise Interrupted(f"before step {self.step}")


def _run(framework: str, directory: str | None, epochs: int = 3, interrupt: Interrupt | None = None,
         steps: int | None = None, background: bool = True, dropout: float = 0.0,
         noise: bool = False) -> tuple[Any, Any]:
    fe.enable_deterministic(7)
    train, evaluation = digits_arrays(framework, n_train=96, n_eval=32)
    model = torch_mlp(seed=7) if framework == "torch" else tf_mlp(seed=7, dropout=dropout)
    traces: list[Any] = [Accuracy("y", "y_pred"), interrupt or Interrupt()]
    if directory is not None:
        traces.append(RestoreWizard(directory, steps=steps, background=background))
    network = classifier_network(model)
    if noise:
        import tensorflow as tf

        # TensorFlow's deterministic mode (enable_deterministic) has the program make its global generator.
        tf.random.set_global_generator(tf.random.Generator.from_seed(7))
        network = fe.Network([LambdaOp(fn=tf_global_noise, inputs="x", outputs="x", mode="train"), *network.ops])
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=16, seed=3), network,
                             epochs=epochs, traces=traces, log_steps=2)
    return estimator.fit(), model


def test_an_unwritable_restore_wizard_directory_fails_before_training(tmp_path) -> None:
    """Reported when the run starts, not at the end of the first epoch when the first checkpoint is due."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    steps = Interrupt(step=10**9)  # never raises; records nothing either: the run must not reach a step
    ran: list[int] = []
    steps.on_batch_begin = lambda data: ran.append(1)  # type: ignore[method-assign]
    with pytest.raises(OSError, match="Cannot write checkpoints to"):
        _run("torch", str(blocker / "ckpts"), epochs=1, interrupt=steps)
    assert ran == []


def _history(summary: Any) -> dict:
    return {mode: {key: steps for key, steps in keys.items() if key not in TIMING_KEYS}
            for mode, keys in summary.history.items()}


def _assert_same(run_a: tuple[Any, Any], run_b: tuple[Any, Any]) -> None:
    for a, b in zip(model_weights(run_a[1]), model_weights(run_b[1])):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    hist_a, hist_b = _history(run_a[0]), _history(run_b[0])
    assert hist_a.keys() == hist_b.keys()
    for mode in hist_a:
        assert hist_a[mode].keys() == hist_b[mode].keys(), mode
        for key in hist_a[mode]:
            assert hist_a[mode][key].keys() == hist_b[mode][key].keys(), (mode, key)
            np.testing.assert_allclose(list(hist_a[mode][key].values()), list(hist_b[mode][key].values()),
                                       atol=1e-6, rtol=0, err_msg=f"{mode}/{key}")


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_resume_after_epoch_boundary(tmp_path, framework: str) -> None:
    reference = _run(framework, None)
    directory = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run(framework, directory, interrupt=Interrupt(epoch=3))
    assert CheckpointStore(directory).manifest(CheckpointStore(directory).latest())["info"]["epoch_idx"] == 2
    resumed = _run(framework, directory)
    _assert_same(reference, resumed)


@pytest.mark.parametrize("background", [True, False], ids=["background", "synchronous"])
@pytest.mark.parametrize("stop_step, expected", [(5, (4, "train", 4)), (12, (8, "train", 2))])
def test_resume_mid_epoch(tmp_path, stop_step: int, expected: tuple, background: bool) -> None:
    # 6 steps per epoch, a checkpoint every 4 steps and after each epoch; the run stops before ``stop_step``.
    # In the background case the last checkpoint is still being written when training fails: it must be
    # committed (on_abort) before the exception reaches the caller.
    reference = _run("torch", None)
    directory = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run("torch", directory, interrupt=Interrupt(step=stop_step), steps=4, background=background)
    info = CheckpointStore(directory).manifest(CheckpointStore(directory).latest())["info"]
    assert (info["global_step"], info["mode"], info["batch_idx"]) == expected
    resumed = _run("torch", directory, steps=4, background=background)
    _assert_same(reference, resumed)


@pytest.mark.parametrize("dropout, noise", [(0.0, False), (0.3, False), (0.0, True)],
                         ids=["plain", "keras-dropout", "tf-global-generator"])
def test_resume_mid_epoch_tf(tmp_path, dropout: float, noise: bool) -> None:
    # With dropout, the Dropout layer's Keras seed generator has advanced by the checkpoint's step: its state travels
    # with the random state (it is not a weight), or the resumed run draws the first steps' masks again. The same
    # holds for TensorFlow's global tf.random.Generator, which the noise op draws from.
    reference = _run("tf", None, epochs=2, dropout=dropout, noise=noise)
    directory = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run("tf", directory, epochs=2, interrupt=Interrupt(step=9), steps=4, dropout=dropout, noise=noise)
    _assert_same(reference, _run("tf", directory, epochs=2, steps=4, dropout=dropout, noise=noise))


def test_resume_twice_and_memory_filesystem() -> None:
    import uuid

    directory = f"memory://resume-{uuid.uuid4().hex}"
    reference = _run("torch", None)
    with pytest.raises(Interrupted):
        _run("torch", directory, interrupt=Interrupt(step=5), steps=2)
    with pytest.raises(Interrupted):
        _run("torch", directory, interrupt=Interrupt(step=13), steps=2)
    _assert_same(reference, _run("torch", directory, steps=2))


SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
import numpy as np
import torch
torch.set_num_threads(1)
import fe_ray as fe
from fe_ray.trace import Accuracy, RestoreWizard, Trace
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, model_weights, torch_mlp

class Slow(Trace):
    def on_batch_end(self, data):
        time.sleep(float(sys.argv[3]))

fe.enable_deterministic(7)
train, evaluation = digits_arrays("torch", n_train=96, n_eval=32)
model = torch_mlp(seed=7)
traces = [Accuracy("y", "y_pred"), Slow(mode="train"), RestoreWizard(sys.argv[1], steps=3)]
estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=16, seed=3), classifier_network(model),
                         epochs=4, traces=traces, log_steps=None)
estimator.fit()
np.savez(sys.argv[2], *model_weights(model))
"""


def _script(tmp_path: Any) -> str:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT.format(root=ROOT)))
    return str(path)


@pytest.mark.slow
def test_resume_after_sigkill(tmp_path) -> None:
    script = _script(tmp_path)
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    subprocess.run([sys.executable, script, str(tmp_path / "ref"), str(tmp_path / "ref.npz"), "0"], check=True,
                   env=env, capture_output=True, timeout=120)
    directory = str(tmp_path / "ckpt")
    store = CheckpointStore(directory)
    proc = subprocess.Popen([sys.executable, script, directory, str(tmp_path / "out.npz"), "0.05"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while store.latest() is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert store.latest() is not None, "no checkpoint appeared"
        time.sleep(0.1)  # let it get into the middle of the next steps (and possibly of a checkpoint write)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "out.npz").exists(), "the run finished before it could be killed"
    subprocess.run([sys.executable, script, directory, str(tmp_path / "out.npz"), "0"], check=True, env=env,
                   capture_output=True, timeout=120)
    with np.load(tmp_path / "ref.npz") as ref, np.load(tmp_path / "out.npz") as out:
        assert ref.files == out.files
        for key in ref.files:
            np.testing.assert_allclose(ref[key], out[key], atol=1e-6, rtol=0)


def _run_real_pipeline(directory: str | None, interrupt: Interrupt | None = None, steps: int | None = None,
                       train_steps: int | None = None) -> tuple[Any, Any]:
    pytest.importorskip("fe_ray.pipeline")
    from fe_ray.dataset.data import digits
    from fe_ray.op.numpyop.univariate import ExpandDims, Minmax

    fe.enable_deterministic(11)
    train, evaluation = digits.load_data()
    pipeline = fe.Pipeline(train_data=train.subset(np.arange(200)), eval_data=evaluation.subset(np.arange(64)),
                           batch_size=32, ops=[ExpandDims("x", "x", axis=0), Minmax("x", "x")], shuffle_seed=5)
    model = torch_mlp(seed=11)
    traces: list[Any] = [Accuracy("y", "y_pred"), interrupt or Interrupt()]
    if directory is not None:
        traces.append(RestoreWizard(directory, steps=steps))
    estimator = fe.Estimator(pipeline, classifier_network(model), epochs=3, traces=traces, log_steps=3,
                             train_steps_per_epoch=train_steps)
    return estimator.fit(), model


@pytest.mark.parametrize("train_steps", [None, 9])
def test_resume_mid_epoch_with_pipeline(tmp_path, train_steps: int | None) -> None:
    # The real Pipeline: its state_dict must carry the shuffle seed and the position within the epoch (with
    # train_steps_per_epoch=9 the epoch also extends past one pass of 7 batches).
    reference = _run_real_pipeline(None, train_steps=train_steps)
    directory = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run_real_pipeline(directory, interrupt=Interrupt(step=12), steps=5, train_steps=train_steps)
    assert CheckpointStore(directory).manifest(CheckpointStore(directory).latest())["info"]["global_step"] == 10
    _assert_same(reference, _run_real_pipeline(directory, steps=5, train_steps=train_steps))


class InterruptEval(Trace):
    """Raises before the first evaluation batch of epoch 1 when ``armed``."""

    def __init__(self, armed: bool = True) -> None:
        super().__init__(mode="eval")
        self.armed = armed

    def on_batch_begin(self, data: Any) -> None:
        if self.armed and self.system.epoch_idx == 1:
            raise Interrupted("before evaluating epoch 1")


def test_resume_from_a_checkpoint_taken_after_an_epochs_last_training_batch(tmp_path) -> None:
    """steps=7 with 7 batches per epoch checkpoints after the epoch's last training batch, before its on_epoch_end
    and its evaluation. The Pipeline has no position left for that epoch then, so the resumed run must skip to the
    epoch's end, not train the whole epoch again (it did: 7 extra steps, other weights)."""
    reference = _run_real_pipeline(None)
    directory = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run_real_pipeline(directory, interrupt=InterruptEval(), steps=7)
    info = CheckpointStore(directory).manifest(CheckpointStore(directory).latest())["info"]
    assert (info["global_step"], info["mode"], info["batch_idx"]) == (7, "train", 7)
    _assert_same(reference, _run_real_pipeline(directory, interrupt=InterruptEval(armed=False), steps=7))


def _run_filtered_pipeline(directory: str | None, interrupt: Trace | None = None,
                           steps: int | None = None) -> tuple[Any, Any]:
    """The real Pipeline, whose RemoveIf (no replacement) drops one batch of each training epoch: 7 planned batches,
    6 trained."""
    from fe_ray.dataset import NumpyDataset
    from fe_ray.dataset.data import digits
    from fe_ray.op.numpyop import Batch, RemoveIf
    from fe_ray.op.numpyop.univariate import ExpandDims, Minmax

    fe.enable_deterministic(11)
    train, evaluation = digits.load_data()
    train = train.subset(np.arange(200))
    train = NumpyDataset({"x": train["x"], "y": train["y"], "idx": np.arange(200)})
    evaluation = evaluation.subset(np.arange(64))
    evaluation = NumpyDataset({"x": evaluation["x"], "y": evaluation["y"], "idx": np.arange(64)})
    # A batch filter after the Batch op drops the (shuffled) batch holding sample 0.
    pipeline = fe.Pipeline(train_data=train, eval_data=evaluation, shuffle_seed=5,
                           ops=[ExpandDims("x", "x", axis=0), Minmax("x", "x"), Batch(batch_size=32),
                                RemoveIf(lambda idx: bool(np.any(idx == 0)), replacement=False, inputs="idx",
                                         mode="train")])
    model = torch_mlp(seed=11)
    traces: list[Any] = [Accuracy("y", "y_pred"), interrupt or Interrupt()]
    if directory is not None:
        traces.append(RestoreWizard(directory, steps=steps))
    estimator = fe.Estimator(pipeline, classifier_network(model), epochs=2, traces=traces, log_steps=3)
    return estimator.fit(), model


def test_resume_after_an_epochs_last_batch_when_a_filtered_batch_was_skipped(tmp_path) -> None:
    """A batch emptied by a filter is skipped, so an epoch trains fewer steps than the loader plans. A checkpoint
    after its last training batch must still resume at the epoch's end (the Pipeline keeps no position for a finished
    epoch), not train the epoch again."""
    reference = _run_filtered_pipeline(None)
    assert reference[0].history["train"]["ce"] and max(reference[0].history["train"]["ce"]) == 12
    directory = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run_filtered_pipeline(directory, interrupt=InterruptEval(), steps=6)
    info = CheckpointStore(directory).manifest(CheckpointStore(directory).latest())["info"]
    assert (info["global_step"], info["mode"], info["batch_idx"]) == (6, "train", 6)
    _assert_same(reference, _run_filtered_pipeline(directory, interrupt=InterruptEval(armed=False), steps=6))
