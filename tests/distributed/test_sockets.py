"""The TCP helpers: scatter-gather sends that resume after partial writes, exact reads."""

from __future__ import annotations

import socket
import threading
from typing import Any

import numpy as np
import pytest

from fe_ray.distributed.sockets import PeerClosed, recv_exactly_into, send_parts


class Trickle:
    """A connection whose ``sendmsg`` takes at most ``limit`` bytes per call, as a full socket buffer does."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = bytearray()
        self.calls = 0

    def sendmsg(self, buffers: list[memoryview]) -> int:
        self.calls += 1
        taken = 0
        for view in buffers:
            chunk = bytes(view[:self.limit - taken])
            self.received += chunk
            taken += len(chunk)
            if taken == self.limit:
                break
        return taken


def parts() -> list[Any]:
    array = np.arange(10_000, dtype=np.float32)
    return [b"head", bytearray(b"pickle" * 100), b"", memoryview(array).cast("B"), memoryview(b"tail")]


def test_partial_sends_resume_inside_a_buffer() -> None:
    conn = Trickle(limit=997)  # not a divisor of any part: every resume starts mid-buffer
    send_parts(conn, parts())  # type: ignore[arg-type]
    assert bytes(conn.received) == b"".join(bytes(p) for p in parts())
    assert conn.calls == -(-len(conn.received) // 997)


def test_without_sendmsg_parts_go_one_by_one() -> None:
    class Plain:
        def __init__(self) -> None:
            self.received = bytearray()

        def sendall(self, data: memoryview) -> None:
            self.received += data

    conn = Plain()
    send_parts(conn, parts())  # type: ignore[arg-type]
    assert bytes(conn.received) == b"".join(bytes(p) for p in parts())


def test_a_real_socket_carries_more_than_its_buffer() -> None:
    big = np.random.default_rng(0).integers(0, 255, size=8 << 20, dtype=np.uint8)  # 8 MiB: many partial sends
    left, right = socket.socketpair()
    received = bytearray(4 + big.nbytes)
    reader = threading.Thread(target=recv_exactly_into, args=(right, memoryview(received)))
    with left, right:
        reader.start()
        send_parts(left, [b"size", memoryview(big)])
        reader.join(timeout=30)
    assert not reader.is_alive()
    assert received[:4] == b"size" and np.array_equal(np.frombuffer(received, np.uint8, offset=4), big)


def test_exact_read_names_what_arrived_when_the_peer_closes() -> None:
    left, right = socket.socketpair()
    with right:
        with left:
            left.sendall(b"abc")
        with pytest.raises(PeerClosed) as info:
            recv_exactly_into(right, memoryview(bytearray(8)))
    assert (info.value.received, info.value.expected) == (3, 8)
