"""In-memory snapshots of model states into reusable buffers, copied by several threads.

A checkpoint written in the background needs its own copy of the weights and optimizer state (training changes the
live ones at the next step), and taking that copy is the part of the save that stops training. Two things make a
naive copy (``tensor.numpy().copy()``, array by array) slower than it needs to be:

* Fresh memory: every copy allocates the whole state anew, and the kernel maps and zeroes each new page on its
  first touch. On the virtual machines measured that cost 0.2-3 s per GB, more than the copy itself (the checkpoint
  benchmark's in-process "thread" save blocked training for 2.8 s on 1.2 GB where one warm copy takes 0.36 s).
  :class:`SnapshotBuffers` keeps the buffers of the last snapshot and copies the next one into them.
* One thread: a single memcpy does not saturate memory bandwidth. The copy is split into chunks spread over a few
  threads (numpy releases the GIL while it copies), as Ray does for large ``ray.put`` calls.

Large buffers start at a page boundary, so that a direct-I/O writer (:mod:`fe_ray.io.direct_write`) can write
them to disk without copying them once more into its own aligned staging memory.

Buffers are reused only when the caller says the previous snapshot is no longer read (:meth:`SnapshotBuffers.copy`
with ``reuse=True``), e.g. once the background write of the previous checkpoint has finished.

State on an accelerator enters as :class:`DeferredCopy` leaves (a backend's ``get_state(model, deferred=True)``):
each copies itself from the device straight into its kept host buffer. Without them, every snapshot of a GPU model
came to the host in fresh memory first, which paid the page faults described above on every save (on one H200 the
in-process background save blocked training for 1.27 times the reference copy).
"""

from __future__ import annotations

import mmap
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from fe_ray.util import map_nested

#: Bytes per copy task: large enough that a task's overhead (~10 us) is noise, small enough to balance threads.
CHUNK_BYTES = 8 << 20
#: At most this many copy threads: memory bandwidth, not cores, limits a copy beyond a few threads.
MAX_THREADS = 4
#: Buffers of at least this many bytes start at a multiple of :data:`PAGE` (smaller ones: not worth the padding).
ALIGNED_MIN_BYTES = 64 << 10
#: Alignment of large buffers: the memory page, and at least the 4 KiB that direct I/O asks for.
PAGE = max(mmap.PAGESIZE, 4096)
#: A snapshot may allocate at most this fraction of the memory the system reports available.
MAX_AVAILABLE_FRACTION = 0.5


class DeferredCopy(ABC):
    """A state leaf that is not a host array yet (e.g. a tensor on a GPU): its host shape and dtype, and how to copy
    it into a host array of that shape and dtype. It refers to live memory: copy it before training goes on."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes of the host copy."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @abstractmethod
    def copy_to(self, out: np.ndarray) -> None:
        """Copy the value into ``out`` (C-contiguous, of :attr:`shape` and :attr:`dtype`)."""


#: The leaves :class:`SnapshotBuffers` copies; everything else is kept as it is.
_COPIED = (np.ndarray, DeferredCopy)


class SnapshotTooLargeError(MemoryError):
    """Copying the snapshot would allocate more than :data:`MAX_AVAILABLE_FRACTION` of the available memory."""

    def __init__(self, needed: int, available: int) -> None:
        super().__init__(f"An in-memory snapshot needs {needed / 2**30:.2f} GiB of new buffers, but only "
                         f"{available / 2**30:.2f} GiB of memory is available.")
        self.needed = needed
        self.available = available

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.needed, self.available)


class SnapshotBuffers:
    """Copies nested model states (dicts / lists / tuples of numpy arrays) into buffers kept between snapshots.

    Args:
        threads: Copy threads (None: the number of usable cores, at most :data:`MAX_THREADS`). 1 copies on the
            calling thread.
    """

    def __init__(self, threads: int | None = None) -> None:
        if threads is None:
            threads = min(MAX_THREADS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else (os.cpu_count() or 1))
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"SnapshotBuffers threads must be a positive int or None, got {threads!r}.")
        self.threads = threads
        self._buffers: list[np.ndarray] = []
        self._executor: ThreadPoolExecutor | None = None

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept buffers."""
        return sum(buffer.nbytes for buffer in self._buffers)

    def copy(self, state: Any, reuse: bool = True) -> Any:
        """A copy of ``state`` with every numpy array and :class:`DeferredCopy` copied into a host array (other
        leaves are returned as they are).

        Args:
            state: Nested dicts / lists / tuples whose array leaves may be views of live memory, or deferred copies
                of device memory.
            reuse: Copy into the buffers of the previous snapshot (which then changes): only when nothing reads
                that snapshot any more. False allocates new buffers (and keeps them for the next call).

        Returns:
            The same structure holding the copies.

        Raises:
            SnapshotTooLargeError: If the new buffers would take more than :data:`MAX_AVAILABLE_FRACTION` of the
                memory the system reports available (nothing is allocated then).
        """
        old = self._buffers if reuse else []
        sources: list[np.ndarray | DeferredCopy] = []
        map_nested(lambda leaf: sources.append(leaf) if isinstance(leaf, _COPIED) else None, state)
        # Check before allocating anything: a snapshot that does not fit must fail here, not push the machine into
        # swapping or the OOM killer halfway through a copy.
        fresh = sum(source.nbytes for index, source in enumerate(sources) if not _fits(old, index, source))
        available = available_memory()
        if fresh and available is not None and fresh > MAX_AVAILABLE_FRACTION * available:
            raise SnapshotTooLargeError(fresh, available)
        new = [old[index] if _fits(old, index, source) else _empty(source.shape, source.dtype)
               for index, source in enumerate(sources)]
        self._run([task for target, source in zip(new, sources) for task in _copy_tasks(target, source)])
        self._buffers = new
        copies = iter(new)  # map_nested visits the leaves in the same order again
        return map_nested(lambda leaf: next(copies) if isinstance(leaf, _COPIED) else leaf, state)

    def clear(self) -> None:
        """Free the kept buffers and stop the copy threads."""
        self._buffers = []
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _run(self, tasks: list[Callable[[], None]]) -> None:
        if self.threads == 1 or len(tasks) < 2:
            for task in tasks:
                task()
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="fe_ray-snapshot")
        futures = [self._executor.submit(task) for task in tasks]
        wait(futures)  # all of them, even if one failed: no task may still write into a buffer afterwards
        for future in futures:
            future.result()

    def __getstate__(self) -> dict[str, Any]:
        # Buffers and threads are a cache: a copy of this object starts empty.
        return {"threads": self.threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["threads"])  # type: ignore[misc]


def _fits(old: list[np.ndarray], index: int, source: np.ndarray | DeferredCopy) -> bool:
    """Whether the kept buffer at ``index`` has exactly ``source``'s shape and dtype (and can take its copy)."""
    return index < len(old) and old[index].shape == source.shape and old[index].dtype == source.dtype


def available_memory() -> int | None:
    """Bytes of memory the system reports available (Linux ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array; large ones start at a page boundary (a view into a slightly larger allocation)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < ALIGNED_MIN_BYTES:
        return np.empty(shape, dtype=dtype)
    raw = np.empty(nbytes + PAGE, dtype=np.uint8)
    offset = -raw.ctypes.data % PAGE
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


def _copy_tasks(target: np.ndarray, source: np.ndarray | DeferredCopy) -> list[Callable[[], None]]:
    """Copy ``source`` into ``target`` as tasks of at most :data:`CHUNK_BYTES` each (one task if not contiguous,
    and one per deferred copy: a device copies one transfer faster than several small ones)."""
    if isinstance(source, DeferredCopy):
        return [lambda: source.copy_to(target)]
    if source.ndim == 0 or not source.flags.c_contiguous or source.nbytes <= CHUNK_BYTES:
        return [lambda: np.copyto(target, source, casting="no")]
    flat_target, flat_source = target.reshape(-1), source.reshape(-1)
    step = max(1, CHUNK_BYTES // source.itemsize)
    return [lambda start=start: np.copyto(flat_target[start:start + step], flat_source[start:start + step],
                                          casting="no")
            for start in range(0, flat_source.size, step)]


__all__ = ["ALIGNED_MIN_BYTES", "CHUNK_BYTES", "MAX_AVAILABLE_FRACTION", "MAX_THREADS", "PAGE", "DeferredCopy",
           "SnapshotBuffers", "SnapshotTooLargeError", "available_memory"]
