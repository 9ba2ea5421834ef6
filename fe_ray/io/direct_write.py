"""Sequential file writer that bypasses the OS page cache (``O_DIRECT``) for large checkpoint files.

A buffered write of a 1.2 GB checkpoint costs the writing process 0.5-3 s of kernel CPU (page-cache allocation,
copies, reclaim under memory pressure) on top of the disk time, and that CPU is taken from the training threads
when the checkpoint is written in the background. With ``O_DIRECT`` the device reads the data straight from the
process's memory; the only CPU left is one copy into a page-aligned staging buffer (``O_DIRECT`` needs aligned
addresses, lengths and offsets), and not even that for data that is aligned already (the snapshot buffers of an
in-process background save, whose arrays start at aligned file offsets: see ``save_npz``). DeepSpeed's fast
checkpoint writer uses the same technique.

Only for local disk filesystems on Linux (ext4, XFS, btrfs, ...): network and distributed filesystems (NFS,
CIFS, FUSE mounts) implement ``O_DIRECT`` as uncached synchronous round trips, which can be slower than their own
buffering, and tmpfs refuses it. Everything else gets the filesystem's ordinary writer from
:func:`open_sequential_writer`. ``FE_RAY_DIRECT_IO=0`` turns direct I/O off, ``=1`` tries it on any local path.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import IO, Any

import numpy as np
from fsspec.implementations.local import LocalFileSystem

ALIGN = 4096  # the largest logical block size of common devices; a multiple of every smaller one
DEFAULT_CHUNK_BYTES = 16 << 20
DIRECT_IO_ENV = "FE_RAY_DIRECT_IO"
DIRECT_IO_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs"})


class DirectFileWriter(io.RawIOBase):
    """Write-only, append-only binary file opened with ``O_DIRECT``, for one large sequential write.

    Bytes are gathered in two page-aligned staging buffers: while one I/O thread writes a full buffer to the device
    (``os.write`` releases the GIL), the caller fills the other, so copying and the device's transfer overlap.
    Data that is already aligned (its address a multiple of :data:`ALIGN`, and everything before it filling whole
    blocks of the file: see :attr:`alignment`) skips the staging copy: its aligned part is written from the caller's
    memory before :meth:`write` returns.
    :meth:`close` writes the zero-padded tail and truncates the file to its true length. Not seekable: writers that
    would patch earlier bytes (``zipfile`` patches local headers) see that and write forward only (``zipfile`` then
    adds data descriptors, which every zip reader understands).

    If the filesystem accepts ``O_DIRECT`` at open time but rejects an aligned write with ``EINVAL``, the file
    falls back to buffered writes and goes on (the data stays correct; only the speed-up is lost). Any other write
    error is raised by the next :meth:`write` or by :meth:`close`, which closes the file either way.

    Args:
        path: Local file path; created or truncated.
        chunk_bytes: Size of each staging buffer, a multiple of :data:`ALIGN`.

    Raises:
        OSError: If the file cannot be opened (``EINVAL`` when the filesystem does not support ``O_DIRECT``).
        ValueError: If ``chunk_bytes`` is not a positive multiple of :data:`ALIGN`.
    """

    def __init__(self, path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        super().__init__()
        if chunk_bytes <= 0 or chunk_bytes % ALIGN:
            super().close()
            raise ValueError(f"chunk_bytes must be a positive multiple of {ALIGN}, got {chunk_bytes}.")
        self.name = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_DIRECT, 0o644)
        except OSError:
            super().close()  # so that IOBase.__del__ finds nothing left to close
            raise
        self._chunk = chunk_bytes
        self._buffers = [mmap.mmap(-1, chunk_bytes) for _ in range(2)]  # anonymous mappings are page-aligned
        self._staged = [np.frombuffer(buffer, dtype=np.uint8) for buffer in self._buffers]
        self._current = 0
        self._fill = 0
        self._position = 0
        self._io = ThreadPoolExecutor(1, thread_name_prefix="fe_ray-direct-write")
        self._in_flight: Future[None] | None = None
        self.direct = True
        #: Bytes that went through the staging buffers / straight from the caller's memory.
        self.bytes_staged = 0
        self.bytes_direct = 0

    @property
    def alignment(self) -> int:
        """Data written when :meth:`tell` is a multiple of this, from memory aligned to it, is not copied."""
        return ALIGN

    # ------------------------------------------------------------------ io.RawIOBase
    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def write(self, data: Any) -> int:
        """Append ``data`` (any object exporting a buffer); returns its length in bytes."""
        if self.closed:
            raise ValueError("write to a closed DirectFileWriter")
        # numpy copies without holding the GIL (a memoryview slice assignment holds it), so a training thread of the
        # same process is not held up while a background thread writes a checkpoint.
        source = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        total = source.size
        offset = self._write_aligned(source)
        self.bytes_staged += total - offset
        while offset < total:
            count = min(self._chunk - self._fill, total - offset)
            np.copyto(self._staged[self._current][self._fill:self._fill + count], source[offset:offset + count])
            self._fill += count
            offset += count
            if self._fill == self._chunk:
                self._submit(self._chunk)
        self._position += total
        return total

    def close(self) -> None:
        """Write the buffered tail, cut the file to its true length and close it (idempotent)."""
        if self.closed:
            return
        try:
            if self._fill:
                padded = -(-self._fill // ALIGN) * ALIGN
                self._staged[self._current][self._fill:padded] = 0
                self._submit(padded)
            self._wait()
            os.ftruncate(self._fd, self._position)
        finally:
            self._io.shutdown(wait=True)  # a failed write may still be in flight: it must end before the fd closes
            os.close(self._fd)
            del self._staged  # numpy holds exports of the mappings; they must go before the mappings can close
            for buffer in self._buffers:
                try:
                    buffer.close()
                except BufferError:  # a write error's traceback still holds a view: freed with the error instead
                    pass
            super().close()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _write_aligned(self, source: np.ndarray) -> int:
        """Write the largest aligned prefix of ``source`` without staging it, if the file and memory allow it;
        returns the number of bytes written (0 when they do not)."""
        length = source.size // ALIGN * ALIGN
        if not length or self._fill % ALIGN or source.ctypes.data % ALIGN:
            return 0
        if self._fill:  # whole blocks are staged: they go first, to keep the file's bytes in order
            self._submit(self._fill)
        self._wait()
        self._drain(memoryview(source[:length]))  # on this thread: the caller's memory is only ours until we return
        self.bytes_direct += length
        return length

    def _submit(self, length: int) -> None:
        """Hand the current buffer's first ``length`` bytes to the I/O thread and switch to the other buffer."""
        self._wait()  # one write in flight at a time keeps the file's writes in order
        self._in_flight = self._io.submit(self._drain, memoryview(self._buffers[self._current])[:length])
        self._current ^= 1
        self._fill = 0

    def _wait(self) -> None:
        """Wait for the write in flight, raising its error."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            in_flight.result()

    def _drain(self, staged: memoryview) -> None:
        """Write ``staged`` (its length a multiple of ALIGN) at the file's position, resuming after short writes."""
        with staged:
            done = 0
            while done < len(staged):
                try:
                    done += self._write_some(staged[done:])
                except OSError as err:
                    if err.errno != errno.EINVAL or not self.direct:
                        raise
                    self._disable_direct()

    def _write_some(self, data: memoryview) -> int:
        return os.write(self._fd, data)

    def _disable_direct(self) -> None:
        """Continue with ordinary buffered writes (the open succeeded but the filesystem rejects direct I/O)."""
        import fcntl  # Unix only, like O_DIRECT itself

        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)
        self.direct = False


def open_sequential_writer(fs: Any, path: str) -> IO[bytes]:
    """A binary writer for ``path`` on ``fs`` that needs no seeking: direct I/O where possible, else ``fs.open``.

    Args:
        fs: An fsspec filesystem.
        path: The file's path on ``fs``.
    """
    if isinstance(fs, LocalFileSystem) and hasattr(os, "O_DIRECT") and use_direct_io(fs._strip_protocol(path)):
        try:
            return DirectFileWriter(fs._strip_protocol(path))
        except OSError as err:
            if err.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
    return fs.open(path, "wb")


def use_direct_io(path: str) -> bool:
    """Whether a new file at ``path`` should be written with ``O_DIRECT`` (see the module docstring).

    Raises:
        ValueError: If ``FE_RAY_DIRECT_IO`` is set to something other than "0" or "1".
    """
    setting = os.environ.get(DIRECT_IO_ENV, "").strip()
    if setting not in ("", "0", "1"):
        raise ValueError(f"{DIRECT_IO_ENV}={setting!r} is not valid; use 1 (direct I/O on any local path), 0 (never) "
                         "or leave it unset (local disk filesystems only).")
    if setting:
        return setting == "1"
    return filesystem_type(os.path.dirname(os.path.abspath(path))) in DIRECT_IO_FILESYSTEMS


def filesystem_type(path: str, mounts_file: str = "/proc/self/mounts") -> str | None:
    """The type of the filesystem that holds ``path`` ("ext4", "nfs4", "tmpfs", ...), or None where unknown.

    Reads the Linux mount table: the longest mount point containing ``path`` wins, and of equal ones the last
    (a later mount hides an earlier one at the same point).
    """
    try:
        with open(mounts_file, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:  # not Linux, or /proc not mounted
        return None
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = _unescape(fields[1])
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, fields[2]
    return best_type


def _unescape(field: str) -> str:
    """Undo the mount table's octal escapes (a space in a mount point is written as \\040)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)
