"""The step stream's frames: every array comes back bit for bit, with its dtype, shape and flags."""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

import numpy as np
import pytest

from fe_ray.distributed.framing import recv_message, send_message


def round_trip(obj: Any) -> Any:
    left, right = socket.socketpair()
    with left, right:
        send_message(left, obj)
        return recv_message(right)


def frame(obj: Any) -> tuple[bytes, int]:
    """The pickle of ``obj``'s frame and its number of out-of-band buffers, as they go on the wire."""
    left, right = socket.socketpair()
    with left, right:
        send_message(left, obj)
        left.shutdown(socket.SHUT_WR)
        raw = b""
        while chunk := right.recv(1 << 20):
            raw += chunk
    size, count = struct.unpack("!QI", raw[:12])
    start = 12 + 8 * count
    return raw[start:start + size], count


def assert_same(got: Any, sent: np.ndarray) -> None:
    assert type(got) is type(sent)
    assert got.dtype == sent.dtype and got.shape == sent.shape
    if sent.dtype.kind == "O":
        assert got.tolist() == sent.tolist()
    else:
        assert got.tobytes() == sent.tobytes()  # bit for bit: NaN payloads, -0.0, byte order


DTYPES = ["float16", "float32", "float64", "longdouble", "int8", "uint8", "int16", "uint16", "int32", "uint32",
          "int64", "uint64", "bool", "complex64", "complex128", "clongdouble", ">f4", ">i8", "<M8[ns]", "<m8[s]",
          "<U3", "|S2"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4), (0, 5)], ids=lambda s: f"shape{s}")
def test_arrays_of_every_number_type_come_back_exact_and_writable(dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    sent = np.asarray(rng.standard_normal(shape) * 1e3).astype(dtype)
    if sent.size and dtype.startswith(("float", ">f")):
        sent.reshape(-1)[0] = -0.0
    got = round_trip({"x": sent})["x"]
    assert_same(got, sent)
    assert got.flags.writeable and got.flags.aligned


def test_a_0d_loss_travels_inside_the_pickle_without_numpy_dtype_objects() -> None:
    # The loss each replica answers with: no out-of-band buffer (one read fewer) and no dtype object to rebuild.
    loss = np.asarray(np.float32(0.123456789))
    data, buffers = frame({"ce": loss})
    assert buffers == 0 and b"dtype" not in data
    got = round_trip({"ce": loss})["ce"]
    assert_same(got, loss)
    for bits in (0xFFC00001, 0x7F800001):  # a negative quiet NaN with a payload; a signaling NaN
        nan = np.frombuffer(struct.pack("<I", bits), np.float32).reshape(()).copy()
        assert_same(round_trip(nan), nan)


def test_a_batch_travels_as_raw_bytes_out_of_band() -> None:
    batch = {"x": np.ones((32, 1, 28, 28), np.float32), "y": np.arange(32)}
    data, buffers = frame((batch, 32, 32, None))
    assert buffers == 2 and b"dtype" not in data and len(data) < 200


def test_other_arrays_keep_numpys_own_pickling() -> None:
    strided = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    fortran = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    objects = np.array([{"a": 1}, "text", None], dtype=object)
    structured = np.array([(1, 2.5)], dtype=[("n", "<i4"), ("v", "<f8")])
    for sent in (strided, fortran, objects, structured, np.array(np.datetime64("2026-11-26T12:00", "m"))):
        got = round_trip(sent)
        assert_same(got, sent)
    assert round_trip(fortran).flags.f_contiguous
    masked = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
    got = round_trip(masked)
    assert isinstance(got, np.ma.MaskedArray) and got.mask.tolist() == [False, True, False]


def test_read_only_arrays_stay_read_only_and_numpy_scalars_keep_their_type() -> None:
    frozen = np.arange(4, dtype=np.float32)
    frozen.flags.writeable = False
    got = round_trip([frozen, np.float32(2.5), np.int64(3)])
    assert not got[0].flags.writeable and got[0].tolist() == [0, 1, 2, 3]
    assert type(got[1]) is np.float32 and type(got[2]) is np.int64 and got[1:] == [2.5, 3]


@pytest.mark.parametrize("buffers", [1, 0])
def test_a_frame_cut_inside_its_body_is_a_connection_error(buffers: int) -> None:
    left, right = socket.socketpair()
    with right:
        with left:
            left.sendall(struct.pack("!QI", 100, buffers) + struct.pack("!Q", 400) * buffers + b"p" * 30)
        with pytest.raises(ConnectionError, match=f"closed after 30 of {100 + 400 * buffers} bytes of a frame's body"):
            recv_message(right)


def test_a_frames_pickle_is_plain_protocol_5_given_its_buffers() -> None:
    # The frame's pickle is ordinary protocol 5: pickle.loads rebuilds it given the buffers, without fe_ray's reader.
    sent = {"x": np.arange(6, dtype=np.int16).reshape(2, 3), "loss": np.asarray(np.float64(0.5))}
    data, buffers = frame(sent)
    assert buffers == 1
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(data)  # an out-of-band buffer is needed
    got = pickle.loads(data, buffers=[sent["x"].tobytes()])
    assert_same(got["x"], sent["x"])
    assert_same(got["loss"], sent["loss"])
