"""The step stream's framing and its driver/replica ends, in one process (threads stand in for replicas)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import numpy as np
import pytest

from fe_ray.distributed.step_stream import (
    EARLY_ANSWER_ENV,
    SPIN_ENV,
    StepReply,
    StepServer,
    StepStream,
    StepStreamError,
    early_answers,
    recv_message,
    send_message,
    spin_seconds,
)


class Failed:
    """A failure answer, as a replica returns it (data, not an exception)."""


def test_messages_round_trip_with_owned_writable_arrays() -> None:
    left, right = socket.socketpair()
    strided = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]  # not contiguous: travels inside the pickle
    message = ({"x": np.arange(12, dtype=np.float32).reshape(3, 4), "y": np.array([1, 2, 3], np.int64),
                "strided": strided, "empty": np.zeros((0, 5), np.float32)}, 3, 7, {"model": 0.5}, "text")
    frozen = np.ones(4, np.float32)
    frozen.flags.writeable = False  # pickle keeps read-only buffers read-only (Replica.run_step copies those)
    with left, right:
        send_message(left, message)
        send_message(left, frozen)
        got = recv_message(right)
        got_frozen = recv_message(right)
    batch, n_local, n_total, lrs, text = got
    for key, value in message[0].items():
        np.testing.assert_array_equal(batch[key], value)
        assert batch[key].dtype == value.dtype and batch[key].shape == value.shape
        assert batch[key].flags.writeable
    assert (n_local, n_total, lrs, text) == (3, 7, {"model": 0.5}, "text")
    np.testing.assert_array_equal(got_frozen, frozen)
    assert not got_frozen.flags.writeable


def test_a_closed_peer_is_eof_between_frames_and_an_error_inside_one() -> None:
    left, right = socket.socketpair()
    left.close()
    with right, pytest.raises(EOFError):
        recv_message(right)
    left, right = socket.socketpair()
    left.sendall(b"\x00" * 5)  # part of a header
    left.close()
    with right, pytest.raises(ConnectionError, match="closed after 5 of 12 bytes"):
        recv_message(right)


def serve(handler: Any, count: int, **kwargs: Any) -> tuple[list[StepServer], list[tuple[str, int]]]:
    servers = [StepServer(handler(rank), **kwargs) for rank in range(count)]
    return servers, [server.listen("127.0.0.1", accept_timeout_s=10) for server in servers]


def close_all(servers: list[StepServer]) -> None:
    for server in servers:
        server.close()
    deadline = time.monotonic() + 5
    while server_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server_threads()


def set_spin(monkeypatch: pytest.MonkeyPatch, spin_us: str | None) -> None:
    """FE_RAY_STREAM_SPIN_US for the ends made in this test (None: unset, both ends sleep)."""
    if spin_us is None:
        monkeypatch.delenv(SPIN_ENV, raising=False)
    else:
        monkeypatch.setenv(SPIN_ENV, spin_us)


def server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "fe_ray-replica"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("spin_us", [None, "5000"], ids=["sleeping", "polling"])
def test_steps_and_handed_over_calls_share_one_thread_and_answers_keep_rank_order(
        spin_us: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    set_spin(monkeypatch, spin_us)  # polling ends: the same answers, the same thread
    seen: dict[int, set[threading.Thread]] = {rank: set() for rank in range(3)}

    def handler(rank: int) -> Any:
        def step(args: Any) -> Any:
            seen[rank].add(threading.current_thread())
            if args is None:
                return True  # warm-up
            time.sleep(0.05 * (2 - rank))  # rank 0 answers last
            return {"rank": rank, "sum": float(np.sum(args["x"]))}
        return step

    servers, addresses = serve(handler, 3)
    stream = StepStream(addresses, timeout_s=10)
    try:
        overlapped: list[bool] = []
        answers = stream.run([{"x": np.full(4, rank, np.float32)} for rank in range(3)], timeout_s=10,
                             overlap=lambda: overlapped.append(True))
        assert [a["rank"] for a in answers] == [0, 1, 2] and [a["sum"] for a in answers] == [0.0, 4.0, 8.0]
        assert overlapped == [True]
        # A call handed over by another thread (the actor's main thread) runs on the server's thread too.
        ran_on = servers[1].run(threading.current_thread)
        assert seen[1] == {ran_on} and ran_on is not threading.current_thread()
        assert all(len(threads) == 1 for threads in seen.values()) and ran_on.name == "fe_ray-replica"
        with pytest.raises(ZeroDivisionError):
            servers[0].run(lambda: 1 / 0)  # exceptions come back to the caller
        stream.close()
        # The stream's end leaves the thread serving handed-over calls until the replica closes it.
        assert servers[0].run(lambda: 42) == 42
    finally:
        stream.close()
        close_all(servers)


@pytest.mark.timeout(30)
def test_a_failure_answer_returns_without_waiting_for_blocked_peers() -> None:
    release = threading.Event()

    def handler(rank: int) -> Any:
        def step(args: Any) -> Any:
            if args is None:
                return True
            if rank == 1:
                return Failed()
            release.wait(20)  # rank 0 waits for rank 1 "in the all-reduce"
            return "late"
        return step

    servers, addresses = serve(handler, 2)
    stream = StepStream(addresses, timeout_s=10, is_failure=lambda value: isinstance(value, Failed))
    try:
        start = time.monotonic()
        answers = stream.run([1, 1], timeout_s=15)
        assert time.monotonic() - start < 5
        assert answers[0] is None and isinstance(answers[1], Failed)
    finally:
        release.set()
        stream.close()
        close_all(servers)


@pytest.mark.timeout(30)
def test_a_hung_replica_times_out_and_a_dead_one_names_its_rank() -> None:
    def handler(rank: int) -> Any:
        def step(args: Any) -> Any:
            if args == "hang" and rank == 1:
                time.sleep(3)
            return args
        return step

    servers, addresses = serve(handler, 2)
    stream = StepStream(addresses, timeout_s=10)
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"ranks \[1\] did not answer within 0.5s"):
            stream.run(["hang", "hang"], timeout_s=0.5)
        assert time.monotonic() - start < 2
    finally:
        stream.close()
        close_all(servers)

    # A replica whose process is gone: its end of the stream closes.
    servers, addresses = serve(handler, 2)
    stream = StepStream(addresses, timeout_s=10)
    try:
        stream._conns[1].shutdown(socket.SHUT_WR)  # the server sees EOF and closes its end, as a dead process would
        time.sleep(0.2)
        with pytest.raises(StepStreamError) as info:
            stream.run(["a", "b"], timeout_s=5)
        assert info.value.rank == 1
    finally:
        stream.close()
        close_all(servers)


@pytest.mark.timeout(30)
def test_a_stalled_answer_times_out_at_the_timeout_of_the_run_that_waits_for_it() -> None:
    """The sockets keep their timeout between steps (set only when it changes): a later run's shorter timeout must
    still bound a stall in the middle of an answer."""
    listener = socket.create_server(("127.0.0.1", 0))

    def replica() -> None:  # answers the warm-up and one step, then sends a third of a frame header and stalls
        conn, _ = listener.accept()
        with conn:
            send_message(conn, recv_message(conn))
            send_message(conn, recv_message(conn))
            recv_message(conn)
            conn.sendall(b"\0" * 4)
            time.sleep(3)

    thread = threading.Thread(target=replica, daemon=True)
    thread.start()
    stream = StepStream([listener.getsockname()], timeout_s=10)
    try:
        assert stream.run(["x"], timeout_s=10) == ["x"]
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"rank 0 sent part of its answer and then nothing for 0.5s"):
            stream.run(["y"], timeout_s=0.5)
        assert time.monotonic() - start < 2
    finally:
        stream.close()
        listener.close()
        thread.join(timeout=5)


@pytest.mark.timeout(30)
def test_an_unpicklable_answer_reaches_the_driver_as_a_failure() -> None:
    def handler(rank: int) -> Any:
        return lambda args: True if args is None else threading.Lock()

    servers, addresses = serve(handler, 1, failure=lambda err: Failed())
    stream = StepStream(addresses, timeout_s=10, is_failure=lambda value: isinstance(value, Failed))
    try:
        (answer,) = stream.run(["x"], timeout_s=5)
        assert isinstance(answer, Failed)
        assert stream.run([None], timeout_s=5) == [True]  # the stream is still usable
    finally:
        stream.close()
        close_all(servers)


def test_a_stream_nobody_connects_to_stops_listening_and_the_server_keeps_working() -> None:
    server = StepServer(lambda args: args)
    host, port = server.listen("127.0.0.1", accept_timeout_s=0.2)
    time.sleep(0.5)
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=2)
    assert server.run(lambda: "still here") == "still here"
    close_all([server])
    with pytest.raises(RuntimeError, match="closed"):
        server.run(lambda: None)


def test_stream_errors_survive_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(StepStreamError(3, "step stream of rank 3 closed")))
    assert isinstance(err, ConnectionError) and err.rank == 3 and "rank 3" in str(err)


def test_spin_setting_is_microseconds_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPIN_ENV, raising=False)
    assert spin_seconds() == 0.0
    monkeypatch.setenv(SPIN_ENV, " 250 ")
    assert spin_seconds() == pytest.approx(250e-6)
    for bad in ("abc", "-1", "2.5", "100001"):
        monkeypatch.setenv(SPIN_ENV, bad)
        with pytest.raises(ValueError, match=f"{SPIN_ENV} must be an integer number of microseconds.*{bad!r}"):
            spin_seconds()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("spin_us", [None, "100000"], ids=["sleeping", "polling"])
def test_a_polling_server_looks_for_the_next_step_without_sleeping(
        spin_us: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    set_spin(monkeypatch, spin_us)
    server = StepServer(lambda args: args)
    timeouts: list[float | None] = []
    select = server._selector.select

    def counting(timeout: float | None = None) -> Any:
        timeouts.append(timeout)
        return select(timeout)

    server._selector.select = counting  # type: ignore[method-assign]
    stream = StepStream([server.listen("127.0.0.1", accept_timeout_s=10)], timeout_s=10)
    try:
        assert stream.run([7], timeout_s=10) == [7]
        time.sleep(0.05)  # inside the 0.1 s polling window after the answer
        polls = timeouts.count(0.0)
        if spin_us is None:
            assert polls == 0, timeouts[-5:]  # it sleeps in select until the next message
        else:
            assert polls >= 3, timeouts[-5:]
        assert stream.run([8], timeout_s=10) == [8]
    finally:
        stream.close()
        close_all([server])


@pytest.mark.timeout(30)
def test_a_reply_is_sent_before_its_follow_up_runs_and_the_next_step_waits_for_it() -> None:
    sent_first = threading.Event()  # set by the driver once it holds the answer
    events: list[str] = []

    def step(args: Any) -> Any:
        if args is None:
            return True
        events.append(f"step {args}")

        def then() -> None:
            # The follow-up of step 1 can only finish once the driver has step 1's answer.
            assert args != 1 or sent_first.wait(10), "the answer was not sent before the follow-up"
            time.sleep(0.05)
            events.append(f"then {args}")

        return StepReply({"step": args}, then)

    server = StepServer(step)
    stream = StepStream([server.listen("127.0.0.1", accept_timeout_s=10)], timeout_s=10)
    try:
        assert stream.run([1], timeout_s=10) == [{"step": 1}]
        sent_first.set()
        assert stream.run([2], timeout_s=10) == [{"step": 2}]
        assert server.run(lambda: list(events)) == ["step 1", "then 1", "step 2", "then 2"]  # handed-over calls too
    finally:
        stream.close()
        close_all([server])


def test_early_answer_setting_is_0_or_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EARLY_ANSWER_ENV, raising=False)
    assert early_answers()
    monkeypatch.setenv(EARLY_ANSWER_ENV, "0")
    assert not early_answers()
    monkeypatch.setenv(EARLY_ANSWER_ENV, " 1 ")
    assert early_answers()
    for bad in ("yes", "2", "false"):
        monkeypatch.setenv(EARLY_ANSWER_ENV, bad)
        with pytest.raises(ValueError, match=f"{EARLY_ANSWER_ENV} must be 1 .* or 0 .*{bad!r}"):
            early_answers()
