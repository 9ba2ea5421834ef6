"""The replica group: starting N replicas, calling them with timeouts, and stopping them.

Its waits and failure reports are :class:`~fe_ray.distributed.group_waits.GroupWaits`: the first failure of any
replica is raised at once, and the owner tears the whole group down (a group with a failed member is never reused).
"""

from __future__ import annotations

import atexit
import gc
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray

from fe_ray.distributed import cluster
from fe_ray.distributed.errors import PlacementError, RemoteFailure, ReplicaError, describe
from fe_ray.distributed.group_waits import GroupWaits, looks_like_lost_peer
from fe_ray.distributed.replica import Replica
from fe_ray.distributed.replica_calls import writable
from fe_ray.distributed.step_graph import StepGraph
from fe_ray.distributed.step_stream import StepStream

logger = logging.getLogger(__name__)

#: How long a healthy group's replicas get to exit normally when it stops (see :meth:`ReplicaGroup.stop`); Ray
#: Train's worker groups give theirs 5 s too.
EXIT_GRACE_S = 5.0
#: The groups this driver process holds resources for (weak: each is owned by its network's GroupHolder).
_HOLDING: weakref.WeakSet[ReplicaGroup] = weakref.WeakSet()


class ReplicaGroup(GroupWaits):
    """N :class:`~fe_ray.distributed.replica.Replica` actors in one placement group, joined by a collective.

    Args:
        num_replicas: Number of replicas.
        framework: "torch" or "tf".
        payload: The serialised ops (:func:`fe_ray.distributed.serialization.dumps_ops`).
        bundle: Resources per replica.
        placement_timeout_s: How long to wait for the placement group.
        setup_timeout_s: How long starting the actors, building the networks and the rendezvous may take.
        collective_timeout_s: Timeout of the collective (rendezvous and each all-reduce) inside the replicas.
        runtime_env: The actors' runtime environment.
        strategy: Placement strategy ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD").
        collective_backend: torch collective backend, or None for automatic.
        step_transport: How :meth:`run_steps` reaches the replicas: "stream" (a TCP stream per replica, see
            :mod:`fe_ray.distributed.step_stream`), "calls" (one actor call per replica) or "compiled" (a Ray
            Compiled Graph, see :mod:`fe_ray.distributed.step_graph`).
        deterministic: Replicas use deterministic kernels (the driver called ``fe.enable_deterministic``).
        wait_for_nodes: Wait for nodes to join when the cluster is too small (see :func:`cluster.reserve`).
    """

    def __init__(self, num_replicas: int, framework: str, payload: bytes, bundle: Mapping[str, float],
                 placement_timeout_s: float, setup_timeout_s: float, collective_timeout_s: float,
                 runtime_env: Mapping[str, Any] | None, strategy: str = "PACK",
                 collective_backend: str | None = None, step_transport: str = "stream",
                 deterministic: bool = False, wait_for_nodes: bool = False) -> None:
        self.num_replicas = num_replicas
        self.framework = framework
        self.session = cluster.ray_session()  # the Ray connection its actors belong to
        self.bundle = dict(bundle)
        self.actors: list[Any] = []
        self.infos: list[dict[str, Any]] = [{} for _ in range(num_replicas)]
        self._payload = payload
        self._placement_timeout_s = placement_timeout_s
        self._setup_timeout_s = setup_timeout_s
        self._deterministic = deterministic
        self._wait_for_nodes = wait_for_nodes
        self._collective_timeout_s = collective_timeout_s
        self._runtime_env = runtime_env
        self._strategy = strategy
        self._collective_backend = collective_backend
        self._placement: Any = None
        self._step_transport = step_transport
        #: The threaded transport steps go through (None: actor calls); both have run() and close().
        self._threaded: StepGraph | StepStream | None = None
        self._unsettled = False  # a step ran on the step stream since the last settle_steps
        self.alive = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Reserve resources, start the actors, build their networks and join the collective.

        Raises:
            PlacementError: If the resources cannot be reserved.
            ReplicaError: (or the original exception type) if a replica fails to set up.
            SourceMismatchError: If a replica imported other fe_ray sources than the driver's.
        """
        self._placement = self._reserve()
        _HOLDING.add(self)
        _register_exit_hook()
        try:
            for rank in range(self.num_replicas):
                args = (rank, self.num_replicas, self.framework, self._payload, self._collective_timeout_s,
                        self._collective_backend, self._step_transport)
                self.actors.append(cluster.start_actor(Replica, args, self._placement, rank, self.bundle,
                                                       self._runtime_env))
            self.infos = self.call("setup", args=(self._deterministic,), timeout_s=self._setup_timeout_s,
                                   what="setting up")
            cluster.check_same_source(self.infos)
            if self.num_replicas > 1:
                address = self.call_one(0, "collective_address", timeout_s=self._setup_timeout_s,
                                        what="opening the collective")
                self.call("init_collective", args=(address,), timeout_s=self._setup_timeout_s,
                          what="joining the collective")
                self.call("set_peers", args=(self.actors,), timeout_s=self._setup_timeout_s, what="meeting peers")
            if self._step_transport == "compiled":
                self.call("prepare_compiled_steps", timeout_s=self._setup_timeout_s,
                          what="preparing compiled steps")
                self._threaded = StepGraph.try_compile(self.actors, timeout_s=self._setup_timeout_s)
            elif self._step_transport == "stream":
                addresses = self.call("open_step_stream", args=(self._setup_timeout_s,),
                                      timeout_s=self._setup_timeout_s, what="opening step streams")
                try:
                    self._threaded = StepStream(addresses, self._setup_timeout_s,
                                                is_failure=lambda value: isinstance(value, RemoteFailure))
                except OSError as err:  # e.g. a driver outside the cluster (Ray Client) cannot reach the replicas
                    logger.warning("fe_ray: the driver cannot connect to the replicas' step streams (%s); steps use "
                                   "actor calls.", err)
            self.alive = True
        except BaseException:
            self.stop()
            raise
        logger.info("fe_ray: started %d %s replicas: %s", self.num_replicas, self.framework,
                    [(i.get("rank"), i.get("node_ip"), i.get("pid"), i.get("device")) for i in self.infos])

    def _reserve(self) -> Any:
        """Reserve the placement group, first releasing the replicas of networks nobody references any more.

        An Estimator, its System and its Network refer to each other, so a network the user dropped (a finished run
        in a sweep, a rebound notebook variable) is freed only by the cyclic garbage collector, whose finalizer
        then stops its replicas. Until that runs, the old replicas keep their CPUs/GPUs and the new group would
        wait out its placement timeout, so collect now when this process holds any group.
        """
        if _HOLDING:
            gc.collect()
        try:
            return cluster.reserve(self.num_replicas, self.bundle, self._placement_timeout_s, self._strategy,
                                   wait_for_nodes=self._wait_for_nodes)
        except PlacementError as err:
            others = [group for group in _HOLDING if group is not self]
            if not others:
                raise
            held = ", ".join(f"{group.num_replicas} x {group.bundle}" for group in others)
            raise PlacementError(f"{err} This process still holds replicas of {len(others)} other fe_ray "
                                 f"network(s) ({held}): call shutdown() on a network you are done with (its models "
                                 f"keep the trained weights, and it restarts its replicas if used again).") from None

    @property
    def transport(self) -> str:
        """How steps reach the replicas now: "calls", "stream" or "compiled" (a graph that failed to compile
        leaves "calls")."""
        if isinstance(self._threaded, StepGraph):
            return "compiled"
        return "stream" if isinstance(self._threaded, StepStream) else "calls"

    @property
    def sends_values(self) -> bool:
        """Whether a step's slices are sent by value (threaded transports), never as object-store references."""
        return self._threaded is not None

    def stop(self, grace_s: float = 0.0) -> None:
        """Stop every actor and release the placement group (safe to call repeatedly); see :func:`stop_groups`.

        Args:
            grace_s: If the group is alive (no member failed), how long its replicas may take to leave their
                context and collective and begin a normal process exit (:func:`cluster.exit_actors`: their
                ``atexit`` handlers run) before they are killed. A failed group is killed at once: its members may
                be stuck in a collective.
        """
        stop_groups([self], grace_s)

    def _prepare_exit(self) -> bool:
        """Whether the replicas may exit normally (no member failed); if so, first tear down a compiled graph."""
        if not self.alive:
            return False
        if isinstance(self._threaded, StepGraph):
            # The graph's loops end once the step in flight, if any (an interrupted driver's), is done; then actor
            # calls reach the replicas again.
            self._threaded.close()
            self._threaded = None
        return True

    def of_this_session(self) -> bool:
        """Whether its actors belong to the driver's current Ray connection: after a ``ray.shutdown()`` (and perhaps a
        new ``ray.init()``) they are gone, and calls to them would fail (or start a new Ray)."""
        return self.session is not None and cluster.ray_session() == self.session

    def _kill(self) -> None:
        """Kill every actor (also ending an exit that hangs; one that has begun finishes, see
        :func:`cluster.exit_actors`) and release the placement group."""
        threaded, self._threaded = self._threaded, None
        self.alive = False
        ended = self.session is None  # of an ended Ray connection: its actors and placement group are gone
        if isinstance(threaded, StepStream):
            threaded.close()  # the driver's sockets; the replicas go with the kills below
        for actor in [] if ended else self.actors:
            cluster.kill_actor(actor)
        if isinstance(threaded, StepGraph) and not ended:
            threaded.close()  # after the kills: a replica stuck in a step would block the graph's teardown
        self.actors = []
        if not ended:
            cluster.release(self._placement)
        self._placement = None
        _HOLDING.discard(self)

    # ------------------------------------------------------------------ calls
    def submit(self, method: str, per_rank_args: Sequence[tuple[Any, ...]] | None = None,
               args: tuple[Any, ...] = ()) -> list[Any]:
        """Call ``method`` on every replica without waiting; returns one ObjectRef per rank."""
        refs = []
        for rank, actor in enumerate(self.actors):
            call_args = per_rank_args[rank] if per_rank_args is not None else args
            refs.append(getattr(actor, method).remote(*call_args))
        return refs

    def call(self, method: str, per_rank_args: Sequence[tuple[Any, ...]] | None = None, args: tuple[Any, ...] = (),
             timeout_s: float = 300.0, what: str | None = None) -> list[Any]:
        """Call ``method`` on every replica and wait for all results (see :meth:`wait`)."""
        return self.wait(self.submit(method, per_rank_args, args), timeout_s, what or method)

    def call_one(self, rank: int, method: str, args: tuple[Any, ...] = (), timeout_s: float = 300.0,
                 what: str | None = None) -> Any:
        """Call ``method`` on one replica and wait for its result."""
        ref = getattr(self.actors[rank], method).remote(*args)
        return self.wait([ref], timeout_s, what or method, ranks=[rank])[0]

    def settle_steps(self, timeout_s: float) -> None:
        """Wait until every replica has ended its last step, weight update included, raising the first failure.

        A step stream answers a torch training step before its weight update, whose all-reduce joins every
        replica: when one replica's update fails, the others wait for it in that all-reduce (a gloo all-reduce
        cannot be woken) until the collective's timeout, and the failure reaches the driver only with the next call
        to the failed replica. Call this before a call to one replica (rank 0's state at an epoch's end, a
        checkpoint snapshot), so that such a failure is raised at once with its own type and traceback, not as rank
        0's collective timeout (twice ``step_timeout_s``) or a timeout of the call. Does nothing when no step ran
        on a step stream since the last call.
        """
        if not self._unsettled:
            return
        self.call("step_settled", timeout_s=timeout_s, what="finishing its last step's weight update")
        self._unsettled = False

    def run_steps(self, per_rank_args: Sequence[tuple[Any, ...]], timeout_s: float, what: str = "running a step",
                  overlap: Callable[[], None] | None = None) -> list[Any]:
        """``Replica.run_step(*per_rank_args[rank])`` on every replica; every rank's result, in rank order.

        Args:
            per_rank_args: The arguments of each rank's call.
            timeout_s: Longest the step may take.
            what: What the replicas are doing, for error messages.
            overlap: Called once the step was sent, while the replicas compute (e.g. to put the next slices).

        Raises:
            The same errors as :meth:`wait`, whichever transport the group uses.
        """
        if self._threaded is None:
            pending = self.submit("run_step", per_rank_args)
            if overlap is not None:
                overlap()
            return self.wait(pending, timeout_s, what)
        if isinstance(self._threaded, StepStream):
            self._unsettled = True  # its replicas may answer before their weight update (see settle_steps)
        try:
            values = self._threaded.run(per_rank_args, timeout_s, overlap)
        except TimeoutError as err:  # also Ray's RayChannelTimeoutError
            # The step stream knows which replicas did not answer (the others did); otherwise name them all.
            ranks = getattr(err, "ranks", None) or list(range(self.num_replicas))
            raise self._timeout_error(ranks, what, timeout_s) from None
        except (ray.exceptions.RayError, ConnectionError) as err:  # a graph's or a stream's peer is gone
            self.alive = False
            self._raise_if_any_died(what, err)
            rank = getattr(err, "rank", 0)
            raise ReplicaError(rank, *describe(self.infos[rank], rank), type(err).__name__,
                               f"{'Ray' if isinstance(err, ray.exceptions.RayError) else 'The step stream'} failed "
                               f"while {what}: {err}") from None
        failures = [value.to_exception() for value in values if isinstance(value, RemoteFailure)]
        if failures:
            self.alive = False
            # A replica that fails makes its peers' all-reduce fail too (abort_collective): report the cause.
            causes = [err for err in failures if not looks_like_lost_peer(err)]
            if not causes:
                self._raise_if_any_died(what, failures[0])
            raise (causes or failures)[0]
        if isinstance(self._threaded, StepStream):
            return values  # unpickled into buffers of their own: owned and writable already
        # Channel values are views of buffers that cannot be rewritten while referenced: keep owned copies.
        return [writable(value) for value in values]

class GroupHolder:
    """Owns the running group; the weakref finalizer (also run at exit) stops it without referencing the network."""

    def __init__(self) -> None:
        self.group: ReplicaGroup | None = None

    def stop(self, grace_s: float = EXIT_GRACE_S) -> None:
        """Stop the group (see :meth:`ReplicaGroup.stop`); a group with a failed member is killed whatever
        ``grace_s`` says."""
        group, self.group = self.group, None
        if group is not None:
            group.stop(grace_s)


def stop_groups(groups: Sequence[ReplicaGroup], grace_s: float = 0.0) -> None:
    """Stop replica groups together (safe to call repeatedly): the healthy groups' replicas are asked to exit
    normally and share one grace period of ``grace_s``, so a driver that exits holding several networks whose
    replicas are busy waits ``grace_s`` in all, not once per network; then every replica is killed (those still busy
    with a warning, the failed groups' at once) and the placement groups are released. Groups of an ended Ray
    connection are only forgotten: their actors went with it."""
    for group in groups:
        if not group.of_this_session():
            group.session = None  # _kill below then makes no Ray calls for it
    try:
        exiting = [actor for group in groups if grace_s > 0 and group.session is not None and group._prepare_exit()
                   for actor in group.actors]
        if exiting:
            try:
                late = cluster.exit_actors(exiting, grace_s)
            except Exception as err:  # noqa: BLE001 - they are killed below either way
                late = len(exiting)
                logger.debug("fe_ray: replicas' normal exit failed: %s", err)
            if late:
                logger.warning("fe_ray: %d of %d replicas had not begun to exit %g s after being asked to (still "
                               "busy); killing them.", late, len(exiting), grace_s)
    finally:  # also when a second Ctrl-C ends the wait
        for group in groups:
            group._kill()


def _stop_all_at_exit() -> None:
    """Let the replicas this process still holds exit normally before Ray's own exit hook kills its workers."""
    stop_groups(list(_HOLDING), EXIT_GRACE_S)


def _register_exit_hook() -> None:
    """Run :func:`_stop_all_at_exit` before Ray's exit hooks, which kill the workers (``ray.shutdown``, registered
    when Ray is imported, and the embedded Ray's cleanup, registered by ``ray.init``): exit hooks run last registered
    first, so register (again) once Ray has started."""
    atexit.unregister(_stop_all_at_exit)
    atexit.register(_stop_all_at_exit)


__all__ = ["EXIT_GRACE_S", "GroupHolder", "ReplicaGroup", "stop_groups"]
