"""TCP helpers shared by the TCP collective (:mod:`fe_ray.distributed.collective`) and the step streams
(:mod:`fe_ray.distributed.step_stream`); each turns :class:`PeerClosed` into its own error."""

from __future__ import annotations

import socket
from collections.abc import Sequence

#: Buffers handed to one ``sendmsg`` call; Linux accepts up to IOV_MAX (1024).
_MAX_PARTS = 64


class PeerClosed(ConnectionError):
    """The peer closed the connection after ``received`` of the ``expected`` bytes of a read.

    Attributes:
        received: Bytes that had arrived.
        expected: Bytes the read needed.
    """

    def __init__(self, received: int, expected: int) -> None:
        super().__init__(f"connection closed after {received} of {expected} bytes")
        self.received = received
        self.expected = expected

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.received, self.expected)


def set_nodelay(conn: socket.socket) -> None:
    """Send small messages (a step's frame, a gradient chunk's header) at once instead of waiting for Nagle."""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def recv_exactly_into(conn: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``conn`` (blocking, with the socket's own timeout).

    Raises:
        PeerClosed: The peer closed the connection first.
        OSError: The socket failed or timed out (TimeoutError).
    """
    received = 0
    while received < len(view):
        count = conn.recv_into(view[received:])
        if count == 0:
            raise PeerClosed(received, len(view))
        received += count


def recv_parts_into(conn: socket.socket, views: Sequence[memoryview]) -> None:
    """Fill each of ``views`` in order from ``conn``, as :func:`recv_exactly_into` of each would.

    One ``recvmsg_into`` (scatter) call fills as many of them as the data at hand covers, where the platform has it:
    a frame's pickle and its array buffers cost one system call instead of one each.

    Raises:
        PeerClosed: The peer closed the connection first (``received`` and ``expected`` count all the views).
        OSError: The socket failed or timed out (TimeoutError).
    """
    pending = [view.cast("B") for view in views if view.nbytes]
    if not hasattr(conn, "recvmsg_into"):  # e.g. Windows
        for view in pending:
            recv_exactly_into(conn, view)
        return
    expected = sum(view.nbytes for view in pending)
    received = first = 0
    while first < len(pending):
        count = conn.recvmsg_into(pending[first:first + _MAX_PARTS])[0]
        if count == 0:
            raise PeerClosed(received, expected)
        received += count
        first = _advance(pending, first, count)


def send_parts(conn: socket.socket, parts: Sequence[bytes | bytearray | memoryview]) -> None:
    """Send ``parts`` back to back, as ``sendall`` of their concatenation would, without concatenating them.

    One ``sendmsg`` (scatter-gather) call carries them all where the platform has it: a frame sent as header,
    pickle and array buffers costs one system call and one wake-up of the reader instead of one per part (with
    TCP_NODELAY each ``sendall`` is its own packet).

    Raises:
        OSError: The socket failed or timed out (TimeoutError).
    """
    views = [memoryview(part).cast("B") for part in parts if len(part)]
    if not hasattr(conn, "sendmsg"):  # e.g. Windows
        for view in views:
            conn.sendall(view)
        return
    first = 0
    while first < len(views):
        first = _advance(views, first, conn.sendmsg(views[first:first + _MAX_PARTS]))


def _advance(views: list[memoryview], first: int, done: int) -> int:
    """Mark ``done`` more bytes of ``views[first:]`` as sent or filled; return the index of the first view not done.

    A partial send or read stops anywhere, also inside a buffer: that view is cut to its rest, so the next call
    resumes mid-buffer.
    """
    while first < len(views) and done >= views[first].nbytes:
        done -= views[first].nbytes
        first += 1
    if done:
        views[first] = views[first][done:]
    return first


__all__ = ["PeerClosed", "recv_exactly_into", "recv_parts_into", "send_parts", "set_nodelay"]
