"""Waiting on a replica group's remote results with deadlines, and turning their failures into fe_ray errors.

Every wait on a remote result goes through :meth:`GroupWaits.wait`, which polls with ``ray.wait`` and a deadline,
and inspects results as soon as *any* replica answers. That matters for collectives: when one replica dies or raises
before an all-reduce, its peers block inside the all-reduce, so waiting for all of them would hang until the
collective's own timeout. Instead the first failure is raised at once (as the original exception type for user
errors, :class:`ReplicaDiedError` for a dead process, :class:`ReplicaTimeoutError` past the deadline); a peer's
collective error caused by another replica's death is reported as that death, the root cause.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from fe_ray.distributed.errors import (
    CollectiveError,
    RemoteFailure,
    ReplicaDiedError,
    ReplicaError,
    ReplicaTimeoutError,
    describe,
)

#: How often a blocked wait wakes up; only bounds how late a timeout is noticed, deaths wake it immediately.
_POLL_S = 1.0
#: After a collective failure, how long to wait for a peer's death to be reported (it is the better error).
_PEER_GRACE_S = 5.0


class GroupWaits:
    """The waits and failure reports of :class:`~fe_ray.distributed.supervisor.ReplicaGroup`, which sets the
    attributes below; any failure seen marks the group not ``alive`` (a group with a failed member is never reused).
    """

    actors: list[Any]
    infos: list[dict[str, Any]]
    alive: bool

    def wait(self, refs: Sequence[Any], timeout_s: float, what: str, ranks: Sequence[int] | None = None) -> list[Any]:
        """Results of ``refs`` (one per rank, or per ``ranks``), raising the first failure as soon as it is seen.

        Raises:
            ReplicaDiedError: A replica's process died.
            ReplicaTimeoutError: Not all replicas answered within ``timeout_s``.
            Exception: The original exception type of an error raised inside a replica (chained to a
                :class:`ReplicaError` carrying the remote traceback), or :class:`ReplicaError`.
        """
        ranks = list(ranks) if ranks is not None else list(range(len(refs)))
        pending = {ref: rank for ref, rank in zip(refs, ranks)}
        results: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout_error(sorted(pending.values()), what, timeout_s)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(remaining, _POLL_S))
            for ref in ready:
                rank = pending.pop(ref)
                try:
                    results[rank] = self._unwrap(ref, rank, what)
                except BaseException as err:
                    if looks_like_lost_peer(err):
                        self._raise_if_peer_died(pending, what, err)
                    raise
        return [results[rank] for rank in ranks]

    def _raise_if_any_died(self, what: str, failure: BaseException) -> None:
        """Raise ReplicaDiedError for the first replica that no longer answers a ping (a dead process)."""
        probes = {actor.ping.remote(): rank for rank, actor in enumerate(self.actors)}
        ready, _ = ray.wait(list(probes), num_returns=len(probes), timeout=_PEER_GRACE_S)
        for ref in sorted(ready, key=probes.__getitem__):
            try:
                ray.get(ref, timeout=0)
            except ray.exceptions.RayActorError as err:
                raise self._died_error(probes[ref], what, err) from failure

    def _raise_if_peer_died(self, pending: Mapping[Any, int], what: str, failure: BaseException) -> None:
        """A replica's collective failed: if a peer died, report that death (the root cause) instead."""
        if not pending:
            return
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=_PEER_GRACE_S)
        for ref in ready:
            try:
                self._unwrap(ref, pending[ref], what)
            except ReplicaDiedError as died:
                raise died from failure
            except BaseException:  # noqa: BLE001 - another symptom of the same failure
                continue

    def _unwrap(self, ref: Any, rank: int, what: str) -> Any:
        node, pid = describe(self.infos[rank] if rank < len(self.infos) else None, rank)
        try:
            value = ray.get(ref, timeout=0)
        except ray.exceptions.RayActorError as err:
            raise self._died_error(rank, what, err) from None
        except ray.exceptions.RayError as err:
            self.alive = False
            raise ReplicaError(rank, node, pid, type(err).__name__, f"Ray failed while {what}: {err}") from None
        if isinstance(value, RemoteFailure):
            self.alive = False
            raise value.to_exception()
        return value

    def _died_error(self, rank: int, what: str, err: BaseException) -> ReplicaDiedError:
        self.alive = False
        node, pid = describe(self.infos[rank] if rank < len(self.infos) else None, rank)
        if "No module named 'fe_ray" in str(err):
            # The replica's class comes by reference: its node must import fe_ray by itself (see actor_runtime_env).
            return ReplicaDiedError(rank, node, pid, "ModuleNotFoundError",
                                    f"the replica could not import fe_ray on its node while {what}. Nodes other than "
                                    "the driver's import it from the job's working_dir (`ray job submit "
                                    "--working-dir <fe_ray checkout>`) or from an fe_ray installed on every node (as "
                                    "cluster.yaml's setup_commands do).")
        return ReplicaDiedError(rank, node, pid, "ActorDiedError",
                                f"the replica process died while {what} ({_first_line(err)}). If it ran out of "
                                "memory, lower the batch size or give replicas more memory via "
                                "resources_per_replica.")

    def _timeout_error(self, ranks: list[int], what: str, timeout_s: float) -> ReplicaTimeoutError:
        self.alive = False
        rank = ranks[0]
        node, pid = describe(self.infos[rank] if rank < len(self.infos) else None, rank)
        others = f" (also ranks {ranks[1:]})" if len(ranks) > 1 else ""
        return ReplicaTimeoutError(rank, node, pid, "Timeout",
                                   f"no answer while {what} within {timeout_s:g}s{others}. A replica is hung (e.g. "
                                   "an op that never returns, or a peer stuck in a collective); raise step_timeout_s "
                                   "if steps are legitimately this slow.")


def looks_like_lost_peer(err: BaseException) -> bool:
    """Whether a replica's error is a collective failing because a peer went away (not a user error)."""
    if isinstance(err, CollectiveError):
        return True
    text = f"{type(err).__name__}: {err}".lower()
    return any(marker in text for marker in ("distbackenderror", "gloo", "nccl", "connection closed by peer",
                                             "connection reset"))


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


__all__ = ["GroupWaits", "looks_like_lost_peer"]
