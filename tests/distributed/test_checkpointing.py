"""Background checkpoints written by replica rank 0 (fe_ray.distributed.checkpointing), without Ray: a plain
Replica object stands in for the actor and a small fake group for the supervisor."""

from __future__ import annotations

import copy
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fe_ray.distributed.checkpointing import CheckpointWriterError, ReplicaCheckpoints
from fe_ray.distributed.errors import RemoteFailure, ReplicaDiedError
from fe_ray.distributed.replica import Replica
from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.io.state_files import read_checkpoint
from fe_ray.op.tensorop.model import UpdateOp
from tests.estimator_helpers import digits_arrays
from tests.helpers.replicas import configured_replica
from tests.helpers.state import assert_same_state


class LocalGroup:
    """What ReplicaCheckpoints needs of a ReplicaGroup: ``call_one`` on rank 0, failures raised as the driver does."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.dead = False
        self.calls: list[str] = []

    def settle_steps(self, timeout_s: float) -> None:
        assert timeout_s > 0  # one replica, its steps run in the test's thread: always settled

    def call_one(self, rank: int, method: str, args: tuple[Any, ...] = (), timeout_s: float = 0.0,
                 what: str = "") -> Any:
        assert rank == 0 and timeout_s > 0
        self.calls.append(method)
        if self.dead:
            raise ReplicaDiedError(0, "127.0.0.1", 1, "ActorDiedError", f"the replica process died while {what}")
        result = getattr(self.replica, method)(*args)
        if isinstance(result, RemoteFailure):
            raise result.to_exception()
        return result


def trained_replica() -> tuple[Replica, dict[str, np.ndarray]]:
    """A configured one-rank torch replica after two training steps, and a batch."""
    replica = configured_replica()
    train, _ = digits_arrays(n_train=16, n_eval=0)
    for _ in range(2):
        assert not isinstance(replica.run_step(train, 16, 16), RemoteFailure)
    return replica, train


PAYLOAD = {"system": {"global_step": 2}, "config": {"models": ["mlp"]}, "network": {"ops": []}, "rng": {}}


def test_rank0_commits_its_own_models_with_the_drivers_payload(tmp_path: Path) -> None:
    replica, batch = trained_replica()
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    expected = copy.deepcopy(replica.get_state()["models"])  # get_state gives views of the live tensors
    ops = copy.deepcopy(replica.network.state_dict()["ops"])
    checkpoints.save(group, str(tmp_path), PAYLOAD, keep=2, info={"global_step": 2}, timeout_s=60)
    assert checkpoints.pending
    # Training goes on right away: the snapshot is rank 0's own copy, later steps do not reach the checkpoint.
    replica.run_step(batch, 16, 16)
    url = checkpoints.finish(group, timeout_s=60)
    assert not checkpoints.pending and url == checkpoints.last_committed == CheckpointStore(str(tmp_path)).latest()
    saved = read_checkpoint(url)
    assert saved["system"] == PAYLOAD["system"] and saved["network"] == {**PAYLOAD["network"], "ops": ops}
    assert_same_state(saved["models"], expected)
    assert CheckpointStore(str(tmp_path)).manifest(url)["info"] == {"global_step": 2}
    assert replica._saver is None  # finishing frees the writer thread and its copy of the state
    assert checkpoints.finish(group, timeout_s=60) == url and group.calls.count("finish_checkpoint") == 1


class MergeTwo(UpdateOp):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(merge_grad=2, **kwargs)


def test_rank0_commits_its_live_op_states_not_the_drivers_copies(tmp_path: Path) -> None:
    """Mid-epoch the driver's op states are those of its last sync; rank 0's ops hold the live ones. Here the
    merge_grad accumulator after 3 steps (the third step's gradient held) goes into the checkpoint, not the stale
    copy in the driver's payload, and a step after the save does not reach it."""
    replica = configured_replica(MergeTwo)
    train, _ = digits_arrays(n_train=16, n_eval=0)
    for _ in range(3):
        assert not isinstance(replica.run_step(train, 16, 16), RemoteFailure)
    stale = {"type": "UpdateOp", "state": {"step": 0, "grad_sum": []}}
    payload = {**PAYLOAD, "network": {"ops": [{"type": "ModelOp", "state": {}}, {"type": "CrossEntropy", "state": {}},
                                              stale], "slicers": [], "pops": []}}
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    checkpoints.save(group, str(tmp_path), payload, keep=2, info=None, timeout_s=60)
    assert not isinstance(replica.run_step(train, 16, 16), RemoteFailure)  # applies and zeroes the sums
    saved = read_checkpoint(checkpoints.finish(group, timeout_s=60))
    assert saved["network"]["slicers"] == [] and saved["network"]["pops"] == []
    accumulator = saved["network"]["ops"][2]["state"]
    assert accumulator["step"] == 3 and any(np.any(total) for total in accumulator["grad_sum"])


def test_a_failed_write_is_raised_at_the_next_save_with_its_type(tmp_path: Path) -> None:
    replica, _ = trained_replica()
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    root = str(blocker / "ckpt")
    checkpoints.save(group, root, PAYLOAD, keep=2, info=None, timeout_s=60)  # the snapshot is taken; the write fails
    deadline = time.monotonic() + 30
    while replica._saver.busy and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(NotADirectoryError, match="Could not write checkpoint .*ckpt-000001") as info:
        checkpoints.save(group, root, PAYLOAD, keep=2, info=None, timeout_s=60)
    assert info.value.replica_rank == 0 and "Remote traceback" in str(info.value.__cause__)
    assert not checkpoints.pending  # that save took no snapshot: nothing to wait for
    # The replica is unharmed: the next save to a usable directory commits.
    checkpoints.save(group, str(tmp_path / "ok"), PAYLOAD, keep=2, info=None, timeout_s=60)
    assert checkpoints.finish(group, timeout_s=60).endswith("ckpt-000001")


def test_finish_raises_the_write_error_once(tmp_path: Path) -> None:
    replica, _ = trained_replica()
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    checkpoints.save(group, str(blocker / "ckpt"), PAYLOAD, keep=2, info=None, timeout_s=60)
    with pytest.raises(NotADirectoryError):
        checkpoints.finish(group, timeout_s=60)
    assert checkpoints.finish(group, timeout_s=60) is None  # reported once; nothing was ever committed


def test_rank0_death_mid_write_names_the_latest_committed_checkpoint(tmp_path: Path) -> None:
    replica, _ = trained_replica()
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    checkpoints.save(group, str(tmp_path), PAYLOAD, keep=2, info=None, timeout_s=60)
    first = checkpoints.finish(group, timeout_s=60)
    checkpoints.save(group, str(tmp_path), PAYLOAD, keep=2, info=None, timeout_s=60)
    group.dead = True
    with pytest.raises(CheckpointWriterError, match="died before committing it.*latest committed checkpoint is "
                                                    ".*ckpt-000001") as info:
        checkpoints.finish(group, timeout_s=60)
    assert info.value.latest == first and info.value.root == str(tmp_path)
    assert isinstance(info.value.__cause__, ReplicaDiedError)
    clone = pickle.loads(pickle.dumps(info.value))
    assert (str(clone), clone.root, clone.latest) == (str(info.value), info.value.root, info.value.latest)
    assert not checkpoints.pending
    replica.finish_checkpoint()  # (the write itself went on: let it end before tmp_path goes)


def test_rank0_death_after_committing_its_write_loses_nothing(tmp_path: Path) -> None:
    """Rank 0 died once its write was committed (the driver sees the death only at the next call): the checkpoint
    is there and restorable, so finish returns it (before: CheckpointWriterError "died before committing it ...
    will never be restored", naming that very checkpoint as the latest committed one)."""
    replica, _ = trained_replica()
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    first_info = {"epoch_idx": 1, "mode": "train", "batch_idx": 2, "global_step": 2}
    checkpoints.save(group, str(tmp_path), PAYLOAD, keep=None, info=first_info, timeout_s=60)
    first = replica._saver.wait()  # committed; then rank 0 dies
    group.dead = True
    assert checkpoints.finish(group, timeout_s=60) == first == checkpoints.last_committed
    # A write that did not commit (its manifest missing) is still reported as lost.
    group.dead = False
    checkpoints.save(group, str(tmp_path), PAYLOAD, keep=None, info={**first_info, "global_step": 4}, timeout_s=60)
    second = replica._saver.wait()
    (Path(second.removeprefix("file://")) / "MANIFEST.json").unlink()
    group.dead = True
    with pytest.raises(CheckpointWriterError, match="ckpt-000001"):
        checkpoints.finish(group, timeout_s=60)
    replica.finish_checkpoint()


def test_a_snapshot_that_does_not_fit_is_raised_with_its_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fe_ray.io import snapshot

    replica, _ = trained_replica()
    group, checkpoints = LocalGroup(replica), ReplicaCheckpoints()
    monkeypatch.setattr(snapshot, "available_memory", lambda: 1000)  # far less than the model's state
    # RestoreWizard catches this type and saves synchronously from then on.
    with pytest.raises(snapshot.SnapshotTooLargeError, match="needs .* GiB of new buffers") as info:
        checkpoints.save(group, str(tmp_path), PAYLOAD, keep=2, info=None, timeout_s=60)
    assert info.value.replica_rank == 0 and not checkpoints.pending
    assert CheckpointStore(str(tmp_path)).latest() is None
