"""fe_ray's distributed error types survive pickling, keep the remote traceback, and are classified (no Ray)."""

from __future__ import annotations

import pickle
import threading
import weakref

import pytest

from fe_ray.distributed.errors import (
    CollectiveError,
    ReplicaDiedError,
    ReplicaError,
    ReplicaTimeoutError,
    capture_failure,
    is_replica_failure,
)


class NeedsTwoArgs(Exception):
    """An exception whose constructor cannot be called with its own args: it cannot be rebuilt on the driver."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}+{b}")


class HoldsALock(Exception):
    """An exception that cannot be pickled in any form (a lock among its attributes)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


def raise_in_op() -> None:
    raise KeyError("missing 'x'")


@pytest.mark.parametrize("cls", [ReplicaError, ReplicaDiedError, ReplicaTimeoutError])
def test_replica_errors_survive_pickling(cls: type[ReplicaError]) -> None:
    error = cls(1, "10.0.0.2", 4242, "ValueError", "bad value", "Traceback ...\nValueError: bad value\n")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and (copy.rank, copy.node_ip, copy.pid) == (1, "10.0.0.2", 4242)
    assert str(copy) == str(error) and "Remote traceback (rank 1)" in str(copy)


def test_captured_failure_rebuilds_the_original_type_with_the_remote_traceback() -> None:
    try:
        raise_in_op()
    except KeyError as exc:
        failure = capture_failure(exc, rank=1, node_ip="10.0.0.2", pid=7)
    rebuilt = pickle.loads(pickle.dumps(failure)).to_exception()
    assert type(rebuilt) is KeyError and rebuilt.args == ("missing 'x'",)
    assert rebuilt.replica_rank == 1 and "raise_in_op" in rebuilt.remote_traceback
    assert isinstance(rebuilt.__cause__, ReplicaError) and "raise_in_op" in str(rebuilt.__cause__)


def test_an_exception_whose_constructor_differs_from_its_args_keeps_its_type() -> None:
    # Pickling calls NeedsTwoArgs("1+2"), a TypeError: it is rebuilt without its __init__ (before: a ReplicaError,
    # which `except NeedsTwoArgs` around fit() did not catch).
    try:
        raise NeedsTwoArgs(1, 2)
    except NeedsTwoArgs as exc:
        exc.code = 7
        failure = capture_failure(exc, rank=0, node_ip="10.0.0.1", pid=3)
    error = pickle.loads(pickle.dumps(failure)).to_exception()
    assert type(error) is NeedsTwoArgs and error.args == ("1+2",) and str(error) == "1+2" and error.code == 7
    assert error.replica_rank == 0 and isinstance(error.__cause__, ReplicaError)


def test_an_exception_that_cannot_be_pickled_becomes_a_replica_error() -> None:
    try:
        raise HoldsALock("stuck")
    except HoldsALock as exc:
        failure = capture_failure(exc, rank=0, node_ip="10.0.0.1", pid=3)
    error = failure.to_exception()
    assert type(error) is ReplicaError and error.cause_type.endswith("HoldsALock") and error.message == "stuck"


def test_an_exception_class_of_the_drivers_script_comes_back_as_that_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class defined in the user's script (here: inside a function, which cloudpickle also sends by value)
    reaches the replica by value with the ops; the failure must rebuild the driver's class, not a look-alike copy
    that ``except ScriptError`` misses and that does not pickle."""
    from ray import cloudpickle
    from ray.cloudpickle import cloudpickle as ray_tracker

    standalone_tracker = pytest.importorskip("cloudpickle.cloudpickle")

    class ScriptError(Exception):
        pass

    shipped = cloudpickle.dumps(ScriptError)  # the driver ships the ops (ScriptError among their globals)

    # The replica: another process, so both cloudpickles' registries of by-value classes start empty there.
    with monkeypatch.context() as replica:
        for tracker in (ray_tracker, standalone_tracker):
            replica.setattr(tracker, "_DYNAMIC_CLASS_TRACKER_BY_CLASS", weakref.WeakKeyDictionary())
            replica.setattr(tracker, "_DYNAMIC_CLASS_TRACKER_BY_ID", weakref.WeakValueDictionary())
        replica_class = cloudpickle.loads(shipped)
        assert replica_class is not ScriptError
        try:
            raise replica_class("boom on rank 1")
        except replica_class as exc:
            failure = capture_failure(exc, rank=1, node_ip="10.0.0.2", pid=9)
        payload = pickle.dumps(failure)

    error = pickle.loads(payload).to_exception()  # back on the driver
    assert type(error) is ScriptError and str(error) == "boom on rank 1" and error.replica_rank == 1


def test_replica_failures_are_told_from_user_errors() -> None:
    died = ReplicaDiedError(1, "n", 2, "ActorDiedError", "died")
    assert is_replica_failure(died) and is_replica_failure(CollectiveError("all-reduce timed out"))
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = ReplicaTimeoutError(0, "n", 1, "GetTimeoutError", "no answer")
    assert is_replica_failure(wrapped)  # found through the cause chain
    user = ValueError("bad label")
    user.__cause__ = ReplicaError(0, "n", 1, "ValueError", "bad label")  # a user-op error: never retried
    assert not is_replica_failure(user)
