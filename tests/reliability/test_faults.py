"""Faults during distributed training: killed replicas (also while rank 0 writes a checkpoint), a killed driver, hung
replicas,
user-op errors, a full or unusable checkpoint disk, and NaN losses on one replica.

Every test runs on the module's local Ray session (4 CPUs) with a 12-step digits MLP (see helpers.build_run).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.backend import get_backend
from fe_ray.distributed import ReplicaDiedError, ReplicaTimeoutError
from fe_ray.distributed.checkpointing import CheckpointWriterError
from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.state_files import read_checkpoint
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.trace import Trace
from tests.helpers.models import linear
from tests.helpers.state import assert_same_state
from tests.reliability.helpers import (
    HangReplica,
    KillReplica,
    RestoreWizard,
    SlowToPickle,
    build_run,
    hang_if_marked,
    pid_alive,
    wait_for,
    weights_of,
)

ROOT = str(Path(__file__).resolve().parents[2])

_REFERENCE: dict[str, list[np.ndarray]] = {}


def reference_weights(framework: str = "torch") -> list[np.ndarray]:
    """Final weights of the uninterrupted in-process run (computed once per module)."""
    if framework not in _REFERENCE:
        estimator, model = build_run(framework)
        estimator.fit()
        _REFERENCE[framework] = weights_of(model)
    return _REFERENCE[framework]


def assert_same_weights(model: Any, framework: str = "torch") -> None:
    for mine, ref in zip(weights_of(model), reference_weights(framework), strict=True):
        np.testing.assert_allclose(mine, ref, atol=1e-5, rtol=0)


def staging_dirs(directory: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


# ------------------------------------------------------------------------------------------- replica SIGKILL
@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_replica_sigkill_at_random_step_recovers_exactly(ray_session: None, tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    step, rank = int(rng.integers(4, 13)), int(rng.integers(0, 2))  # steps 4..12 (first checkpoint at step 3)
    ckpt = str(tmp_path / "ckpt")
    killer = KillReplica(None, step=step, rank=rank)
    estimator, model = build_run(traces=[RestoreWizard(ckpt, steps=3), killer], num_replicas=2, max_failures=1,
                                 checkpoint_dir=ckpt)
    killer.network = estimator.network
    try:
        estimator.fit()
    finally:
        estimator.network.shutdown()
    assert killer.killed_at is not None, f"rank {rank} was never killed at step {step}"
    assert (estimator.network.failures, estimator.network.recoveries) == (1, 1)
    assert estimator.system.global_step == 12
    assert_same_weights(model)


@pytest.mark.timeout(120)
def test_replica_sigkill_without_max_failures_fails_fast_and_checkpoint_loads(ray_session: None,
                                                                               tmp_path: Path) -> None:
    ckpt = str(tmp_path / "ckpt")
    estimator, _ = build_run(num_replicas=2)
    killer = KillReplica(estimator.network, step=7, rank=1)
    estimator.traces.extend([RestoreWizard(ckpt, steps=3), killer])
    try:
        with pytest.raises(ReplicaDiedError, match="rank 1 .*died") as info:
            estimator.fit()
        elapsed = time.monotonic() - (killer.killed_at or 0.0)
    finally:
        estimator.network.shutdown()
    assert elapsed < 10, f"the death was reported {elapsed:.1f}s after the kill"
    assert info.value.rank == 1 and not estimator.network.started
    store = CheckpointStore(ckpt, keep=None)
    assert store.manifest(store.latest())["info"]["global_step"] == 6  # the last one before the kill after step 7
    read_checkpoint(store.latest())  # loads
    # ... and a fresh (in-process) run resumes from it and ends exactly like an uninterrupted run.
    resumed, model = build_run(traces=[RestoreWizard(ckpt, steps=3)])
    resumed.fit()
    assert_same_weights(model)


# ------------------------------------------------------------------------------------------- hung replica
@pytest.mark.timeout(120)
def test_hung_replica_in_fit_is_detected_within_step_timeout(ray_session: None, tmp_path: Path) -> None:
    marker = str(tmp_path / "hang")
    env = {"env_vars": {"FE_RAY_HANG_FILE": marker}}
    estimator, _ = build_run(first_op=hang_if_marked, num_replicas=2, step_timeout_s=6, runtime_env=env)
    hanger = HangReplica(estimator.network, step=4, marker=marker)
    estimator.traces.append(hanger)
    try:
        with pytest.raises(ReplicaTimeoutError, match="within 6s") as info:
            estimator.fit()
        elapsed = time.monotonic() - (hanger.hung_at or 0.0)
    finally:
        estimator.network.shutdown()
    assert 6 <= elapsed < 6 + 10, elapsed
    # Rank 1 hangs in the op. Rank 0 answers the step (before its update, where it then waits for rank 1 in the
    # all-reduce), so the step stream names rank 1 alone: the replica to look at (both were named, rank 0 first).
    assert info.value.rank == 1 and "also ranks" not in str(info.value) and "raise step_timeout_s" in str(info.value)
    assert not estimator.network.started


# ------------------------------------------------------------------------------------------- user-op error
class PoisonError(Exception):
    """Raised by a user's op on one replica."""


class Poison(Trace):
    """Puts a poison value into the last sample of training batch ``step`` (it lands on the last replica)."""

    checkpointed = False

    def __init__(self, step: int) -> None:
        super().__init__(mode="train")
        self.step = step

    def on_batch_begin(self, data: Any) -> None:
        if self.system.global_step == self.step:
            data["x"][-1, 0, 0, 0] = 999.0


def fail_on_poison(x: Any) -> Any:
    if (x.detach().numpy() == 999.0).any():
        raise PoisonError("poisoned sample in my slice")
    return x


@pytest.mark.timeout(120)
def test_user_op_error_reaches_driver_and_stops_cleanly(ray_session: None, tmp_path: Path) -> None:
    estimator, _ = build_run(first_op=fail_on_poison, num_replicas=2, max_failures=2, checkpoint_dir=str(tmp_path))
    network = estimator.network
    estimator.traces.extend([RestoreWizard(str(tmp_path), steps=2), Poison(step=5)])
    network.start()
    pids = [info["pid"] for info in network.replica_info()]
    try:
        with pytest.raises(PoisonError, match="poisoned sample in my slice") as info:
            estimator.fit()
    finally:
        network.shutdown()
    err = info.value
    assert err.replica_rank == 1
    assert "fail_on_poison" in err.remote_traceback and "PoisonError" in err.remote_traceback
    assert "Remote traceback (rank 1)" in str(err.__cause__)
    assert network.recoveries == 0  # user errors are never retried, even with max_failures
    assert not network.started
    wait_for(lambda: not any(pid_alive(pid) for pid in pids), 20, "the replicas to be killed")


# ------------------------------------------------------------------------------------------- NaN on one replica
@pytest.mark.timeout(120)
def test_nan_loss_on_one_replica_is_reported_and_reduced_nan_aware(ray_session: None,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    def make(**kwargs: Any) -> Any:
        model = linear("torch", lr=0.05)
        return fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                           UpdateOp(model=model, loss_name="mse")], **kwargs)

    rng = np.random.default_rng(0)
    batch = {"x": rng.normal(size=(7, 3)).astype(np.float32), "y": rng.normal(size=(7, 1)).astype(np.float32)}
    batch["y"][-1, 0] = np.nan  # slices 3 / 2 / 2: only rank 2 sees the NaN
    network = make(num_replicas=3)
    try:
        with caplog.at_level(logging.WARNING, logger="fe_ray.distributed.coordinator"):
            out = network.transform(batch, mode="eval")
        per_replica = dict(network.replica_outputs["mse"])
    finally:
        network.shutdown()
    assert np.isnan(per_replica[2]) and np.isfinite(per_replica[0]) and np.isfinite(per_replica[1])
    expected = (3 * per_replica[0] + 2 * per_replica[1]) / 5
    np.testing.assert_allclose(out["mse"], expected, rtol=1e-6)
    # That is the in-process loss of the finite samples.
    local = make()
    finite = {key: value[:5] for key, value in batch.items()}
    np.testing.assert_allclose(out["mse"], local.transform(finite, mode="eval")["mse"], rtol=1e-5)
    assert any("'mse' is not finite on replica rank(s) [2]" in record.getMessage() for record in caplog.records)


# ------------------------------------------------------------------------------------------- checkpoint writer
@contextlib.contextmanager
def rank0_writing(tmp_path: Path, seconds: float = 3600.0) -> Iterator[SimpleNamespace]:
    """A 2-replica run trained for one epoch (its RestoreWizard committed ckpt-000001) whose rank 0 is writing a
    second checkpoint: it wrote the model files and blocks for ``seconds`` while pickling objects.pkl. Yields
    ``network``, ``ckpt``, ``first`` (the committed URL), ``payload`` (the snapshot without the slow object) and
    ``marker`` (the file holding the writer's pid); the network is shut down on exit."""
    ckpt = str(tmp_path / "ckpt")
    estimator, _ = build_run(traces=[RestoreWizard(ckpt)], num_replicas=2)
    estimator.system.total_epochs = 1
    network = estimator.network
    try:
        estimator.fit()
        first = CheckpointStore(ckpt, keep=None).latest()
        assert first is not None and first.endswith("ckpt-000001")
        payload = estimator.system.capture_state(models=False)
        marker = tmp_path / "writer.pid"
        network.save_checkpoint_async(ckpt, {**payload, "zz_slow": SlowToPickle(os.getpid(), str(marker), seconds)})
        wait_for(marker.exists, 60, "rank 0 to start writing")
        yield SimpleNamespace(network=network, ckpt=ckpt, first=first, payload=payload, marker=marker,
                              estimator=estimator)
    finally:
        network.shutdown()


@pytest.mark.timeout(150)
def test_rank0_sigkill_mid_checkpoint_write_keeps_previous_checkpoint(ray_session: None, tmp_path: Path) -> None:
    with rank0_writing(tmp_path) as run:
        network, ckpt, first = run.network, run.ckpt, run.first
        writer = int(run.marker.read_text())
        assert writer == network.replica_info()[0]["pid"]
        wait_for(lambda: bool(staging_dirs(ckpt)), 10, "the partial checkpoint")
        os.kill(writer, signal.SIGKILL)
        with pytest.raises(CheckpointWriterError, match="died before committing it") as info:
            network.flush_checkpoints()
        assert info.value.latest == first and str(first) in str(info.value)
        assert isinstance(info.value.__cause__, ReplicaDiedError)
        # The partial write is on disk but never offered for a restore.
        store = CheckpointStore(ckpt, keep=None)
        assert staging_dirs(ckpt) and store.committed() == [first] and store.latest() == first
        read_checkpoint(first)
        # Fresh replicas take over on the next save (from the driver's models, synced at the end of fit).
        network.save_checkpoint_async(ckpt, run.payload)
        assert network.flush_checkpoints().endswith("ckpt-000002")
        assert writer not in [info["pid"] for info in network.replica_info()]
    assert not staging_dirs(ckpt)  # the leftovers were deleted by that save
    assert not pid_alive(writer)


@pytest.mark.timeout(150)
def test_peer_death_lets_rank0_commit_the_checkpoint_it_is_writing(ray_session: None, tmp_path: Path) -> None:
    with rank0_writing(tmp_path, seconds=3.0) as run:  # rank 1 dies while the 3 s write is in flight
        network = run.network
        os.kill(network.replica_info()[1]["pid"], signal.SIGKILL)
        batch = {key: value[:10] for key, value in run.estimator.pipeline.data["train"][""].items()}
        with pytest.raises(ReplicaDiedError), network(mode="train", epoch=2, ds_id="", desired_output_keys=None,
                                                     warmup=False, eager=False):
            network.run_step(batch)
        assert not network.started
        # The group was stopped only after rank 0 had committed the write in flight: recovery may resume from it.
        latest = CheckpointStore(run.ckpt, keep=None).latest()
        assert latest is not None and latest.endswith("ckpt-000002") and not staging_dirs(run.ckpt)
        assert read_checkpoint(latest)["system"] == run.payload["system"]


@pytest.mark.timeout(150)
def test_failed_background_write_on_replicas_is_raised_and_replicas_keep_running(ray_session: None, tmp_path: Path,
                                                                                  monkeypatch: Any) -> None:
    # The driver's check when the run starts would report the directory first (tests/io/test_resume.py); off here,
    # so that rank 0's write itself fails, as it does when the directory goes bad during the run.
    monkeypatch.setattr(CheckpointStore, "check_writable", lambda self: None)
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    estimator, model = build_run(traces=[RestoreWizard(str(blocker / "ckpt"), steps=3)], num_replicas=2)
    network = estimator.network
    try:
        # Rank 0's write of step 3 fails in the background; the save of step 6 raises its error, original type.
        with pytest.raises(NotADirectoryError, match=r"Could not write checkpoint .*not_a_dir/ckpt/ckpt-000001: Not "
                                                     r"a directory.*choose another checkpoint directory") as info:
            estimator.fit()
        assert estimator.system.global_step == 6
        assert getattr(info.value, "replica_rank", None) == 0
        # Not a replica failure: the replicas still run, with the state of step 6.
        assert network.started and network.failures == 0
        network.sync_models_to_driver()
        reference, reference_model = build_run()  # the same 6 steps (one epoch) in process
        reference.system.total_epochs = 1
        reference.fit()
        for mine, theirs in zip(weights_of(model), weights_of(reference_model), strict=True):
            np.testing.assert_allclose(mine, theirs, atol=1e-5, rtol=0)
    finally:
        network.shutdown()


# ------------------------------------------------------------------------------------------- driver SIGKILL
DRIVER = textwrap.dedent("""
    import json, os, sys, time
    import ray
    ray.init(address=sys.argv[1], log_to_driver=False)
    from tests.reliability.helpers import RestoreWizard, SlowToPickle, build_run
    ckpt, marker, info_file = sys.argv[2:5]
    estimator, _ = build_run(traces=[RestoreWizard(ckpt)], num_replicas=2)
    estimator.system.total_epochs = 1
    estimator.fit()                       # ckpt-000001, committed synchronously
    network = estimator.network
    pids = [info["pid"] for info in network.replica_info()]
    payload = estimator.system.capture_state(models=False)
    network.save_checkpoint_async(ckpt, {**payload, "zz_slow": SlowToPickle(os.getpid(), marker)})
    with open(info_file + ".tmp", "w") as f:
        json.dump({"replicas": pids, "job": ray.get_runtime_context().get_job_id()}, f)
    os.replace(info_file + ".tmp", info_file)
    time.sleep(3600)
""")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_driver_sigkill_mid_checkpoint_write_leaves_no_orphans_and_resumes(ray_session: None, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture) -> None:
    import ray

    ckpt, marker, info_file = str(tmp_path / "ckpt"), tmp_path / "writer.pid", tmp_path / "driver.json"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    address = ray.get_runtime_context().gcs_address
    driver = subprocess.Popen([sys.executable, str(script), address, ckpt, str(marker), str(info_file)], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: info_file.exists() and marker.exists() or driver.poll() is not None, 120,
                 "the driver to start a background checkpoint write")
        assert driver.poll() is None, driver.stderr.read().decode()[-3000:] if driver.stderr else ""
        info = json.loads(info_file.read_text())
        actor_pids = info["replicas"]
        assert int(marker.read_text()) == actor_pids[0]  # rank 0 writes the checkpoint
        assert all(pid_alive(pid) for pid in actor_pids)
        driver.send_signal(signal.SIGKILL)  # mid-write: no finalizer, no atexit hook runs
        driver.wait(10)
    finally:
        if driver.poll() is None:
            driver.kill()
    # fe_ray could not clean up (the driver is gone): Ray's owner-death semantics reap the job's actors.
    wait_for(lambda: not any(pid_alive(pid) for pid in actor_pids), 60, "Ray to reap the dead driver's actors")
    actors = [a for a in ray._private.state.actors().values() if a.get("JobID") == info["job"]]
    assert {a["State"] for a in actors} == {"DEAD"}, actors
    # (Ray's compiled step graph adds a helper actor of its own, CompiledDAG.DAGDriverProxyActor: dead too.)
    ours = sorted(a["ActorClassName"] for a in actors if not a["ActorClassName"].startswith("CompiledDAG."))
    assert ours == ["Replica", "Replica"], actors
    # The interrupted write left a partial checkpoint that is never picked up.
    store = CheckpointStore(ckpt, keep=None)
    assert staging_dirs(ckpt) and [Path(url).name for url in store.committed()] == ["ckpt-000001"]
    # The next run resumes from ckpt-000001 (epoch 1 done) and ends like an uninterrupted run.
    resumed, model = build_run(traces=[RestoreWizard(ckpt)], num_replicas=2)
    try:
        resumed.fit()
    finally:
        resumed.network.shutdown()
    restored = [line for line in capsys.readouterr().out.splitlines() if "Restored from" in line]
    assert len(restored) == 1 and "ckpt-000001 (epoch 1, step 6)" in restored[0], restored
    assert_same_weights(model)
    assert not staging_dirs(ckpt)


# ------------------------------------------------------------------------------------------- disk full / unusable
class Snapshot(Trace):
    """Copies the model's full state (weights + optimizer) at training step ``step`` (before RestoreWizard runs)."""

    checkpointed = False

    def __init__(self, model: Any, step: int) -> None:
        super().__init__(mode="train")
        self.model, self.step = model, step
        self.state: Any = None

    def on_batch_end(self, data: Any) -> None:
        if self.system.global_step == self.step:
            self.state = get_backend(self.model).get_state(self.model)


@pytest.mark.timeout(60)
def test_disk_full_during_checkpoint_is_clear_and_loses_nothing(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from fsspec.implementations.local import LocalFileOpener

    ckpt = str(tmp_path / "ckpt")
    original = LocalFileOpener.write
    writes = {"objects": 0}

    def write(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        # Inject at the lowest level fe_ray writes through (a file object's write), whatever fsspec call got there.
        if str(self.path).endswith("objects.pkl"):
            writes["objects"] += 1
            if writes["objects"] == 2:  # the second checkpoint: its model files are written, then the disk is full
                raise OSError(errno.ENOSPC, "No space left on device", self.path)
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(LocalFileOpener, "write", write)
    estimator, model = build_run()
    snapshot = Snapshot(model, step=6)
    estimator.traces.extend([snapshot, RestoreWizard(ckpt, steps=3)])
    with pytest.raises(OSError, match="Could not write checkpoint .*ckpt-000002: No space left on device") as info:
        estimator.fit()
    assert info.value.errno == errno.ENOSPC
    assert "ckpt-000001 is intact" in str(info.value) and "Free disk space" in str(info.value)
    assert_same_state(get_backend(model).get_state(model), snapshot.state)  # memory untouched by the failed save
    store = CheckpointStore(ckpt, keep=None)
    assert [Path(url).name for url in store.committed()] == ["ckpt-000001"] and not staging_dirs(ckpt)
    assert read_checkpoint(store.latest())["system"]["global_step"] == 3


@pytest.mark.parametrize("background, failed_at", [(False, 3), (True, 6)], ids=["synchronous", "background"])
def test_checkpoint_directory_under_a_file_is_a_clear_error(tmp_path: Path, background: bool, failed_at: int,
                                                            monkeypatch: Any) -> None:
    # A synchronous save raises at once; a background write's error is raised by the next save (step 6). The check
    # when the run starts, which reports such a directory before any step (tests/io/test_resume.py), is off here:
    # this is the directory going bad during the run.
    monkeypatch.setattr(CheckpointStore, "check_writable", lambda self: None)
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    estimator, model = build_run(traces=[RestoreWizard(str(blocker / "ckpt"), steps=3, background=background)])
    before = weights_of(model)
    with pytest.raises(NotADirectoryError, match=r"Could not write checkpoint .*not_a_dir/ckpt/ckpt-000001: Not a "
                                                 r"directory.*choose another checkpoint directory"):
        estimator.fit()
    assert estimator.system.global_step == failed_at
    assert any(not np.array_equal(a, b) for a, b in zip(weights_of(model), before))  # trained, and kept in memory
