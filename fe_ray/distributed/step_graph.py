"""Steps through a Ray Compiled Graph (``step_transport="compiled"``): no Ray task per step.

An ordinary actor call costs about a millisecond of Ray bookkeeping (task submission, scheduling, result object)
on top of the work. A compiled graph sets the call path up once: the driver writes each step's slices into one
shared-memory channel per replica, every replica runs ``Replica.step`` on a background thread of its actor as
soon as its slice arrives, and the results come back through channels too (measured here: 0.13 ms instead of
1.7 ms for one replica, 0.4 ms instead of 1.9 ms for two).

The price, and why it is not the default: Ray's channel readers busy-wait. An idle replica between steps, and
the driver while the replicas compute, each keep a CPU core busy (measured: one full core per idle replica).
With spare cores (a GPU node whose replicas use one core each) that costs nothing; when the replicas' CPU share
is the whole machine it slows training down (benchmarks/RESULTS.md has both measurements).

What changes against actor calls, and how fe_ray keeps its guarantees:

* The driver reads the replicas' results in rank order, so it cannot see rank 1's error while rank 0 is still
  waiting for rank 1 inside the all-reduce. A replica whose step fails therefore tells its peers
  (``Replica.abort_collective``, an actor call served by their idle main thread), whose all-reduce then fails
  at once; the group reports the failure that is not a symptom of a lost peer. (NCCL's abort of a kernel that
  waits on the GPU has not been tested here.)
* Values read from a channel are views of its buffer, and a channel cannot be written again while a view is
  alive: both sides copy what they keep (the replica its slice, the driver the outputs).
* Only step calls use the graph; configuring, state transfers and pings stay actor calls on the actor's main
  thread (the coordinator never overlaps them with a step).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray

logger = logging.getLogger(__name__)

#: Ray's logger for compiled graphs; its teardown of a graph whose actors were killed logs tracebacks we expect.
_RAY_CGRAPH_LOGGER = "ray.dag.compiled_dag_node"


class StepGraph:
    """``actor.step(args)`` on every actor as one compiled graph: :meth:`run` writes one argument per rank.

    Args:
        actors: The replica actors, in rank order.
        timeout_s: Longest compiling and the warm-up call may take; also the longest :meth:`run` may wait to
            write a step's inputs (replicas read them as soon as they start a step, so that only expires when a
            replica is stuck).
    """

    def __init__(self, actors: Sequence[Any], timeout_s: float) -> None:
        from ray.dag import InputNode, MultiOutputNode

        with InputNode() as inputs:
            # One InputAttributeNode per rank: Ray gives each its own channel, so a replica reads only its slice.
            outputs = [actor.step.bind(inputs[rank]) for rank, actor in enumerate(actors)]
            dag = MultiOutputNode(outputs)
        self._graph = dag.experimental_compile(_submit_timeout=timeout_s)
        self.num_replicas = len(actors)
        try:
            # A no-op step: returns once every replica's graph thread runs (and has done its own imports).
            self.run([None] * self.num_replicas, timeout_s)
        except BaseException:
            self.close()
            raise

    @classmethod
    def try_compile(cls, actors: Sequence[Any], timeout_s: float) -> StepGraph | None:
        """A compiled graph over ``actors``, or None (with a warning) when this Ray cannot compile one."""
        try:
            return cls(actors, timeout_s)
        except Exception as err:  # noqa: BLE001 - any compile failure leaves the (slower) actor calls, which work
            logger.warning("fe_ray: Ray could not compile the step graph (%s: %s); steps use actor calls.",
                           type(err).__name__, err)
            return None

    def run(self, per_rank_args: Sequence[Any], timeout_s: float,
            overlap: Callable[[], None] | None = None) -> list[Any]:
        """Run one step: ``per_rank_args[rank]`` goes to ``actors[rank].step``; returns every rank's result.
        ``overlap`` is called while the replicas compute.

        Raises:
            ray.exceptions.RayChannelTimeoutError: No complete result within ``timeout_s``.
            ray.exceptions.RayError: A replica died, or the graph was torn down.
        """
        assert len(per_rank_args) == self.num_replicas, "one argument per replica"
        refs = self._graph.execute(*per_rank_args)
        if overlap is not None:
            overlap()
        deadline = time.monotonic() + timeout_s  # counted from here: the overlap's work is the driver's, not theirs
        results = []
        for ref in refs:
            # Results are read in rank order whatever the order they complete in (see the module docstring).
            results.append(ray.get(ref, timeout=max(deadline - time.monotonic(), 0.0)))
        return results

    def close(self) -> None:
        """Tear the graph down. Kill its actors first: an actor stuck in a step blocks teardown for 30 s."""
        with _quiet(_RAY_CGRAPH_LOGGER, logging.CRITICAL):
            try:
                self._graph.teardown()
            except Exception as err:  # noqa: BLE001 - the actors are gone or going either way
                logger.debug("fe_ray: step graph teardown: %s", err)


@contextlib.contextmanager
def _quiet(name: str, level: int) -> Iterator[None]:
    target = logging.getLogger(name)
    previous = target.level
    target.setLevel(max(level, previous))
    try:
        yield
    finally:
        target.setLevel(previous)


__all__ = ["StepGraph"]
