"""TCP helpers shared by the TCP collective (:mod:`fe_ray.distributed.collective`) and the step streams
(:mod:`fe_ray.distributed.step_stream`); each turns :class:`PeerClosed` into its own error."""

from __future__ import annotations

import socket


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


__all__ = ["PeerClosed", "recv_exactly_into", "set_nodelay"]
