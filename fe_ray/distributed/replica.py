"""The replica: one in-process fe_ray Network in its own (Ray actor) process.

:class:`Replica` is a plain class; :func:`fe_ray.distributed.cluster.start_actor` makes it remote. It rebuilds
the user's ops from the driver's payload, builds an ordinary :class:`~fe_ray.network.TorchNetwork` /
:class:`~fe_ray.network.TFNetwork` without pops or slicers (the driver runs those), joins the collective, and
installs the all-reduce ``grad_reducer``. Every public method returns its result, or a
:class:`~fe_ray.distributed.errors.RemoteFailure` describing an exception (see
:mod:`fe_ray.distributed.replica_calls`), so user errors reach the driver with their original type and the remote
traceback, and never look like a dead actor. Model / op snapshots, checkpoint writes and random states are the
methods of its base class :class:`~fe_ray.distributed.replica_state.ReplicaState`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fe_ray.distributed.lr_mirror import RateKey, set_rates
from fe_ray.distributed.replica_calls import failure_of, guarded, writable
from fe_ray.distributed.replica_info import node_ip, process_info
from fe_ray.distributed.replica_state import ReplicaState
from fe_ray.distributed.step_stream import StepReply, StepServer, early_answers


def yield_cores_at_exit() -> None:
    """An exit hook: a process without a GPU lowers its scheduling priority as far as it goes.

    A normal exit's interpreter teardown, which follows the exit hooks, takes about a second of CPU with TF loaded
    (half that with torch); it must not take cores from the replicas that start next on the node (a recovery, the
    next run of a sweep). A process with a GPU keeps its priority: the sooner it ends, the sooner the GPU's memory
    is free for the replica that may start there next.
    """
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):  # set by Ray for GPU bundles, "" by fe_ray for the others
        with contextlib.suppress(OSError, AttributeError):  # AttributeError: no setpriority on Windows
            os.setpriority(os.PRIO_PROCESS, 0, 19)


class Replica(ReplicaState):
    """One data-parallel worker.

    Args:
        rank: This replica's rank in ``[0, world_size)``.
        world_size: Number of replicas.
        framework: "torch" or "tf".
        payload: The ops serialised by :func:`fe_ray.distributed.serialization.dumps_ops`.
        collective_timeout_s: Timeout of the collective's rendezvous and of each all-reduce.
        collective_backend: torch only: "gloo" or "nccl"; None picks NCCL on CUDA and gloo on the CPU.
        step_transport: "stream": start the replica's worker thread now, before any framework work, and run every
            guarded method on it; otherwise methods run on the thread Ray calls them on.

    On the stream, a training step is answered as soon as its outputs are known (:meth:`step_early`): the backward
    pass and the weight update run while the answer travels, the driver merges it and sends the next batch, which
    is then waiting when the update ends. An error in that update makes every later call (the next step's
    included) return it, so it reaches the driver one call later with the remote traceback; the replica is not
    used again. ``FE_RAY_EARLY_ANSWER=0`` in the replicas' environment answers after the update instead.
    """

    def __init__(self, rank: int, world_size: int, framework: str, payload: bytes,
                 collective_timeout_s: float = 300.0, collective_backend: str | None = None,
                 step_transport: str = "calls") -> None:
        self.rank = rank
        self.world_size = world_size
        self.framework = framework
        self.node_ip = node_ip()
        self._payload: bytes | None = payload
        self._collective_timeout_s = collective_timeout_s
        self._collective_backend = collective_backend
        self.network: Any = None
        self.collective: Any = None
        self._weights: Any = None
        self._produced: set[str] = set()
        self._in_context = False
        self._peers: list[Any] = []
        self._saver: Any = None  # the checkpoint writer (rank 0; see fe_ray.distributed.checkpointing)
        self._stores: dict[tuple[str, int | None], Any] = {}
        self._server: Any = None
        self._broken: Any = None  # the RemoteFailure of a step's update that failed after its answer
        if step_transport == "stream":
            self._server = StepServer(self.step_early if early_answers() else self.step,
                                      failure=functools.partial(failure_of, self))
        atexit.unregister(yield_cores_at_exit)  # once per process
        atexit.register(yield_cores_at_exit)

    # ------------------------------------------------------------------ lifecycle
    @guarded
    def setup(self, deterministic: bool = False) -> dict[str, Any]:
        """Rebuild the ops, build the Network on this process's device, and return :meth:`info`.

        Args:
            deterministic: Use deterministic kernels (the driver called ``fe.enable_deterministic``). Switched on
                before the ops load, as CUDA reads cuBLAS' workspace setting when it initialises.
        """
        from fe_ray.distributed.reducers import StepWeights
        from fe_ray.distributed.serialization import loads_ops
        from fe_ray.network import TFNetwork, TorchNetwork

        assert self._payload is not None, "setup() runs once"
        if deterministic:
            from fe_ray.backend.determinism import use_deterministic_kernels

            use_deterministic_kernels()
        ops = loads_ops(self._payload)
        self._payload = None
        self.network = TorchNetwork(ops) if self.framework == "torch" else TFNetwork(ops)
        self._weights = StepWeights()
        return self._info()

    @guarded
    def collective_address(self) -> tuple[str, int]:
        """(rank 0) Create the collective and return the address the other ranks connect to."""
        self.collective = self._make_collective()
        return self.collective.listen(self.node_ip)

    @guarded
    def init_collective(self, address: tuple[str, int]) -> bool:
        """Join the collective at ``address`` and install the all-reduce grad_reducer on the network."""
        from fe_ray.distributed.reducers import make_grad_reducer

        if self.collective is None:
            self.collective = self._make_collective()
        self.collective.connect(tuple(address))
        if self.world_size > 1:  # one replica's slice-weighted mean is its own gradient: no reducer, no graph break
            self.network.grad_reducer = make_grad_reducer(self.framework, self.collective, self._weights)
        return True

    @guarded
    def set_peers(self, actors: list[Any]) -> bool:
        """Remember the other replicas' actor handles (to tell them when this replica's step fails)."""
        self._peers = [actor for rank, actor in enumerate(actors) if rank != self.rank]
        return True

    def abort_collective(self) -> bool:
        """(Called by a peer whose step failed) make this replica's pending and later all-reduces fail now.

        Runs on the actor's main thread while the step runs on a threaded transport's thread (with actor calls, the
        failed peer's death or the driver's teardown ends the wait instead).
        """
        if self.collective is not None:
            self.collective.abort()
        return True

    def _make_collective(self) -> Any:
        from fe_ray.distributed.collective import TcpCollective, TorchCollective

        if self.framework == "torch":
            device = getattr(self.network, "device", None)
            backend = self._collective_backend or (
                "nccl" if device is not None and str(device).startswith("cuda") else "gloo")
            return TorchCollective(self.rank, self.world_size, self._collective_timeout_s, backend=backend)
        return TcpCollective(self.rank, self.world_size, self._collective_timeout_s)

    @guarded
    def shutdown(self) -> bool:
        """Leave the current context and the collective, before the process exits (or is killed)."""
        self._exit()
        if self._saver is not None:
            self._saver.close()  # finishes the checkpoint being written
        if self.collective is not None:
            self.collective.close()
            self.collective = None
        if self._server is not None:
            self._server.close()  # runs on the server's thread: it stops once this call returns
        return True

    # ------------------------------------------------------------------ steps
    @guarded
    def configure(self, mode: str, epoch: int, ds_id: str, desired_keys: set[str] | None, warmup: bool,
                  eager: bool, lrs: Mapping[RateKey, float] | None = None) -> bool:
        """Enter ``with network(mode, epoch, ds_id, ...)`` (leaving any previous context first)."""
        self._exit()
        self.network(mode=mode, epoch=epoch, ds_id=ds_id, desired_output_keys=desired_keys, warmup=warmup,
                     eager=eager)
        self._set_lrs(lrs)
        self.network.__enter__()
        self._in_context = True
        produced: set[str] = set()
        for op in self.network.ctx_ops:
            produced.update(op.outputs)
        self._produced = produced & set(self.network.ctx_outputs)
        return True

    @guarded
    def exit_context(self) -> bool:
        """Leave the current ``with network(...)`` block."""
        self._exit()
        return True

    def _exit(self) -> None:
        if self._in_context:
            self._in_context = False
            self.network.__exit__(None, None, None)

    @guarded
    def run_step(self, batch: Mapping[str, Any], n_local: int, n_total: int,
                 lrs: Mapping[RateKey, float] | None = None) -> dict[str, Any]:
        """Run this replica's slice: ``n_local`` of the step's ``n_total`` samples (0 for a padding slice).

        Returns:
            The outputs the ops produced, as numpy arrays.
        """
        return self._run_step(self.network.run_step, batch, n_local, n_total, lrs)

    def step_early(self, args: tuple[Any, ...] | None) -> Any:
        """The step stream's entry point: :meth:`step`, answered before the step's weight update, which the stream's
        thread runs once the answer is sent (a :class:`~fe_ray.distributed.step_stream.StepReply`)."""
        if args is None:
            return True
        return self.start_run_step(*args)

    @guarded
    def start_run_step(self, batch: Mapping[str, Any], n_local: int, n_total: int,
                       lrs: Mapping[RateKey, float] | None = None) -> Any:
        """:meth:`run_step` up to the step's outputs (see :meth:`fe_ray.network.BaseNetwork.start_step`).

        Returns:
            A StepReply of the outputs and :meth:`_finish_step`.
        """
        return StepReply(self._run_step(self.network.start_step, batch, n_local, n_total, lrs), self._finish_step)

    def _run_step(self, run: Callable[[Mapping[str, Any]], dict[str, Any]], batch: Mapping[str, Any], n_local: int,
                  n_total: int, lrs: Mapping[RateKey, float] | None) -> dict[str, Any]:
        from fe_ray.backend import get_backend

        if not self._in_context:
            raise RuntimeError("Replica.run_step called outside a configured context; call configure() first.")
        self._set_lrs(lrs)
        self._weights.n_local = float(n_local)
        self._weights.n_total = float(max(n_total, 1))
        # Object-store and channel arrays are read-only views of shared buffers: frameworks that write into their
        # inputs need owned memory, and a compiled graph's channel is not rewritten while a view of it is alive.
        batch = writable(batch)
        try:
            result = run(batch)
        except BaseException:
            self._abort_peers()
            raise
        backend = get_backend(self.framework)
        return {key: _to_numpy(backend, result[key]) for key in self._produced if key in result}

    def _finish_step(self) -> None:
        """Run the weight update :meth:`start_run_step` left (on the stream's thread, once the answer is sent).

        Never raises: an error makes the replica broken (every later guarded call returns it).
        """
        try:
            self.network.finish_step()
        except BaseException as exc:  # noqa: BLE001 - reported by the next call, as data
            self._abort_peers()
            exc.add_note("(fe_ray: raised by the weight update of this replica's previous step, which runs after that "
                         "step's outputs were sent; FE_RAY_EARLY_ANSWER=0 runs it before)")
            self._broken = failure_of(self, exc)

    @guarded
    def step_settled(self) -> bool:
        """True once this replica's previous step has ended (its weight update included), or the failure of that
        update: guarded methods run on the step thread after the update and return such a failure (see
        :meth:`fe_ray.distributed.supervisor.ReplicaGroup.call_one`, which asks the other replicas this)."""
        return True

    def _abort_peers(self) -> None:
        # Peers may be waiting for this replica inside the all-reduce, which it will never join: tell them, so
        # theirs fails now rather than at the collective's timeout (the driver replaces the whole group after any
        # failed step anyway).
        for peer in self._peers:
            peer.abort_collective.remote()

    @guarded
    def step(self, args: tuple[Any, ...] | None) -> dict[str, Any] | bool:
        """:meth:`run_step` with its arguments as one tuple: the entry point of the threaded step transports
        (a compiled graph, or a step stream with ``FE_RAY_EARLY_ANSWER=0``), which pass each replica a single value.
        None: a warm-up call that only proves the transport's thread is running."""
        if args is None:
            return True
        return self.run_step(*args)

    @guarded
    def prepare_compiled_steps(self) -> bool:
        """Get ready for steps on a compiled graph's thread: make the collective interruptible, and import torch
        (when installed) on this main thread first: Ray's channel code imports it on the graph's thread, and two
        threads importing one large package can each see it half-built."""
        if importlib.util.find_spec("torch") is not None:
            import torch  # noqa: F401
        if self.collective is not None and hasattr(self.collective, "interruptible"):
            # The driver reads a compiled graph's results in rank order and cannot see a failed peer while rank 0
            # waits for it in the all-reduce: abort_collective must be able to wake that wait.
            self.collective.interruptible = True
        return True

    @guarded
    def open_step_stream(self, accept_timeout_s: float) -> tuple[str, int]:
        """Serve :meth:`step` on a TCP stream (:mod:`fe_ray.distributed.step_stream`); returns the address the
        driver connects to within ``accept_timeout_s``. Needs ``step_transport="stream"`` at construction."""
        if self._server is None:
            raise RuntimeError("open_step_stream needs a replica created with step_transport='stream'.")
        return self._server.listen(self.node_ip, accept_timeout_s)

    def _set_lrs(self, lrs: Mapping[RateKey, float] | None) -> None:
        if lrs:
            set_rates(self.network.models, lrs)

    # ------------------------------------------------------------------ introspection
    def _info(self) -> dict[str, Any]:
        return process_info(self.rank, self.framework, self.network, self.node_ip)

    @guarded
    def info(self) -> dict[str, Any]:
        """Rank, pid, node IP and device of this replica."""
        return self._info()

    def ping(self) -> int:
        """Liveness check: returns this process's pid."""
        return os.getpid()


def _to_numpy(backend: Any, value: Any) -> Any:
    value = backend.to_numpy(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    return value


__all__ = ["Replica", "yield_cores_at_exit"]
