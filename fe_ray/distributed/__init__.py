"""Data-parallel fe_ray on Ray actors: ``fe.Network(ops, num_replicas=N)`` returns a :class:`RayNetwork`.

Modules, one concern each: :mod:`.errors` (exceptions that carry remote tracebacks), :mod:`.cluster` (Ray
connection, placement groups, the one place replica actors are created), :mod:`.serialization` (shipping ops and
models), :mod:`.collective` (all-reduce and gradient reducers), :mod:`.replica` (the worker), :mod:`.supervisor`
(the replica group), :mod:`.group_waits` (its timeouts and failure detection), :mod:`.coordinator` (the
driver-side RayNetwork) and :mod:`.checkpointing` (background checkpoints, written by replica rank 0).

Ray is imported only by the modules that talk to it (cluster, supervisor, group_waits, coordinator), and only when
they are first used: ``errors``, ``collective``, ``serialization``, ``checkpointing`` and ``replica`` work without
Ray.
"""

from __future__ import annotations

from fe_ray.distributed.checkpointing import CheckpointWriterError
from fe_ray.distributed.errors import (
    CollectiveError,
    DistributedError,
    PlacementError,
    ReplicaDiedError,
    ReplicaError,
    ReplicaTimeoutError,
    SourceMismatchError,
)
from fe_ray.util.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, {"RayNetwork": "fe_ray.distributed.coordinator:RayNetwork"})


__all__ = ["CheckpointWriterError", "CollectiveError", "DistributedError", "PlacementError", "RayNetwork",
           "ReplicaDiedError", "ReplicaError", "ReplicaTimeoutError", "SourceMismatchError"]
