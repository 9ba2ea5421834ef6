"""fe_ray's distributed error types survive pickling, keep the remote traceback, and are classified (no Ray)."""

from __future__ import annotations

import pickle

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


def test_an_exception_that_cannot_be_rebuilt_becomes_a_replica_error() -> None:
    try:
        raise NeedsTwoArgs(1, 2)
    except NeedsTwoArgs as exc:
        failure = capture_failure(exc, rank=0, node_ip="10.0.0.1", pid=3)
    error = failure.to_exception()
    assert type(error) is ReplicaError and error.cause_type.endswith("NeedsTwoArgs") and error.message == "1+2"


def test_replica_failures_are_told_from_user_errors() -> None:
    died = ReplicaDiedError(1, "n", 2, "ActorDiedError", "died")
    assert is_replica_failure(died) and is_replica_failure(CollectiveError("all-reduce timed out"))
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = ReplicaTimeoutError(0, "n", 1, "GetTimeoutError", "no answer")
    assert is_replica_failure(wrapped)  # found through the cause chain
    user = ValueError("bad label")
    user.__cause__ = ReplicaError(0, "n", 1, "ValueError", "bad label")  # a user-op error: never retried
    assert not is_replica_failure(user)
