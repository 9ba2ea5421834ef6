"""The README's examples: both reach >= 0.95 eval accuracy, and the same accuracy on 2 Ray replicas; their flags."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, *args: str) -> float:
    """Run an example; its accuracy. It must leave nothing that its processes delete when they end normally (TF's
    autograph modules) in its temp folder: a replica killed instead of ending like a program would."""
    # A folder of its own under the temp folder, short: unless RAY_TMPDIR says otherwise (as the test plugin's fast
    # exit does) the embedded Ray keeps its sockets there too, and a socket's path has at most 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="fe_ray_ex", dir=os.environ.get("TMPDIR") or "/tmp"))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "RAY_DEDUP_LOGS": "1", "TMPDIR": str(temp)}
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=400)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        leftovers = sorted(path.name for path in temp.glob("__autograph_generated_file*"))
        assert not leftovers, f"{len(leftovers)} autograph modules left behind, e.g. {leftovers[:3]}"
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    match = re.search(r"final eval accuracy: ([0-9.]+)", proc.stdout)
    assert match, proc.stdout[-2000:]
    return float(match.group(1))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("example", ["mnist_torch.py", "mnist_tf.py"])
def test_example_accuracy_in_process_and_on_two_replicas(example: str) -> None:
    in_process = run_example(example)
    assert in_process >= 0.95
    distributed = run_example(example, "--replicas", "2")
    # Exact gradient all-reduce: two replicas train the same model up to float summation order.
    assert distributed == pytest.approx(in_process, abs=0.01)


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", ROOT / "examples" / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example", ["mnist_torch.py", "mnist_tf.py"])
def test_gpu_flag_asks_for_one_gpu_per_replica(example: str) -> None:
    """The README's cluster job: --gpu asks for GPUs whatever the cluster holds when the job starts (fe_ray's default
    bundle looks at the GPUs present then, and would put the replicas on a GPU-less head node's CPUs)."""
    module = _load_example(example)
    assert module.get_estimator(epochs=1, replicas=2, seed=None, gpu=True).network.resources_per_replica == \
        {"GPU": 1.0}
    assert module.get_estimator(epochs=1, replicas=2, seed=None).network.resources_per_replica is None
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--gpu"])  # no --replicas: nothing would use it
    assert exit_info.value.code == 2


@pytest.mark.parametrize("example", ["mnist_torch.py", "mnist_tf.py"])
def test_wait_for_nodes_flag_reaches_the_network(example: str) -> None:
    """cluster.yaml's job: --wait-for-nodes lets the replicas wait for the GPU nodes its autoscaler starts."""
    module = _load_example(example)
    network = module.get_estimator(epochs=1, replicas=2, seed=None, gpu=True, wait_for_nodes=True).network
    assert network.wait_for_nodes is True and network.placement_timeout_s == 1800
    assert module.get_estimator(epochs=1, replicas=2, seed=None).network.wait_for_nodes is False
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--wait-for-nodes"])  # no --replicas: nothing would wait
    assert exit_info.value.code == 2


@pytest.mark.parametrize("example", ["mnist_torch.py", "mnist_tf.py"])
def test_steps_per_epoch_cut_the_epochs_and_the_rate_schedule(example: str) -> None:
    """FastEstimator's MNIST example takes train_steps_per_epoch / eval_steps_per_epoch (a quick trial run, also
    through ``fe-ray train examples/... --train_steps_per_epoch 20``); the cosine rate then decays over those steps."""
    from fe_ray.trace.adapt import LRScheduler

    module = _load_example(example)
    estimator = module.get_estimator(epochs=2, seed=None, train_steps_per_epoch=3, eval_steps_per_epoch=2)
    assert (estimator.system.train_steps_per_epoch, estimator.system.eval_steps_per_epoch) == (3, 2)
    schedule = next(trace for trace in estimator.traces if isinstance(trace, LRScheduler)).lr_fn
    assert schedule(0) == pytest.approx(module.PEAK_LR) and schedule(6) == pytest.approx(0.0)
    assert schedule(3) == pytest.approx(module.PEAK_LR / 2)


@pytest.mark.parametrize("example", ["mnist_torch.py", "mnist_tf.py"])
def test_steps_per_epoch_flags_reach_get_estimator(example: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load_example(example)
    seen: dict = {}

    class _Fit:
        def fit(self):
            return type("S", (), {"history": {"eval": {"accuracy": {1: 0.5}}}})()

    def fake_get_estimator(*args, **kwargs):
        seen.update(kwargs)
        return _Fit()

    monkeypatch.setattr(module, "get_estimator", fake_get_estimator)
    assert module.main(["--train-steps-per-epoch", "4", "--eval-steps-per-epoch", "2"]) == 0.5
    assert (seen["train_steps_per_epoch"], seen["eval_steps_per_epoch"]) == (4, 2)
    module.main([])
    assert (seen["train_steps_per_epoch"], seen["eval_steps_per_epoch"]) == (None, None)
