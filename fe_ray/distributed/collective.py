"""Collective communication between replicas, and the gradient reducers built on it.

One small interface, :class:`Collective` (``listen`` / ``connect`` / ``allreduce_sum`` / ``close``), with two
implementations:

* :class:`TorchCollective` wraps ``torch.distributed`` (gloo on CPU, NCCL on GPU). Rank 0 picks its node IP and a
  free port; the driver passes that address to every rank, and all ranks call ``init_process_group`` with a
  timeout.
* :class:`TcpCollective` is a small framework-neutral all-reduce over TCP sockets with rank 0 as the hub: every
  rank sends its float32 buffer to rank 0, which sums them in rank order and sends the total back. Every rank thus
  ends with bit-identical results, which keeps the replicas' weights identical. It binds to the node's cluster IP
  (or loopback) only.

Why TensorFlow uses the TCP collective: fe_ray's TF Network runs the step as a ``tf.function`` and UpdateOp calls
``state["grad_reducer"](model, gradients)`` inside it, with symbolic tensors, in a static graph. The all-reduce
runs in a ``tf.numpy_function`` (a stateful op, so automatic control dependencies keep every rank's reductions in
the same program order): the TF step wraps the reducer in one (``fe_ray.backend.tf_step.graph_safe_reducer``), and
this reducer also wraps itself when it is called on symbolic tensors directly. That keeps static-graph execution
and needs no distribution strategy.
The alternatives were worse for us: ``MultiWorkerMirroredStrategy`` owns variable creation, the training loop and
the TF_CONFIG cluster, clashes with models built before the strategy scope (fe_ray builds models before the
Network exists), and Keras 3 training under it is fragile; raw ``CollectiveReduceV2`` ops need the same
cluster/server setup of the TF runtime. The TCP hub is ~100 lines we fully control: explicit timeouts, a clear
error naming the peer that went silent, and no TF runtime state to tear down when a replica is replaced. Its
cost is a host copy of the gradients per step and O(N) traffic at the hub, which is fine for the few CPU/GPU
replicas fe_ray targets; torch uses NCCL/gloo directly on device tensors.

The reducers implement ``g_global = allreduce_sum(g_local * n_local) / n_total`` where ``n_local`` is the number of
samples in this replica's slice and ``n_total`` the batch size. Losses are means over samples, so this is
exactly the gradient one process computes on the whole batch, also for uneven slices; an idle replica (batch
smaller than the number of replicas) runs a padding sample with ``n_local = 0`` and contributes nothing.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np

from fe_ray.distributed.errors import CollectiveError

_HEADER = struct.Struct("!QQ")  # (sequence number, payload bytes)
_HELLO = struct.Struct("!I")  # a connecting rank announces itself


@dataclass
class StepWeights:
    """This replica's share of the current step: ``n_local`` of the ``n_total`` samples (read when reducing)."""

    n_local: float = 1.0
    n_total: float = 1.0


class Collective(ABC):
    """All-reduce among ``world_size`` ranks.

    Usage: rank 0 calls :meth:`listen` and the driver hands its address to every rank's :meth:`connect` (called
    concurrently on all ranks); then any rank may call :meth:`allreduce_sum`, all ranks in the same order.

    Args:
        rank: This process's rank in ``[0, world_size)``.
        world_size: Number of ranks.
        timeout_s: Seconds to wait for a peer before raising :class:`CollectiveError`.
    """

    def __init__(self, rank: int, world_size: int, timeout_s: float) -> None:
        assert 0 <= rank < world_size, (rank, world_size)
        self.rank = rank
        self.world_size = world_size
        self.timeout_s = timeout_s
        self._aborted = False  # set by abort(): every later all-reduce fails

    @abstractmethod
    def listen(self, host: str) -> tuple[str, int]:
        """On rank 0: choose the rendezvous address on ``host`` and return it."""

    @abstractmethod
    def connect(self, address: tuple[str, int]) -> None:
        """Join the group at ``address`` (blocks until every rank joined or the timeout passes)."""

    @abstractmethod
    def allreduce_sum(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Element-wise sums over all ranks of ``arrays`` (same shapes on every rank), as float32 arrays."""

    @abstractmethod
    def close(self) -> None:
        """Leave the group and release sockets / process groups."""

    @abstractmethod
    def abort(self) -> None:
        """Make an all-reduce blocked in another thread (and every later one) fail now with CollectiveError.

        A replica calls this when a peer tells it that the peer's step failed: the peer will never join the
        all-reduce, and the driver replaces the whole group anyway.
        """

    def _raise_if_aborted(self) -> None:
        if self._aborted:
            raise CollectiveError(f"{type(self).__name__}: rank {self.rank} left the all-reduce because a peer "
                                  "replica failed this step.")


# ------------------------------------------------------------------------------------------------ TCP hub
class TcpCollective(Collective):
    """Framework-neutral all-reduce over TCP with rank 0 as the hub (see the module docstring)."""

    def __init__(self, rank: int, world_size: int, timeout_s: float = 300.0) -> None:
        super().__init__(rank, world_size, timeout_s)
        self._server: socket.socket | None = None
        self._peers: dict[int, socket.socket] = {}
        self._hub: socket.socket | None = None
        self._seq = 0

    def listen(self, host: str) -> tuple[str, int]:
        assert self.rank == 0, "only rank 0 listens"
        self._server = socket.create_server((host, 0), backlog=max(self.world_size, 1))
        return host, int(self._server.getsockname()[1])

    def connect(self, address: tuple[str, int]) -> None:
        if self.world_size == 1:
            return
        if self.rank == 0:
            self._accept_peers()
        else:
            self._hub = self._connect_hub(address)

    def _accept_peers(self) -> None:
        assert self._server is not None, "call listen() before connect() on rank 0"
        deadline = time.monotonic() + self.timeout_s
        while len(self._peers) < self.world_size - 1:
            self._server.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                missing = sorted(set(range(1, self.world_size)) - set(self._peers))
                raise CollectiveError(f"TCP collective: ranks {missing} did not connect to rank 0 within "
                                      f"{self.timeout_s:.0f}s.") from None
            _configure(conn, self.timeout_s)
            (peer,) = _HELLO.unpack(_recv_exact(conn, _HELLO.size, peer=-1))
            self._peers[int(peer)] = conn

    def _connect_hub(self, address: tuple[str, int]) -> socket.socket:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                conn = socket.create_connection(address, timeout=max(deadline - time.monotonic(), 0.01))
                break
            except OSError as err:  # the hub may not be accepting yet
                if time.monotonic() >= deadline:
                    raise CollectiveError(f"TCP collective: rank {self.rank} could not reach rank 0 at "
                                          f"{address[0]}:{address[1]} within {self.timeout_s:.0f}s ({err}).") from err
                time.sleep(0.05)
        _configure(conn, self.timeout_s)
        conn.sendall(_HELLO.pack(self.rank))
        return conn

    def allreduce_sum(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in arrays]
        flat = (np.concatenate([a.astype(np.float32, copy=False).ravel() for a in arrays]) if arrays
                else np.zeros(0, np.float32))
        if self.world_size > 1:
            self._seq += 1
            flat = self._hub_sum(flat) if self.rank == 0 else self._spoke_sum(flat)
        out, offset = [], 0
        for array in arrays:
            out.append(flat[offset:offset + array.size].reshape(array.shape))
            offset += array.size
        return out

    def _hub_sum(self, flat: np.ndarray) -> np.ndarray:
        total = flat.copy()
        for peer in range(1, self.world_size):
            total += self._recv_array(self._peers[peer], peer, flat.nbytes)  # rank order: identical on all ranks
        message = _HEADER.pack(self._seq, total.nbytes) + total.tobytes()
        for peer in range(1, self.world_size):
            self._send(self._peers[peer], peer, message)
        return total

    def _spoke_sum(self, flat: np.ndarray) -> np.ndarray:
        assert self._hub is not None, "connect() must run before allreduce_sum()"
        self._send(self._hub, 0, _HEADER.pack(self._seq, flat.nbytes) + flat.tobytes())
        return self._recv_array(self._hub, 0, flat.nbytes)

    def _send(self, conn: socket.socket, peer: int, message: bytes) -> None:
        try:
            conn.sendall(message)
        except OSError as err:
            self._raise_if_aborted()
            raise CollectiveError(f"TCP collective: rank {self.rank} could not send all-reduce #{self._seq} to rank "
                                  f"{peer} ({err}); that replica probably died.") from err

    def _recv_array(self, conn: socket.socket, peer: int, nbytes: int) -> np.ndarray:
        try:
            return self._recv_checked(conn, peer, nbytes)
        except CollectiveError:
            self._raise_if_aborted()
            raise

    def _recv_checked(self, conn: socket.socket, peer: int, nbytes: int) -> np.ndarray:
        seq, size = _HEADER.unpack(_recv_exact(conn, _HEADER.size, peer, self.timeout_s))
        if seq != self._seq or size != nbytes:
            raise CollectiveError(f"TCP collective out of step: rank {self.rank} expected all-reduce #{self._seq} of "
                                  f"{nbytes} bytes but rank {peer} sent #{seq} of {size} bytes. The replicas ran "
                                  "different ops or models in this step.")
        out = np.empty(nbytes // 4, np.float32)
        _recv_exact_into(conn, memoryview(out).cast("B"), peer, self.timeout_s)
        return out

    def close(self) -> None:
        for conn in [*self._peers.values(), self._hub, self._server]:
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self._peers.clear()
        self._hub = self._server = None

    def abort(self) -> None:
        self._aborted = True
        for conn in [*self._peers.values(), self._hub]:
            if conn is not None:
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # wakes a recv blocked in another thread
                except OSError:
                    pass


def _configure(conn: socket.socket, timeout_s: float) -> None:
    conn.settimeout(timeout_s)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small gradient messages must not wait for Nagle


def _recv_exact(conn: socket.socket, nbytes: int, peer: int, timeout_s: float = 0.0) -> bytes:
    buffer = bytearray(nbytes)
    _recv_exact_into(conn, memoryview(buffer), peer, timeout_s)
    return bytes(buffer)


def _recv_exact_into(conn: socket.socket, view: memoryview, peer: int, timeout_s: float) -> None:
    received = 0
    while received < len(view):
        try:
            count = conn.recv_into(view[received:])
        except TimeoutError:
            raise CollectiveError(f"TCP collective: no data from rank {peer} within {timeout_s:.0f}s; that replica "
                                  "is hung or dead.") from None
        except OSError as err:
            raise CollectiveError(f"TCP collective: connection to rank {peer} failed ({err}); that replica probably "
                                  "died.") from err
        if count == 0:
            raise CollectiveError(f"TCP collective: rank {peer} closed the connection; that replica probably died.")
        received += count


# ------------------------------------------------------------------------------------------------ torch.distributed
class TorchCollective(Collective):
    """``torch.distributed`` process group: gloo for CPU replicas, NCCL for CUDA ones.

    Args:
        rank: This process's rank.
        world_size: Number of ranks.
        timeout_s: Rendezvous and collective timeout.
        backend: "gloo" or "nccl".
    """

    def __init__(self, rank: int, world_size: int, timeout_s: float = 300.0, backend: str = "gloo") -> None:
        super().__init__(rank, world_size, timeout_s)
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"torch collective backend must be 'gloo' or 'nccl', got {backend!r}.")
        self.backend = backend
        self._joined = False
        self._waiting: threading.Event | None = None
        #: Whether :meth:`abort` can wake a gloo all-reduce blocked in another thread. Off by default: waiting on a
        #: future costs thread hand-offs per all-reduce, and it is only needed when the driver cannot see a failed
        #: peer itself (compiled step graphs read results in rank order).
        self.interruptible = False

    def listen(self, host: str) -> tuple[str, int]:
        assert self.rank == 0, "only rank 0 listens"
        return host, free_port(host)

    def connect(self, address: tuple[str, int]) -> None:
        import torch.distributed as dist

        try:
            dist.init_process_group(self.backend, init_method=f"tcp://{address[0]}:{address[1]}", rank=self.rank,
                                    world_size=self.world_size, timeout=timedelta(seconds=self.timeout_s))
        except Exception as err:
            raise CollectiveError(f"torch.distributed ({self.backend}) rendezvous of rank {self.rank} at "
                                  f"{address[0]}:{address[1]} failed: {err}") from err
        self._joined = True

    def allreduce_tensor_(self, tensor: Any) -> None:
        """Sum ``tensor`` over all ranks in place (gloo: abortable by :meth:`abort` if :attr:`interruptible`)."""
        import torch.distributed as dist

        if self.backend != "gloo" or not self.interruptible:
            # NCCL enqueues the kernel and returns; a failed peer is handled by the process group's abort/timeout.
            self._raise_if_aborted()
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
            return
        # gloo blocks the calling thread until every rank joins, and a peer that failed before joining never does
        # (closing its process group does not wake us): wait on an event that either completion or abort() sets.
        woken = threading.Event()
        self._waiting = woken  # published before the check, so an abort() racing with this call always wakes it
        self._raise_if_aborted()
        work = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=True)
        work.get_future().add_done_callback(lambda _: woken.set())
        if not woken.wait(self.timeout_s + 5.0):  # gloo's own timeout fires first; this only bounds the wait
            raise CollectiveError(f"torch.distributed (gloo): rank {self.rank}'s all-reduce did not finish within "
                                  f"{self.timeout_s:.0f}s; a peer replica is hung or dead.")
        self._waiting = None
        self._raise_if_aborted()
        work.wait()  # completed: returns at once, or raises gloo's error (e.g. a peer's connection closed)

    def abort(self) -> None:
        self._aborted = True
        waiting = self._waiting
        if waiting is not None:
            waiting.set()
        if self.backend == "nccl":
            import torch.distributed as dist

            group = dist.group.WORLD
            if group is not None and hasattr(group, "abort"):
                group.abort()  # ends NCCL kernels waiting for the failed peer

    def allreduce_sum(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch

        device = torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else "cpu"
        out = []
        for array in arrays:
            tensor = torch.as_tensor(np.asarray(array, np.float32)).to(device)
            self.allreduce_tensor_(tensor)
            out.append(tensor.cpu().numpy())
        return out

    def close(self) -> None:
        if self._joined:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._joined = False


def free_port(host: str) -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------------------------ gradient reducers
GradReducer = Callable[[Any, list[Any]], list[Any]]


def make_grad_reducer(framework: str, collective: Collective, weights: StepWeights) -> GradReducer:
    """The ``grad_reducer`` to install on a replica's network (see the module docstring for the math).

    Args:
        framework: "torch" or "tf".
        collective: A connected collective (a :class:`TorchCollective` for torch).
        weights: The replica's :class:`StepWeights`, updated by the replica before every step.
    """
    if framework == "torch":
        return _torch_reducer(collective, weights)
    if framework == "tf":
        return _tf_reducer(collective, weights)
    raise ValueError(f"Unknown framework {framework!r}; valid choices are ['tf', 'torch'].")


def _torch_reducer(collective: Collective, weights: StepWeights) -> GradReducer:
    import torch

    from fe_ray.backend import get_backend

    backend = get_backend("torch")

    def reduce(model: Any, gradients: list[Any]) -> list[Any]:
        params = backend.trainable_variables(model)
        grads = list(gradients)
        if len(params) == len(grads):
            # A weight unused in this step has no gradient; every rank must still send the same buffer layout.
            grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        buckets: dict[tuple[Any, Any], list[int]] = {}
        for pos, grad in enumerate(grads):
            buckets.setdefault((grad.dtype, grad.device), []).append(pos)
        with torch.no_grad():
            for positions in buckets.values():  # same insertion order on every rank: same model, same ops
                flat = torch.cat([grads[i].detach().reshape(-1).float() for i in positions])
                flat.mul_(float(weights.n_local))
                if isinstance(collective, TorchCollective):
                    collective.allreduce_tensor_(flat)
                else:
                    flat = torch.as_tensor(collective.allreduce_sum([flat.cpu().numpy()])[0]).to(flat.device)
                flat.div_(float(weights.n_total))
                offset = 0
                for i in positions:
                    size = grads[i].numel()
                    grads[i] = flat[offset:offset + size].view_as(grads[i]).to(grads[i].dtype)
                    offset += size
        return grads

    return reduce


def _tf_reducer(collective: Collective, weights: StepWeights) -> GradReducer:
    import tensorflow as tf

    def numpy_reduce(*arrays: np.ndarray) -> list[np.ndarray]:
        # Runs at graph execution time, so it reads this step's weights (never values frozen at tracing time).
        scaled = [np.asarray(a, np.float32) * np.float32(weights.n_local) for a in arrays]
        summed = collective.allreduce_sum(scaled)
        return [(s / np.float32(weights.n_total)).astype(a.dtype) for s, a in zip(summed, arrays)]

    def reduce(model: Any, gradients: list[Any]) -> list[Any]:
        present = [pos for pos, grad in enumerate(gradients) if grad is not None]
        if not present:
            return list(gradients)
        tensors = [tf.convert_to_tensor(gradients[pos]) for pos in present]  # IndexedSlices -> dense
        out = list(gradients)
        if tf.executing_eagerly():
            # fe_ray's TF step already calls grad_reducer through its own tf.numpy_function
            # (fe_ray.backend.tf_step.graph_safe_reducer), i.e. eagerly with each step's values: reduce directly.
            for pos, value in zip(present, numpy_reduce(*[t.numpy() for t in tensors])):
                out[pos] = tf.convert_to_tensor(value)
            return out
        reduced = tf.numpy_function(numpy_reduce, tensors, Tout=[t.dtype for t in tensors], stateful=True,
                                    name="fe_ray_allreduce")
        if not isinstance(reduced, (list, tuple)):
            reduced = [reduced]
        for pos, tensor, value in zip(present, tensors, reduced):
            value.set_shape(tensor.shape)  # numpy_function loses static shapes; optimizers need them
            out[pos] = value
        return out

    return reduce


__all__ = ["Collective", "GradReducer", "StepWeights", "TcpCollective", "TorchCollective", "free_port",
           "make_grad_reducer"]
