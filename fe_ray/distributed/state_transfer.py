"""Moving model, optimizer, op and random state between the driver's reference copy and the replicas.

The driver's models do not train; rank 0's copy is the exact state of the run. These functions copy it to the
driver (:func:`pull_rank0`), push the driver's to every replica (:func:`push_to_replicas`), give every replica
rank 0's running statistics (:func:`share_buffers`), and restore or seed the replicas' generators
(:func:`start_rng`). :class:`~fe_ray.distributed.coordinator.RayNetwork` calls them
with its live :class:`~fe_ray.distributed.supervisor.ReplicaGroup`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.backend.determinism import last_seed
from fe_ray.distributed.replica_calls import writable

logger = logging.getLogger(__name__)


def pull_rank0(group: Any, models: Sequence[Any], framework: str, timeout_s: float) -> dict[str, Any]:
    """Copy rank 0's exact model and optimizer states into ``models``; return its op states (``{"ops": ...}``)."""
    group.settle_steps(timeout_s)  # a peer's failed update would otherwise leave rank 0 blocked in its all-reduce
    state = group.call_one(0, "get_state", timeout_s=timeout_s, what="sending its state")
    backend = get_backend(framework)
    for model in models:
        # Copied from the object store's read-only views straight into the driver's own tensors (warm memory)
        # where the layouts match, as they do from the second sync on: no fresh copy of the whole state.
        backend.set_state(model, state["models"][model.model_name], copy=True)
    return writable(state["network"])


def push_to_replicas(group: Any, models: Sequence[Any], framework: str, op_states: Mapping[str, Any] | None,
                     timeout_s: float) -> None:
    """Load ``models``' states (weights and optimizers) and ``op_states`` (None: the replicas keep theirs) into every
    replica."""
    import ray

    backend = get_backend(framework)
    # Views, not copies: ray.put copies them into the object store before anything can change them.
    state = {"models": {model.model_name: backend.get_state(model, copy=False) for model in models},
             "network": None if op_states is None else dict(op_states)}
    group.call("set_state", args=(ray.put(state),), timeout_s=timeout_s, what="loading state")


def share_buffers(group: Any, models: Sequence[Any], framework: str, timeout_s: float) -> None:
    """Give every replica the running statistics ``models`` hold (rank 0's, after :func:`pull_rank0`).

    Each replica updates its BatchNorm statistics from its own slices; gradients are all-reduced, these are not.
    Checkpoints keep rank 0's, so a resumed run would otherwise evaluate other ranks' slices with rank 0's statistics
    where the uninterrupted run used their own, and the two would score differently. RayNetwork calls this at the end
    of each training epoch, so every replica evaluates with the statistics the checkpoint and the driver hold.
    """
    backend = get_backend(framework)
    buffers = {model.model_name: backend.get_buffers(model) for model in models}
    if not any(len(value) for value in buffers.values()):
        return  # nothing outside gradients (no BatchNorm): no round trip
    group.call("set_buffers", args=(buffers,), timeout_s=timeout_s, what="loading rank 0's running statistics")


def start_rng(group: Any, states: Sequence[Any] | None, timeout_s: float) -> None:
    """Give fresh replicas their random state: a checkpoint's ``states`` (one per rank), else distinct seeds per
    rank derived from ``fe.enable_deterministic``'s seed, so random ops differ across slices but repeat across runs.
    States saved by another number of replicas are dropped with a warning (fresh seeds)."""
    num_replicas = group.num_replicas
    if states is not None and len(states) == num_replicas:
        group.call("set_rng", per_rank_args=[(state,) for state in states], timeout_s=timeout_s,
                   what="restoring random state")
        return
    if states is not None:
        logger.warning("fe_ray: the checkpoint holds the random state of %d replica(s), this run has %d; replicas "
                       "are seeded afresh.", len(states), num_replicas)
    base = last_seed()
    if base is None:
        base = int.from_bytes(os.urandom(4), "little")
    seeds = [((base + 1) * 1_000_003 + rank) % 2**63 for rank in range(num_replicas)]
    group.call("seed_rng", per_rank_args=[(seed,) for seed in seeds], timeout_s=timeout_s, what="seeding")


__all__ = ["pull_rank0", "push_to_replicas", "share_buffers", "start_rng"]
