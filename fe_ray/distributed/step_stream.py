"""Steps over one TCP stream per replica (``step_transport="stream"``): no Ray task per step, no busy-waiting
(unless asked for, see ``FE_RAY_STREAM_SPIN_US`` below).

A Ray actor call costs this much per step on top of the work (2-core CPU VM, LeNet, 32 images, one replica, a
plain actor with the same torch step as the plain loop; benchmarks/RESULTS.md has the runs): actor calls reach
0.61-0.66 of the plain loop's samples/s, the same step behind a socket 0.88-0.89. Ray's task path (submission,
scheduling, argument and result objects, waking the actor's task thread) is what the difference pays for.

Ray still starts, places, supervises and kills the replicas, and delivers every other call (configuring, state
transfers, pings). Only the per-step traffic bypasses it: each replica's :class:`StepServer` thread owns one
connection from the driver and waits in ``select`` between steps (an idle replica uses no CPU, unlike the compiled
graph's channel readers). That thread also runs the replica's other calls, handed over by the actor's main thread,
so all framework work happens on one thread (see :class:`StepServer` for why that matters).

Optional polling (``FE_RAY_STREAM_SPIN_US``, default 0: off). Each hop of a step wakes a sleeping thread, the
replica's when its batch arrives and the driver's when the answers do (a LeNet step's hops took ~205 us each on
both the 2-core VM and a 16-core H100 host on 2026-11-26). With a positive value the driver polls for the answers
for up to that many microseconds before it sleeps, and each replica polls for its next message as long after
answering. That trades idle CPU for the wake-ups, so it can only pay where the driver and the replicas have cores
of their own: on the 2-core VM it took ~40 us off each ~140 us hop of a one-thread replica (a step 6% faster),
and made a LeNet step whose two threads filled both cores 17% slower. Set it in the driver's environment before
the replicas start; the local Ray's workers inherit it, on a cluster pass it in ``runtime_env={"env_vars": ...}``
as well.

How fe_ray's guarantees carry over:

* The driver waits on all the streams at once and looks at each answer as it comes, so a replica's failure is
  seen while its peers are still blocked in the all-reduce waiting for it; the group is then torn down (a group
  with a failed member is never reused), exactly as with actor calls.
* A dead replica closes its end (EOF or reset): the group then asks Ray which replica died and raises
  :class:`~fe_ray.distributed.errors.ReplicaDiedError`. A hung one runs past the deadline: ReplicaTimeoutError.
* Messages are framed by :mod:`fe_ray.distributed.framing`: pickle protocol 5, numpy arrays' bytes out of band,
  each landing in its own ``bytearray``, so the replica's inputs and the driver's outputs are owned, writable
  arrays without an extra copy (a read-only source array stays read-only, and is copied by the receiver as any
  read-only input is); a 0-d loss travels as its value.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from typing import Any, NamedTuple

from fe_ray.distributed.framing import recv_message, send_message
from fe_ray.distributed.sockets import set_nodelay

logger = logging.getLogger(__name__)

#: Environment variable: "0" makes replicas answer a training step after its weight update, not before.
EARLY_ANSWER_ENV = "FE_RAY_EARLY_ANSWER"
#: Environment variable: microseconds the driver and each replica poll their step stream before sleeping.
SPIN_ENV = "FE_RAY_STREAM_SPIN_US"
#: The largest value :data:`SPIN_ENV` takes (a poll longer than a step only burns a core).
MAX_SPIN_US = 100_000


def spin_seconds(env: Mapping[str, str] | None = None) -> float:
    """Seconds to poll a step stream before sleeping, from :data:`SPIN_ENV` (0 when unset).

    Args:
        env: The environment to read (this process's when None).

    Raises:
        ValueError: If the variable is not an integer from 0 to :data:`MAX_SPIN_US`.
    """
    raw = (os.environ if env is None else env).get(SPIN_ENV, "").strip()
    if not raw:
        return 0.0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SPIN_US:
        raise ValueError(f"{SPIN_ENV} must be an integer number of microseconds from 0 (off, the default) to "
                         f"{MAX_SPIN_US}, got {raw!r}; unset it or set e.g. {SPIN_ENV}=200.")
    return value / 1e6


def early_answers(env: Mapping[str, str] | None = None) -> bool:
    """Whether replicas answer a step before its weight update (:data:`EARLY_ANSWER_ENV`; the default: yes).

    Args:
        env: The environment to read (this process's when None).

    Raises:
        ValueError: If the variable is set to something other than "0" or "1".
    """
    raw = (os.environ if env is None else env).get(EARLY_ANSWER_ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{EARLY_ANSWER_ENV} must be 1 (answer a step before its weight update, the default) or 0 "
                         f"(after it), got {raw!r}; unset it or set {EARLY_ANSWER_ENV}=0.")
    return raw != "0"


class StepReply(NamedTuple):
    """A :class:`StepServer` handler's answer with work to do once it is sent.

    Attributes:
        value: What the driver gets.
        then: Called on the server's thread right after the answer is sent (or failed to send); it must not raise.
    """

    value: Any
    then: Callable[[], None] | None = None


class StepStreamError(ConnectionError):
    """A replica's step stream closed or broke (the replica died, or its stream thread ended).

    Attributes:
        rank: The replica whose stream failed.
    """

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(message)
        self.rank = rank

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.rank, str(self))


class StepsTimedOut(TimeoutError):
    """Some replicas did not answer a step in time (driver side); ``ranks`` names them, the others answered.

    Args:
        ranks: The ranks that did not answer.
        message: What timed out.
    """

    def __init__(self, ranks: list[int], message: str) -> None:
        super().__init__(message)
        self.ranks = list(ranks)


# ------------------------------------------------------------------------------------------------ replica side
class StepServer:
    """Replica side: the one thread that does all of a replica's work.

    It serves ``handler(args)`` for the driver's stream and runs every other call the actor's main thread hands
    over with :meth:`run` (setup, configuring, state transfers). Keeping all framework work on one thread matters
    on the CPU: OpenMP gives every thread that starts parallel work its own team of worker threads, and once a
    process holds more of them than it has cores, libgomp stops spin-waiting and every parallel region wakes its
    team through the kernel (measured: a 2-thread LeNet step took 11.9-13.6 ms on a stream thread next to a main
    thread that had its own team, 7.7-10.3 ms on the main thread alone).

    Args:
        handler: Called with each message received on the stream; its return value is sent back (the value of a
            :class:`StepReply`, whose ``then`` runs after the send). It must not raise (the replica's
            :meth:`~fe_ray.distributed.replica.Replica.step` returns failures as data).
        failure: Turns an exception raised while sending a result (e.g. an unpicklable output) into data.
    """

    def __init__(self, handler: Callable[[Any], Any], failure: Callable[[BaseException], Any] | None = None) -> None:
        self._handler = handler
        self._failure = failure
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        self._listener: socket.socket | None = None
        self._accept_deadline = 0.0
        self._closed = False
        self._spin_s = spin_seconds()
        self._thread = threading.Thread(target=self._loop, name="fe_ray-replica", daemon=True)
        self._thread.start()

    def on_thread(self) -> bool:
        """Whether the caller is this server's thread."""
        return threading.current_thread() is self._thread

    def run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` on the server's thread (between steps) and return its result or raise its exception."""
        if self.on_thread():
            return fn()
        if self._closed:
            raise RuntimeError("the replica's step server is closed")
        future: Future[Any] = Future()
        self._tasks.put((fn, future))
        self._wake_write.send(b"x")
        while not future.done():
            wait([future], timeout=1.0)
            if not future.done() and not self._thread.is_alive():  # closed after our check: nobody will run it
                raise RuntimeError("the replica's step server is closed")
        return future.result()

    def listen(self, host: str, accept_timeout_s: float) -> tuple[str, int]:
        """Open the stream's listening socket on ``host``; the driver must connect within the timeout."""
        return self.run(lambda: self._listen(host, accept_timeout_s))

    def _listen(self, host: str, accept_timeout_s: float) -> tuple[str, int]:
        listener = socket.create_server((host, 0), backlog=1)
        listener.setblocking(False)
        self._listener = listener
        self._accept_deadline = time.monotonic() + accept_timeout_s
        self._selector.register(listener, selectors.EVENT_READ, "listen")
        return host, int(listener.getsockname()[1])

    def close(self) -> None:
        """Stop the thread once its current work is done (the actor is going away)."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_write.send(b"x")

    def _loop(self) -> None:
        spin_until = 0.0  # with SPIN_ENV: poll, not sleep, until then (set after each answered step)
        while not self._closed:
            timeout = None
            if self._listener is not None:
                timeout = max(self._accept_deadline - time.monotonic(), 0.0)
            spinning = time.perf_counter() < spin_until
            events = self._selector.select(0.0 if spinning else timeout)
            if not events:
                if not spinning and self._listener is not None:
                    logger.warning("fe_ray: no driver connected to the step stream in time.")
                    self._drop(self._listener)
                    self._listener = None
                continue
            for key, _ in events:
                if key.data == "wake":
                    self._run_tasks()
                elif key.data == "listen":
                    self._accept()
                else:
                    self._serve_one(key.fileobj)  # type: ignore[arg-type]
                    if self._spin_s:
                        spin_until = time.perf_counter() + self._spin_s
        for _fn, future in iter_tasks(self._tasks):
            future.set_exception(RuntimeError("the replica's step server closed"))

    def _run_tasks(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._wake_read.recv(4096)
        for fn, future in iter_tasks(self._tasks):
            try:
                future.set_result(fn())
            except BaseException as err:  # noqa: BLE001 - handed back to the caller
                future.set_exception(err)

    def _accept(self) -> None:
        listener, self._listener = self._listener, None
        assert listener is not None, "accept without a listener"
        try:
            conn, _ = listener.accept()
        except OSError as err:
            logger.warning("fe_ray: the step stream's accept failed: %s", err)
            return
        finally:
            self._drop(listener)
        conn.setblocking(True)
        set_nodelay(conn)
        self._selector.register(conn, selectors.EVENT_READ, "stream")

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            args = recv_message(conn)
        except (EOFError, OSError):  # the driver closed the stream (group stopped) or went away
            self._drop(conn)
            return
        result = self._handler(args)
        then = None
        if isinstance(result, StepReply):
            result, then = result
        try:
            send_message(conn, result)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            if self._failure is None:
                raise
            send_message(conn, self._failure(err))
        except OSError:
            self._drop(conn)
        finally:
            if then is not None:
                then()  # before any other message or call: the step is not over until it returns

    def _drop(self, sock: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        with contextlib.suppress(OSError):
            sock.close()


def iter_tasks(tasks: queue.SimpleQueue[Any]) -> Iterator[Any]:
    """Everything queued in ``tasks`` now, without blocking."""
    while True:
        try:
            yield tasks.get_nowait()
        except queue.Empty:
            return


# ------------------------------------------------------------------------------------------------ driver side
class StepStream:
    """Driver side: one connection per replica; :meth:`run` sends one message to each and collects the answers.

    Args:
        addresses: Each replica's :meth:`StepServer.listen` address, in rank order.
        timeout_s: Longest connecting and the warm-up round trip may take.
        is_failure: Whether an answer is a failure; :meth:`run` returns as soon as it sees one.
    """

    def __init__(self, addresses: Sequence[tuple[str, int]], timeout_s: float,
                 is_failure: Callable[[Any], bool] = lambda value: False) -> None:
        self._is_failure = is_failure
        self._conns: list[socket.socket] = []
        self._timeout_s: float | None = None  # the sockets' timeout, set by run()
        self._spin_s = spin_seconds()
        self._selector = selectors.DefaultSelector()
        try:
            for rank, address in enumerate(addresses):
                conn = socket.create_connection(tuple(address), timeout=timeout_s)
                set_nodelay(conn)
                self._conns.append(conn)
                self._selector.register(conn, selectors.EVENT_READ, rank)
            self.run([None] * len(self._conns), timeout_s)  # every replica's serving thread answers
        except BaseException:
            self.close()
            raise

    def run(self, per_rank_args: Sequence[Any], timeout_s: float,
            overlap: Callable[[], None] | None = None) -> list[Any]:
        """Send ``per_rank_args[rank]`` to every replica and return their answers in rank order.

        ``overlap`` is called once everything was sent, while the replicas compute. As soon as one answer is a
        failure (``is_failure``) the answers are returned without waiting for the rest (None for those).

        Raises:
            TimeoutError: Some replica did not answer within ``timeout_s``.
            StepStreamError: A replica's stream closed or broke (it died, or its thread ended).
        """
        assert len(per_rank_args) == len(self._conns), "one argument per replica"
        if timeout_s != self._timeout_s:  # a system call per socket: only when the timeout changes
            for conn in self._conns:
                conn.settimeout(timeout_s)
            self._timeout_s = timeout_s
        for rank, (conn, args) in enumerate(zip(self._conns, per_rank_args)):
            try:
                send_message(conn, args)
            except TimeoutError:
                raise StepsTimedOut([rank], f"rank {rank} did not take its step's inputs within {timeout_s:g}s") \
                    from None
            except OSError as err:
                raise StepStreamError(rank, f"step stream of rank {rank} broke while sending: {err}") from err
        if overlap is not None:
            overlap()
        deadline = time.monotonic() + timeout_s  # counted from here: the overlap's work is the driver's, not theirs
        spin_until = time.perf_counter() + self._spin_s if self._spin_s else 0.0
        results: dict[int, Any] = {}
        while len(results) < len(self._conns):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [rank for rank in range(len(self._conns)) if rank not in results]
                raise StepsTimedOut(missing, f"ranks {missing} did not answer within {timeout_s:g}s")
            poll = spin_until and time.perf_counter() < spin_until  # SPIN_ENV: look without sleeping for a while
            for key, _ in self._selector.select(timeout=0.0 if poll else remaining):
                rank = key.data  # each rank sends one answer per step, so a readable rank has not answered yet
                results[rank] = self._receive(rank, timeout_s)
                if self._is_failure(results[rank]):
                    return [results.get(r) for r in range(len(self._conns))]
        return [results[rank] for rank in range(len(self._conns))]

    def _receive(self, rank: int, timeout_s: float) -> Any:
        # The frame's first bytes are here and the rest follows at once: the socket's timeout (the step's) bounds
        # a stall in the middle of it.
        try:
            return recv_message(self._conns[rank])
        except TimeoutError:
            raise TimeoutError(f"rank {rank} sent part of its answer and then nothing for {timeout_s:g}s") from None
        except (EOFError, OSError) as err:
            raise StepStreamError(rank, f"step stream of rank {rank} closed ({err or type(err).__name__})") from err

    def close(self) -> None:
        """Close every connection (each replica's thread keeps serving its other calls); safe to call repeatedly."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()
        self._conns = []
        with contextlib.suppress(Exception):
            self._selector.close()


__all__ = ["EARLY_ANSWER_ENV", "MAX_SPIN_US", "SPIN_ENV", "StepReply", "StepServer", "StepStream", "StepStreamError",
           "early_answers", "recv_message", "send_message", "spin_seconds"]
