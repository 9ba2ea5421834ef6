"""The replica group's lifecycle on the driver: starting the replicas, stopping them, replacing them after failures.

:class:`ReplicaLifecycle` is the part of :class:`~fe_ray.distributed.coordinator.RayNetwork` that owns the
:class:`~fe_ray.distributed.supervisor.ReplicaGroup`: it starts the group on first use from the driver's models,
hands it to the network's calls through :meth:`ReplicaLifecycle._replicas` (which tears a failed group down), stops it
(finishing a checkpoint rank 0 is writing first), and decides whether a failed run may resume
(:meth:`ReplicaLifecycle.recover`). What the network does with the replicas (contexts, steps, state transfers) stays
in the coordinator; the attributes below are the coordinator's configuration and state that the lifecycle reads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fe_ray.backend.determinism import last_seed
from fe_ray.distributed import cluster
from fe_ray.distributed.checkpointing import ReplicaCheckpoints
from fe_ray.distributed.recovery import check_recoverable, may_recover
from fe_ray.distributed.serialization import check_picklable
from fe_ray.distributed.state_transfer import start_rng
from fe_ray.distributed.supervisor import EXIT_GRACE_S, GroupHolder, ReplicaGroup
from fe_ray.io.checkpoint import CheckpointStore
from fe_ray.schedule import get_current_items

# The coordinator's logger: these messages are the network's, wherever its code lives.
logger = logging.getLogger("fe_ray.distributed.coordinator")


class ReplicaLifecycle:
    """Start, stop and replace a network's replicas; a base of :class:`~fe_ray.distributed.coordinator.RayNetwork`,
    which sets the attributes annotated here in its ``__init__`` and provides ``load_models_from_driver``."""

    num_replicas: int
    target_type: str
    models: Any
    resources_per_replica: Mapping[str, float] | None
    max_failures: int
    step_timeout_s: float
    checkpoint_dir: str | None
    placement_timeout_s: float
    wait_for_nodes: bool
    collective_timeout_s: float
    runtime_env: dict[str, Any] | None
    placement_strategy: str
    collective_backend: str | None
    step_transport: str
    failures: int
    recoveries: int
    _ops_list: list[Any]
    _holder: GroupHolder
    _checkpoints: ReplicaCheckpoints
    _control_timeout_s: float
    _checkpoint_timeout_s: float
    _prefetched: Any
    _pending_exit: list[Any]
    _pending_rng: list[Any] | None
    load_models_from_driver: Callable[[], None]
    _trainable_layout: Callable[[], list[tuple[int, ...]]]
    _trainable_at_start: list[tuple[int, ...]] | None

    @property
    def started(self) -> bool:
        """Whether the replicas are running (in the driver's current Ray connection: a ``ray.shutdown()`` ends them)."""
        group = self._holder.group
        return group is not None and group.alive and group.of_this_session()

    def start(self) -> None:
        """Start the replicas now (otherwise they start on first use) from the driver's current models.

        Raises:
            PlacementError: If the cluster cannot host the replicas.
        """
        if self.started:
            return
        self._stop_replicas()
        cluster.ensure_ray()
        bundle = self.resources_per_replica or cluster.default_bundle()
        if self.wait_for_nodes and self.resources_per_replica is None and "GPU" not in bundle:
            # The default looks at the nodes that are up now; GPU nodes an autoscaler would add are not among them.
            logger.warning("fe_ray: wait_for_nodes=True with the default resources_per_replica: the cluster has no GPU "
                           "now, so each replica asks for %s. Pass resources_per_replica={'GPU': 1} to wait for GPU "
                           "nodes instead.", bundle)
        payload = check_picklable(self._ops_list, self.models)
        group = ReplicaGroup(self.num_replicas, self.target_type, payload, bundle, self.placement_timeout_s,
                             setup_timeout_s=max(self.step_timeout_s, 120.0),
                             collective_timeout_s=self.collective_timeout_s, strategy=self.placement_strategy,
                             runtime_env=cluster.actor_runtime_env(self.runtime_env, more_nodes=self.wait_for_nodes),
                             collective_backend=self._backend_for(bundle), step_transport=self.step_transport,
                             deterministic=last_seed() is not None, wait_for_nodes=self.wait_for_nodes)
        self._holder.group = group
        group.start()
        self.load_models_from_driver()  # identical start on every replica, whatever pickling preserved
        self._trainable_at_start = self._trainable_layout()
        self._start_rng()

    def _start_rng(self) -> None:
        """Give fresh replicas their random state: a restored checkpoint's, else distinct seeds per rank derived
        from ``fe.enable_deterministic``'s seed (so random ops differ across slices but repeat across runs)."""
        states, self._pending_rng = self._pending_rng, None
        with self._replicas() as group:
            start_rng(group, states, self._control_timeout_s)

    def replica_rng_states(self) -> list[Any] | None:
        """Every replica's generator states, for checkpoints (None when no replicas run and none are pending)."""
        if not self.started:
            return self._pending_rng
        with self._replicas() as group:
            return group.call("get_rng", timeout_s=self._control_timeout_s, what="sending random state")

    def load_replica_rng_states(self, states: list[Any]) -> None:
        """Restore :meth:`replica_rng_states` now, or when the replicas start (a different count: fresh seeds)."""
        self._pending_rng = list(states)
        if self.started:
            self._start_rng()

    def _backend_for(self, bundle: Mapping[str, float]) -> str | None:
        if self.collective_backend == "nccl" and bundle.get("GPU", 0.0) < 1:
            # Found before any actor starts: NCCL itself would fail only at the rendezvous, seconds later.
            raise ValueError(f"collective_backend='nccl' needs a whole GPU per replica, but each replica gets "
                             f"{dict(bundle)}. Pass resources_per_replica={{'GPU': 1}} on a cluster with GPUs, or "
                             "collective_backend='gloo' (None, the default, picks from the replicas' resources).")
        if self.collective_backend is not None or self.target_type != "torch":
            return self.collective_backend
        gpus = bundle.get("GPU", 0.0)
        return "gloo" if 0 < gpus < 1 else None  # fractional GPUs: ranks may share a device, which NCCL refuses

    def shutdown(self) -> None:
        """Stop the replicas and release their resources (the driver's models keep the last synced state); a
        background checkpoint write in flight is finished first. Idle replicas exit their processes normally, so
        their exit handlers run; busy or failed ones are killed."""
        self._stop_replicas()

    def _stop_replicas(self, grace_s: float = EXIT_GRACE_S) -> None:
        self._prefetched = None
        self._pending_exit = []  # the stopped group's answers: the next context's replicas owe none
        group = self._holder.group
        if group is not None and self._checkpoints.pending:
            # Rank 0 is writing a checkpoint (also when a peer failed: recovery resumes from that checkpoint).
            try:
                self._checkpoints.finish(group, self._checkpoint_timeout_s)
            except Exception as err:  # noqa: BLE001 - stopping anyway; the store never offers an uncommitted write
                logger.warning("fe_ray: the checkpoint being written when the replicas stopped was not committed: "
                               "%s", err)
        self._holder.stop(grace_s)

    close = shutdown

    def restart(self) -> None:
        """Replace the replicas with fresh ones initialised from the driver's models (e.g. after a failure)."""
        self._stop_replicas()
        self.start()

    def _group(self) -> ReplicaGroup:
        # Called every step: the Ray connection is checked once per context (on entering it) and by start().
        group = self._holder.group
        if group is None or not group.alive:
            self.start()
            group = self._holder.group
        assert group is not None
        return group

    @contextlib.contextmanager
    def _replicas(self, keep_if_alive: bool = False) -> Iterator[ReplicaGroup]:
        """The running group (started if needed) for calls whose failure tears it down (see :meth:`_failed`).

        With ``keep_if_alive`` only a failure of the replicas themselves does (the group marks itself dead): an error
        they report as data, such as a failed checkpoint write, leaves the healthy replicas running. An interrupt of
        the driver (Ctrl-C, ``SystemExit``) is not theirs: see :meth:`_interrupted`.
        """
        group = self._group()  # a group that fails to start has stopped itself already
        try:
            yield group
        except BaseException as err:
            if not isinstance(err, Exception):
                self._interrupted(err)
            elif not (keep_if_alive and group.alive):
                self._failed(err)
            raise

    def _interrupted(self, err: BaseException) -> None:
        """The driver was interrupted while calling the replicas (KeyboardInterrupt, SystemExit). That is no failure
        of theirs (nothing is counted, recovery is not asked for), but the call's answers are still owed, so the
        group is not reused: its replicas finish what they were doing and exit normally (their exit hooks run),
        those still busy after :data:`EXIT_GRACE_S` (a peer stuck in a collective) are killed."""
        logger.warning("fe_ray: interrupted (%s) while the replicas were working; stopping them.", type(err).__name__)
        self._stop_replicas()

    def _failed(self, err: BaseException) -> None:
        """Tear a group with a failed member down; the next use starts fresh replicas from the driver's models."""
        self.failures += 1
        logger.error("fe_ray: replica failure #%d (%s); stopping all replicas.", self.failures, type(err).__name__)
        # Killed at once (a replica may be stuck in a collective), after rank 0's checkpoint write in flight, which
        # recovery may resume from.
        self._stop_replicas(grace_s=0.0)

    def recover(self, error: BaseException, system: Any = None) -> bool:
        """Decide whether a failed run may resume, and prepare it: the Estimator calls this when fit() fails.

        Recovery needs what :func:`~fe_ray.distributed.recovery.may_recover` asks (a failure of the replicas
        themselves, fewer recoveries so far than ``max_failures``, a RestoreWizard writing to ``checkpoint_dir``)
        and a committed checkpoint there. The failed replicas are already gone; fresh ones start on next use from
        the driver's models, which the RestoreWizard sets from the latest checkpoint when the Estimator re-runs its
        loop.

        Args:
            error: The exception that stopped the run.
            system: The Estimator's System (used to find the RestoreWizard).

        Returns:
            True if the Estimator should restore the latest checkpoint and continue.
        """
        # The traces this run executes, as fit()'s check_traces saw them: the user's list and the Estimator's own
        # (``system.traces`` is a copy of the list the Estimator was given, without traces appended to it later).
        traces = None if system is None else get_current_items(
            getattr(system, "traces_in_use", None) or getattr(system, "traces", None) or [])
        if not may_recover(error, self.max_failures, self.recoveries, self.checkpoint_dir, traces):
            return False
        self._stop_replicas()  # a checkpoint rank 0 is still writing counts: it is finished first
        latest = CheckpointStore(self.checkpoint_dir, keep=None).latest()
        if latest is None:
            logger.error("fe_ray: cannot recover: no committed checkpoint in %r yet.", self.checkpoint_dir)
            return False
        self.recoveries += 1
        logger.warning("fe_ray: replica failure (%s); recovery %d/%d from %s with fresh replicas.",
                       type(error).__name__, self.recoveries, self.max_failures, latest)
        return True

    def check_traces(self, traces: Iterable[Any]) -> None:
        """Called by the Estimator before fit: refuse ``max_failures`` without a RestoreWizard writing to
        ``checkpoint_dir`` (:func:`~fe_ray.distributed.recovery.check_recoverable`)."""
        check_recoverable(self.max_failures, self.checkpoint_dir, traces)


__all__ = ["ReplicaLifecycle"]
