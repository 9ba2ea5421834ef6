"""How a replica's methods answer the driver: as data, on the replica's step thread, with owned arrays.

A replica must never raise out of a method: Ray would report an exception in a method like any other, but the
driver tells a user's error (a bad op, a failed write) from a dead or stuck replica by what comes back.
:func:`guarded` turns every exception into a :class:`~fe_ray.distributed.errors.RemoteFailure` that carries the
original type, the remote traceback and this replica's rank, node and pid.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from fe_ray.distributed.errors import capture_failure

F = TypeVar("F", bound=Callable[..., Any])

#: Guarded methods that still run on a replica whose step failed after answering (see ``Replica._finish_step``).
ALWAYS_RUN = frozenset({"shutdown", "info"})


def guarded(method: F) -> F:
    """Return a RemoteFailure instead of raising, tagged with this replica's rank, node and pid; with a step
    stream, run the method on the replica's one worker thread (see
    :class:`~fe_ray.distributed.step_stream.StepServer`).

    The replica provides ``_server`` (its StepServer or None), ``_broken`` (the failure of a step's update that
    failed after its answer, or None), ``rank`` and ``node_ip``.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        server = self._server
        if server is not None and not server.on_thread():
            return server.run(functools.partial(wrapper, self, *args, **kwargs))
        if self._broken is not None and method.__name__ not in ALWAYS_RUN:
            return self._broken  # a step's update failed after its answer: this replica's state is not usable
        try:
            return method(self, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - everything must reach the driver as data
            return failure_of(self, exc)

    return wrapper  # type: ignore[return-value]


def failure_of(replica: Any, exc: BaseException) -> Any:
    """``exc`` as a RemoteFailure of ``replica`` (its rank and node, this process's pid)."""
    return capture_failure(exc, replica.rank, replica.node_ip, os.getpid())


def writable(data: Any) -> Any:
    """``data`` with read-only numpy arrays (zero-copy object-store views) replaced by owned copies."""
    if isinstance(data, np.ndarray):
        return data if data.flags.writeable else np.array(data)
    if isinstance(data, Mapping):
        return {key: writable(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(writable(value) for value in data)
    return data


__all__ = ["ALWAYS_RUN", "failure_of", "guarded", "writable"]
