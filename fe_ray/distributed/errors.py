"""Exceptions of the distributed layer, and how a replica's failure travels to the driver.

A replica never lets an exception escape into Ray: :func:`capture_failure` turns it into a :class:`RemoteFailure`
(plain data: the exception pickled when possible, its type name, message and formatted remote traceback, plus the
replica's rank, node and pid). The driver calls :meth:`RemoteFailure.to_exception`, which rebuilds an exception of
the *original* type (so ``except KeyError`` around ``Estimator.fit`` keeps working) and chains it to a
:class:`ReplicaError` whose message holds the remote traceback; every such exception also gets the attributes
``replica_rank``, ``replica_node``, ``replica_pid`` and ``remote_traceback``. Types that cannot be rebuilt on the
driver fall back to a :class:`ReplicaError`.

The exception travels through Ray's cloudpickle, the one that shipped the user's ops to the replica: an exception
class of the driver's script (``__main__``, a notebook) goes there by value under an id that cloudpickle keeps, and
coming back under that id it is the driver's own class again, so ``except MyError`` catches it. An exception whose
constructor cannot take its own ``args`` (``__init__(self, code, detail)`` calling ``super().__init__(text)``) is
rebuilt without calling ``__init__``: its ``args`` and attributes are restored as they were.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any


class DistributedError(RuntimeError):
    """Base class of fe_ray's distributed-training errors."""


class ReplicaError(DistributedError):
    """An exception raised inside a replica, with where it happened and the remote traceback.

    Args:
        rank: The replica's rank.
        node_ip: The IP of the node the replica ran on.
        pid: The replica's process id.
        cause_type: Qualified name of the original exception type.
        message: The original exception's message.
        remote_traceback: The formatted traceback from the replica.
    """

    def __init__(self, rank: int, node_ip: str, pid: int, cause_type: str, message: str,
                 remote_traceback: str = "") -> None:
        self.rank = rank
        self.node_ip = node_ip
        self.pid = pid
        self.cause_type = cause_type
        self.message = message
        self.remote_traceback = remote_traceback
        super().__init__(rank, node_ip, pid, cause_type, message, remote_traceback)

    def __str__(self) -> str:
        text = f"replica rank {self.rank} (node {self.node_ip}, pid {self.pid}): {self.cause_type}: {self.message}"
        if self.remote_traceback:
            text += f"\n\nRemote traceback (rank {self.rank}):\n{self.remote_traceback.rstrip()}"
        return text


class ReplicaDiedError(ReplicaError):
    """A replica's process died (killed, out of memory, node lost) while the driver was waiting on it."""


class ReplicaTimeoutError(ReplicaError):
    """A replica did not answer within the configured timeout (hung op, dead peer in a collective, ...)."""


class PlacementError(DistributedError):
    """The cluster cannot host the requested replicas (names the resources asked for and those available)."""


class CollectiveError(DistributedError):
    """A collective operation (all-reduce, rendezvous) failed or timed out."""


class SourceMismatchError(DistributedError):
    """A replica imported other fe_ray code than the driver runs (e.g. another checkout in the driver's working
    directory, which Ray puts first on every worker's import path)."""


@dataclass
class RemoteFailure:
    """A replica-side exception in transport form (plain picklable data).

    Attributes:
        rank: The replica's rank.
        node_ip: The replica's node IP.
        pid: The replica's process id.
        cause_type: Qualified name of the exception type.
        message: ``str(exception)``.
        remote_traceback: The formatted traceback.
        pickled: The exception pickled with cloudpickle, or None if it could not be pickled.
    """

    rank: int
    node_ip: str
    pid: int
    cause_type: str
    message: str
    remote_traceback: str
    pickled: bytes | None = None

    def replica_error(self) -> ReplicaError:
        """The failure as a :class:`ReplicaError` (message and remote traceback included)."""
        return ReplicaError(self.rank, self.node_ip, self.pid, self.cause_type, self.message, self.remote_traceback)

    def to_exception(self) -> BaseException:
        """Rebuild the original exception (type and args) chained to a :class:`ReplicaError`, or that error alone.

        The rebuilt exception carries ``replica_rank``, ``replica_node``, ``replica_pid`` and ``remote_traceback``
        attributes and a note naming the replica, and its ``__cause__`` prints the remote traceback.
        """
        error = self.replica_error()
        original: BaseException | None = None
        if self.pickled is not None:
            try:
                from ray import cloudpickle

                original = cloudpickle.loads(self.pickled)
            except Exception:  # noqa: BLE001 - the type may not exist on the driver; fall back below
                original = None
        if not isinstance(original, BaseException):
            return error
        original.__cause__ = error
        original.__traceback__ = None
        for name, value in (("replica_rank", self.rank), ("replica_node", self.node_ip), ("replica_pid", self.pid),
                            ("remote_traceback", self.remote_traceback)):
            try:
                setattr(original, name, value)
            except AttributeError:  # exceptions with __slots__
                pass
        if hasattr(original, "add_note"):
            original.add_note(f"(raised on replica rank {self.rank}, node {self.node_ip}, pid {self.pid}; the remote "
                              "traceback is shown above)")
        return original


def capture_failure(exc: BaseException, rank: int, node_ip: str, pid: int) -> RemoteFailure:
    """Turn an exception caught in a replica into a :class:`RemoteFailure`."""
    cause_type = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
    remote_traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = _message(exc)
    # Ray's cloudpickle, not the standalone one: it shipped the ops here, so a class of the driver's script that
    # came by value goes back under the id the driver knows it by (see the module docstring).
    from ray import cloudpickle

    # Drop the traceback and chained causes: they hold frames (unpicklable) and are already in the text.
    clone = _strip(exc)
    pickled: bytes | None = None
    for payload in (lambda: cloudpickle.dumps(clone), lambda: cloudpickle.dumps(_WithoutInit(clone))):
        try:
            candidate = payload()
            # Some exceptions pickle but cannot be rebuilt (a constructor that does not take its own args).
            rebuilt = cloudpickle.loads(candidate)
        except Exception:  # noqa: BLE001 - try the next form, else fall back to a ReplicaError on the driver
            continue
        if type(rebuilt) is type(exc) and _message(rebuilt) == message:
            pickled = candidate
            break
    return RemoteFailure(rank, node_ip, pid, cause_type, message, remote_traceback, pickled)


class _WithoutInit:
    """Pickles an exception as its class, ``args`` and attributes, rebuilt without calling its ``__init__``.

    ``BaseException`` pickles as ``cls(*args)``, which fails for a constructor whose parameters differ from the
    ``args`` it passes on to ``super().__init__``.
    """

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_without_init, (type(self.exc), self.exc.args, dict(getattr(self.exc, "__dict__", {})))


def _rebuild_without_init(cls: type[BaseException], args: tuple[Any, ...],
                          attributes: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(attributes)
    return exc


def _strip(exc: BaseException) -> BaseException:
    exc.__traceback__ = None
    exc.__cause__ = None
    exc.__context__ = None
    return exc


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return str(exc.args[0])  # KeyError's str() adds quotes around the message
    return str(exc)


def describe(info: dict[str, Any] | None, rank: int) -> tuple[str, int]:
    """(node_ip, pid) of a replica from its cached :meth:`Replica.info`, with placeholders when unknown."""
    if not info:
        return "unknown", -1
    return str(info.get("node_ip", "unknown")), int(info.get("pid", -1))


def is_replica_failure(error: BaseException) -> bool:
    """Whether ``error`` (or its cause) is a failure of the replicas rather than of the user's code."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, (ReplicaDiedError, ReplicaTimeoutError, CollectiveError)):
            return True
        error = error.__cause__  # type: ignore[assignment]
        seen += 1
    return False


__all__ = ["CollectiveError", "DistributedError", "PlacementError", "RemoteFailure", "ReplicaDiedError",
           "ReplicaError", "ReplicaTimeoutError", "capture_failure", "describe", "is_replica_failure"]
