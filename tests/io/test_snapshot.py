"""SnapshotBuffers: exact copies into buffers reused between snapshots, split over threads."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from fe_ray.io import snapshot
from fe_ray.io.snapshot import SnapshotBuffers


def _state(scale: float = 1.0) -> dict:
    return {"model": {"w": np.arange(12, dtype=np.float32).reshape(3, 4) * scale, "b": np.float32(scale)[()]},
            "optimizer": {0: {"step": 3, "m": (np.full(5, scale), [np.zeros(2, np.int64) + int(scale)])},
                          "lr": 0.1, "name": None}}


def _assert_equal_copy(copied: dict, source: dict) -> None:
    np.testing.assert_array_equal(copied["model"]["w"], source["model"]["w"])
    assert not np.shares_memory(copied["model"]["w"], source["model"]["w"])
    moments = copied["optimizer"][0]["m"]
    assert isinstance(moments, tuple) and isinstance(moments[1], list)
    np.testing.assert_array_equal(moments[0], source["optimizer"][0]["m"][0])
    np.testing.assert_array_equal(moments[1][0], source["optimizer"][0]["m"][1][0])
    assert copied["optimizer"]["lr"] == 0.1 and copied["optimizer"]["name"] is None
    assert copied["optimizer"][0]["step"] == 3


@pytest.mark.parametrize("threads", [1, 2])
def test_copy_is_exact_and_independent_of_the_source(threads: int) -> None:
    source = _state()
    copied = SnapshotBuffers(threads).copy(source)
    _assert_equal_copy(copied, source)
    source["model"]["w"] += 100  # training goes on: the snapshot must not change
    np.testing.assert_array_equal(copied["model"]["w"], np.arange(12, dtype=np.float32).reshape(3, 4))


def test_buffers_are_reused_only_when_asked_and_when_they_fit() -> None:
    buffers = SnapshotBuffers(1)
    first = buffers.copy(_state(1.0))
    second = buffers.copy(_state(2.0))  # reuse=True: the first snapshot's memory is overwritten
    assert np.shares_memory(first["model"]["w"], second["model"]["w"])
    np.testing.assert_array_equal(first["model"]["w"], _state(2.0)["model"]["w"])
    third = buffers.copy(_state(3.0), reuse=False)
    assert not np.shares_memory(third["model"]["w"], second["model"]["w"])
    np.testing.assert_array_equal(second["model"]["w"], _state(2.0)["model"]["w"])
    # A changed shape or dtype gets a new buffer; the others are still reused.
    changed = _state(4.0)
    changed["model"]["w"] = changed["model"]["w"].astype(np.float64)
    fourth = buffers.copy(changed)
    assert fourth["model"]["w"].dtype == np.float64
    assert not np.shares_memory(fourth["model"]["w"], third["model"]["w"])
    assert np.shares_memory(fourth["optimizer"][0]["m"][0], third["optimizer"][0]["m"][0])
    assert isinstance(fourth["model"]["b"], np.float32)  # numpy scalars are immutable: kept, not buffered
    assert buffers.nbytes == sum(a.nbytes for a in (fourth["model"]["w"], fourth["optimizer"][0]["m"][0],
                                                   fourth["optimizer"][0]["m"][1][0]))
    buffers.clear()
    assert buffers.nbytes == 0


def test_large_and_non_contiguous_arrays_are_copied_in_chunks(monkeypatch) -> None:
    monkeypatch.setattr(snapshot, "CHUNK_BYTES", 64)  # 16 float32 per task: many tasks over 2 threads
    rng = np.random.default_rng(0)
    big = rng.standard_normal(1001).astype(np.float32)
    strided = rng.standard_normal((40, 30))[:, ::3]  # not contiguous: one task
    buffers = SnapshotBuffers(2)
    for _ in range(2):  # fresh buffers, then reused ones
        copied = buffers.copy({"big": big, "strided": strided, "scalar": np.float64(2.5)})
        np.testing.assert_array_equal(copied["big"], big)
        np.testing.assert_array_equal(copied["strided"], strided)
        assert copied["scalar"] == 2.5
        big = big * 2
    buffers.clear()


def test_a_failing_copy_raises_after_every_task_finished(monkeypatch) -> None:
    monkeypatch.setattr(snapshot, "CHUNK_BYTES", 64)
    buffers = SnapshotBuffers(2)
    buffers.copy({"x": np.zeros(100, np.float32)})
    calls = []
    original = np.copyto

    def flaky(dst, src, casting="same_kind"):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("simulated")
        original(dst, src, casting=casting)
    monkeypatch.setattr(snapshot.np, "copyto", flaky)
    with pytest.raises(MemoryError, match="simulated"):
        buffers.copy({"x": np.ones(100, np.float32)})
    assert len(calls) == 7  # 400 bytes in 64-byte tasks: all of them ran before the error was raised
    buffers.clear()


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_thread_count_is_rejected(threads) -> None:
    with pytest.raises(ValueError, match="threads must be a positive int"):
        SnapshotBuffers(threads)


def test_pickled_buffers_start_empty() -> None:
    buffers = SnapshotBuffers(2)
    buffers.copy(_state())
    clone = pickle.loads(pickle.dumps(buffers))
    assert clone.threads == 2 and clone.nbytes == 0
    _assert_equal_copy(clone.copy(_state()), _state())
    buffers.clear()


def test_a_snapshot_that_does_not_fit_in_memory_fails_before_allocating(monkeypatch) -> None:
    buffers = SnapshotBuffers(1)
    state = {"w": np.ones(1000), "v": np.ones(10)}  # 8,080 bytes of new buffers
    monkeypatch.setattr(snapshot, "available_memory", lambda: 16_000)  # half of it: 8,000 < 8,080
    with pytest.raises(snapshot.SnapshotTooLargeError, match="needs 0.00 GiB") as info:
        buffers.copy(state)
    assert (info.value.needed, info.value.available) == (8080, 16_000)
    assert buffers.nbytes == 0  # nothing was allocated
    restored = pickle.loads(pickle.dumps(info.value))
    assert (restored.needed, restored.available) == (8080, 16_000)
    monkeypatch.setattr(snapshot, "available_memory", lambda: 16_160)  # exactly twice the need: fits
    first = buffers.copy(state)
    # Reused buffers need no new memory, so the next copy fits even with almost nothing available.
    monkeypatch.setattr(snapshot, "available_memory", lambda: 1)
    assert np.shares_memory(buffers.copy(state)["w"], first["w"])
    monkeypatch.setattr(snapshot, "available_memory", lambda: None)  # unknown (not Linux): no check
    buffers.copy({"other": np.ones(5000)})


def test_available_memory_is_read_from_the_kernel() -> None:
    available = snapshot.available_memory()
    if not os.path.exists("/proc/meminfo"):
        assert available is None
    else:
        assert isinstance(available, int) and available > 0


class _Deferred(snapshot.DeferredCopy):
    """A stand-in for a device tensor: copies its value into the host buffer it is given, and counts the calls."""

    def __init__(self, value: np.ndarray) -> None:
        self.value, self.shape, self.dtype, self.copies = value, value.shape, value.dtype, 0

    def copy_to(self, out: np.ndarray) -> None:
        assert out.shape == self.shape and out.dtype == self.dtype and out.flags.c_contiguous
        out[...] = self.value
        self.copies += 1


@pytest.mark.parametrize("threads", [1, 2])
def test_deferred_copies_land_in_kept_buffers_reused_by_the_next_snapshot(threads: int) -> None:
    buffers = SnapshotBuffers(threads)
    big = _Deferred(np.arange(3 * snapshot.CHUNK_BYTES // 4, dtype=np.float32))  # several chunks: still one copy
    state = {"model": {"w": _Deferred(np.ones((2, 3), np.float32)), "big": big}, "plain": np.zeros(4), "lr": 0.1}
    first = buffers.copy(state)
    assert isinstance(first["model"]["w"], np.ndarray) and big.copies == 1
    np.testing.assert_array_equal(first["model"]["w"], np.ones((2, 3)))
    np.testing.assert_array_equal(first["model"]["big"], big.value)
    assert first["lr"] == 0.1 and buffers.nbytes == 24 + big.nbytes + 32
    state["model"]["w"].value = np.full((2, 3), 7, np.float32)  # the device value changed: the next snapshot
    second = buffers.copy(state)
    assert np.shares_memory(first["model"]["w"], second["model"]["w"])  # warm memory, no fresh pages
    np.testing.assert_array_equal(second["model"]["w"], np.full((2, 3), 7))


def test_deferred_copies_count_against_available_memory(monkeypatch) -> None:
    monkeypatch.setattr(snapshot, "available_memory", lambda: 100)
    with pytest.raises(snapshot.SnapshotTooLargeError):
        SnapshotBuffers(1).copy({"w": _Deferred(np.zeros(64, np.float32))})  # 256 bytes > half of 100
