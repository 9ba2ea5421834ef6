"""The TCP helpers: scatter-gather sends that resume after partial writes, exact and scattered reads."""

from __future__ import annotations

import socket
import threading
from typing import Any

import numpy as np
import pytest

from fe_ray.distributed.sockets import PeerClosed, recv_exactly_into, recv_parts_into, send_parts


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


@pytest.mark.parametrize("scattered", [False, True], ids=["exact", "scattered"])
def test_reads_name_what_arrived_when_the_peer_closes(scattered: bool) -> None:
    left, right = socket.socketpair()
    with right:
        with left:
            left.sendall(b"abcdefg")
        with pytest.raises(PeerClosed) as info:
            if scattered:  # counted over all the buffers
                recv_parts_into(right, [memoryview(bytearray(4)), memoryview(bytearray(6))])
            else:
                recv_exactly_into(right, memoryview(bytearray(10)))
    assert (info.value.received, info.value.expected) == (7, 10)


class Dribble:
    """A connection whose ``recvmsg_into`` fills at most ``limit`` bytes per call from ``data``, as a read that
    returns whatever has arrived does."""

    def __init__(self, data: bytes, limit: int) -> None:
        self.data, self.limit, self.calls = memoryview(data), limit, 0

    def recvmsg_into(self, buffers: list[memoryview]) -> tuple[int, list[Any], int, Any]:
        self.calls += 1
        filled = 0
        for view in buffers:
            chunk = self.data[:min(self.limit - filled, view.nbytes)]
            view[:len(chunk)] = chunk
            self.data, filled = self.data[len(chunk):], filled + len(chunk)
            if filled == self.limit or not self.data:
                break
        return filled, [], 0, None


def test_scattered_reads_resume_inside_a_buffer_and_skip_empty_ones() -> None:
    expected = b"".join(bytes(p) for p in parts())
    targets = [bytearray(len(p)) for p in parts()]  # one of them empty
    conn = Dribble(expected, limit=997)
    recv_parts_into(conn, [memoryview(t) for t in targets])  # type: ignore[arg-type]
    assert [bytes(t) for t in targets] == [bytes(p) for p in parts()]
    assert conn.calls == -(-len(expected) // 997)
    whole = Dribble(expected, limit=len(expected))
    recv_parts_into(whole, [memoryview(bytearray(len(p))) for p in parts()])  # type: ignore[arg-type]
    assert whole.calls == 1  # everything at hand: one call for all the buffers


def test_without_recvmsg_into_buffers_are_read_one_by_one() -> None:
    class Plain:
        def __init__(self, data: bytes) -> None:
            self.data = memoryview(data)

        def recv_into(self, view: memoryview) -> int:
            count = min(len(view), 5, len(self.data))
            view[:count] = self.data[:count]
            self.data = self.data[count:]
            return count

    targets = [bytearray(len(p)) for p in parts()]
    recv_parts_into(Plain(b"".join(bytes(p) for p in parts())), [memoryview(t) for t in targets])  # type: ignore[arg-type]
    assert [bytes(t) for t in targets] == [bytes(p) for p in parts()]
