"""What one round trip over fe_ray's step stream costs, split into the wake-ups, the framing and the numpy payload.

The step probe (``throughput.py``'s phases) times each hop of a real step: the driver's send to the replica's first
op, and the replica's answer to the driver's read. This script takes the hop apart between two processes on this
machine, with nothing else running: each case keeps a server process that answers every message it receives, and the
driver times round trips, each after a busy gap (``--gap-us``, a step's compute) so that neither end is still
running when the next message comes::

    python -m benchmarks.stream_rtt [--model lenet|mlp|resnet] [--gap-us 500] [--round-trips 2000]

Cases:
    raw_polled  8 bytes each way on plain sockets, both ends polling (no sleep): the kernel's loopback path alone
    raw_blocking  the same, both ends blocking in ``recv`` as fe_ray's stream does by default: adds two wake-ups
    raw_batch  as raw_blocking, but the driver sends as many bytes as frame_batch's arrays hold and the server reads
        them into one buffer it reuses: the bytes' way through the kernel, without pickling or allocating
    frame_small  a Python-only message framed by fe_ray's ``send_message`` / ``recv_message`` (pickle protocol 5,
        out-of-band buffers), answered by a Python float
    frame_batch  a step message of the model's batch (numpy ``x``, ``y`` of ``batch_size`` rows, shaped as the
        driver sends a replica's slice) answered by the loss as a 0-d float32 array, as a replica answers

So ``raw_blocking - raw_polled`` is the wake-ups, ``frame_small - raw_blocking`` fe_ray's framing,
``raw_batch - raw_blocking`` the payload's bytes through the kernel and ``frame_batch - frame_small`` the whole
numpy payload (those bytes, their pickling and buffers, and the answer's 0-d float32 array). Medians of each
repeat's round trips, alternating repeats.
"""

from __future__ import annotations

import multiprocessing
import socket
import statistics
import sys
import time
from typing import Any

import numpy as np

from benchmarks import harness
from benchmarks.models import MODELS, PROBE_MODELS, synthetic_data
from benchmarks.throughput import DEFAULTS
from fe_ray.allocator import tune_process_malloc
from fe_ray.distributed.sockets import PeerClosed, recv_exactly_into, set_nodelay
from fe_ray.distributed.step_stream import recv_message, send_message

CASES = ("raw_polled", "raw_blocking", "raw_batch", "frame_small", "frame_batch")
_PING = b"p" * 8


def _recv_raw(conn: socket.socket, polled: bool) -> bytes:
    while True:
        try:
            return conn.recv(64)
        except BlockingIOError:  # polled: nothing yet, look again
            if not polled:
                raise


def serve(case: str, ports: Any, nbytes: int, malloc: bool) -> None:
    """The answering end (a spawned process): accept one connection and answer each message until it closes.
    ``nbytes``: the size of raw_batch's messages. ``malloc``: apply fe_ray's malloc settings, as a replica has."""
    if malloc:
        tune_process_malloc()
    listener = socket.create_server(("127.0.0.1", 0))
    ports.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    set_nodelay(conn)
    if case == "raw_batch":
        view = memoryview(bytearray(nbytes))
        while True:
            try:
                recv_exactly_into(conn, view)
            except PeerClosed:
                return
            conn.sendall(_PING)
    if case.startswith("raw"):
        conn.setblocking(case != "raw_polled")
        while _recv_raw(conn, case == "raw_polled"):
            conn.sendall(_PING)
        return
    # A replica answers with its outputs as numpy arrays, a scalar loss as a 0-d array (Replica.run_step).
    answer: Any = 1.0 if case == "frame_small" else {"ce": np.asarray(np.float32(1.0))}
    while True:
        try:
            recv_message(conn)
        except (EOFError, ConnectionError):
            return
        send_message(conn, answer)


class Case:
    """One case's server process and connection; :meth:`measure` returns the median round trip in microseconds."""

    def __init__(self, case: str, message: Any, gap_s: float, round_trips: int, malloc: bool) -> None:
        context = multiprocessing.get_context("spawn")  # a clean process, as a replica's is
        ports = context.Queue()
        nbytes = len(message) if isinstance(message, bytes) else 0
        self.process = context.Process(target=serve, args=(case, ports, nbytes, malloc), daemon=True)
        self.process.start()
        self.conn = socket.create_connection(("127.0.0.1", ports.get(timeout=60)), timeout=60)
        set_nodelay(self.conn)
        self.case, self.message, self.gap_s, self.round_trips = case, message, gap_s, round_trips
        if case == "raw_polled":
            self.conn.setblocking(False)
        self.measure()  # warm-up

    def _round_trip(self) -> None:
        if self.case.startswith("raw"):
            self.conn.sendall(self.message)
            _recv_raw(self.conn, self.case == "raw_polled")
        else:
            send_message(self.conn, self.message)
            recv_message(self.conn)

    def measure(self) -> float:
        times = []
        for _ in range(self.round_trips):
            start = time.perf_counter()
            self._round_trip()
            times.append(time.perf_counter() - start)
            end = time.perf_counter() + self.gap_s
            while time.perf_counter() < end:  # the step's compute: busy, so this end does not sleep either
                pass
        return 1e6 * statistics.median(times)

    def close(self) -> None:
        self.conn.close()
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()


def messages(model: str, batch_size: int) -> dict[str, Any]:
    """Each case's message: the framed ones as the driver's step message (slice, samples, batch size, rates)."""
    batch = synthetic_data(model, batch_size)
    raw = b"b" * (batch["x"].nbytes + batch["y"].nbytes)
    return {"raw_polled": _PING, "raw_blocking": _PING, "raw_batch": raw,
            "frame_small": ({"x": b"ab"}, batch_size, batch_size, None),
            "frame_batch": (batch, batch_size, batch_size, None)}


def main(argv: list[str] | None = None) -> int:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", choices=(*MODELS, *PROBE_MODELS), default="lenet",
                        help="whose batch frame_batch sends (its benchmark batch size)")
    parser.add_argument("--gap-us", type=float, default=500.0, help="busy time between round trips")
    parser.add_argument("--round-trips", type=int, default=0, help="per repeat (default 2000, quick 50)")
    args = parser.parse_args(argv)
    # Both ends with the malloc settings of fe_ray's driver and replicas (--glibc-defaults: glibc's, for both).
    malloc_settings = harness.set_process_malloc(args.glibc_defaults)
    malloc = malloc_settings == "fe_ray.allocator settings"
    repeats = args.repeats or (2 if args.quick else 5)
    round_trips = args.round_trips or (50 if args.quick else 2000)
    batch_size = DEFAULTS[args.model][0]
    payloads = messages(args.model, batch_size)
    cases = {name: Case(name, payloads[name], args.gap_us * 1e-6, round_trips, malloc) for name in CASES}
    try:
        series = harness.alternate({name: case.measure for name, case in cases.items()}, repeats, "us",
                                   higher_is_better=False)
    finally:
        for case in cases.values():
            case.close()
    medians = {name: s.median for name, s in series.items()}
    print(f"\n== round trips between two processes, {args.model} batch {batch_size} "
          f"({payloads['frame_batch'][0]['x'].nbytes:,} bytes of x), {args.gap_us:g} us busy between them, "
          f"{round_trips} per repeat, {repeats} repeats, malloc: {malloc_settings}")
    print(harness.series_table(series))
    split = {"wake_ups_us": medians["raw_blocking"] - medians["raw_polled"],
             "framing_us": medians["frame_small"] - medians["raw_blocking"],
             "payload_bytes_us": medians["raw_batch"] - medians["raw_blocking"],
             "payload_us": medians["frame_batch"] - medians["frame_small"]}
    print("per round trip: " + ", ".join(f"{key} {value:,.1f}" for key, value in split.items()))
    payload = {"benchmark": "stream_rtt", "environment": harness.environment(1, "cpu"), "args": vars(args),
               "median_round_trip_us": medians, "split_us": split,
               "series": {name: s.to_json() for name, s in series.items()}}
    harness.save_results("stream_rtt" + ("_quick" if args.quick else ""), payload, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
