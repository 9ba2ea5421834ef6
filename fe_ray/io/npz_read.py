"""Read a checkpoint's ``.npz`` archive straight into its arrays, checking each member's CRC-32 on a second thread.

``np.load`` reads an archive member through :mod:`zipfile` on one thread: each 256 KiB piece is read into a new
``bytes`` object, its CRC-32 is updated, and it is copied into the array. :func:`read_npz` reads a stored (not
compressed) member's data into the array's own memory in :data:`CHUNK_BYTES` pieces and hands each piece to a CRC
thread while it reads the next, so the checksum (about 0.3 s per GB here) overlaps the read instead of following
it. A 1.2 GB state read cold on the 2-core CPU VM: 0.51 s against 0.77 s with ``np.load`` (medians of 11
alternating reads; reading directly but checking the CRC on the same thread took 1.39 s; benchmarks/RESULTS.md).

Large members go into memory mapped for them without numpy's huge-page advice (:func:`_new_buffer`).

Members it cannot read that way (compressed, or ``.npy`` format 3.0) are read through :mod:`zipfile` and numpy,
as ``np.load`` would. Object arrays are refused, as ``np.load(allow_pickle=False)`` refuses them.
"""

from __future__ import annotations

import io
import mmap
import struct
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

import numpy as np

#: Bytes read per ``readinto`` call, and checksummed per CRC task.
CHUNK_BYTES = 32 << 20
#: Members at least this large are read into an anonymous memory mapping of their own (see :func:`_new_buffer`).
MAPPED_BYTES = 1 << 20
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, (fixed fields), file name length, extra field length
_NPY_MAGIC = b"\x93NUMPY"


class _Crc:
    """The running CRC-32 of one member; updated by the single CRC thread, in submission order."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: memoryview | bytes) -> None:
        self.value = zlib.crc32(data, self.value)  # releases the GIL for large buffers: overlaps the next read


def read_npz(file: BinaryIO) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive in ``file``, keyed by member name without ``.npy``.

    Args:
        file: A seekable binary file object (a local file or an fsspec file) positioned anywhere; left open.

    Raises:
        zipfile.BadZipFile: The archive is damaged: unreadable directory, a member's CRC-32 or size does not match,
            or the file ends inside a member.
        ValueError: A member holds an object array, or is no ``.npy`` file.
    """
    arrays: dict[str, np.ndarray] = {}
    checks: list[tuple[zipfile.ZipInfo, _Crc]] = []
    readinto = hasattr(file, "readinto")
    with zipfile.ZipFile(file) as archive, ThreadPoolExecutor(1, thread_name_prefix="fe_ray-crc") as crc_thread:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue  # np.load's keys are the .npy members too
            key = info.filename[:-4]
            header = _npy_header(file, info) if readinto and info.compress_type == zipfile.ZIP_STORED else None
            if header is None:
                arrays[key] = _read_member(archive, info)
                continue
            crc = _Crc()
            checks.append((info, crc))
            arrays[key] = _read_stored(file, info, header, crc, crc_thread)
    # Leaving the block waited for the CRC thread.
    for info, crc in checks:
        if crc.value != info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for member {info.filename!r}")
    return arrays


def _npy_header(file: BinaryIO, info: zipfile.ZipInfo) -> bytes | None:
    """The member's whole ``.npy`` header (the file is left at its data), or None for a format read elsewhere."""
    file.seek(info.header_offset)
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(_read_exact(file, _LOCAL_HEADER.size, info))
    if signature != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"Bad local header of member {info.filename!r}")
    file.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
    prefix = _read_exact(file, 8, info)  # magic and version
    if prefix[:6] != _NPY_MAGIC:
        raise ValueError(f"Member {info.filename!r} is no .npy file")
    if prefix[6:8] == b"\x01\x00":
        length_field = _read_exact(file, 2, info)
        (length,) = struct.unpack("<H", length_field)
    elif prefix[6:8] == b"\x02\x00":
        length_field = _read_exact(file, 4, info)
        (length,) = struct.unpack("<I", length_field)
    else:
        return None  # format 3.0 (UTF-8 field names): numpy's own reader
    if len(prefix) + len(length_field) + length > info.file_size:  # a damaged length must not size a huge read
        raise zipfile.BadZipFile(f"The .npy header of member {info.filename!r} is longer than the member")
    return prefix + length_field + _read_exact(file, length, info)


def _read_stored(file: BinaryIO, info: zipfile.ZipInfo, header: bytes, crc: _Crc,
                 crc_thread: ThreadPoolExecutor) -> np.ndarray:
    """Read a stored member's data (the file is at it) into a new array, queueing CRC updates as pieces arrive."""
    shape, fortran_order, dtype = _parse_header(header)
    if dtype.hasobject:
        raise ValueError(f"Member {info.filename!r} holds an object array, which checkpoints never do: object arrays "
                         "cannot be loaded when allow_pickle=False")  # np.load's words; nothing is unpickled
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(header) + nbytes != info.file_size:
        raise zipfile.BadZipFile(f"Member {info.filename!r} is {info.file_size} bytes, its header describes "
                                 f"{len(header) + nbytes}")
    crc_thread.submit(crc.update, header)
    order = "F" if fortran_order else "C"
    if nbytes == 0:
        return np.empty(shape, dtype=dtype, order=order)
    data = _new_buffer(nbytes)
    view = memoryview(data)
    done = 0
    while done < nbytes:
        got = file.readinto(view[done:min(done + CHUNK_BYTES, nbytes)])  # type: ignore[attr-defined]
        if not got:
            raise zipfile.BadZipFile(f"The file ends inside member {info.filename!r}")
        crc_thread.submit(crc.update, view[done:done + got])
        done += got
    return data.view(dtype).reshape(shape, order=order)


def _new_buffer(nbytes: int) -> np.ndarray:
    """Fresh writable memory for a member's data: an anonymous mapping of its own from :data:`MAPPED_BYTES` up.

    numpy advises the kernel to back its large arrays with transparent huge pages (``MADV_HUGEPAGE``). Where the
    kernel's THP ``defrag`` setting is ``madvise`` (a common default) each first touch of such memory may stall in
    direct compaction to find 2 MiB of contiguous memory. A plain anonymous mapping gets ordinary pages, as torch's
    tensors do. Cold reads of a 1.2 GB state in one alternating probe: 0.52-4.31 s with huge pages, 0.91-2.07 s
    without (paired 0.86; benchmarks/RESULTS.md). The mapping is returned when the array is.
    """
    if nbytes >= MAPPED_BYTES:
        return np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)
    return np.empty(nbytes, dtype=np.uint8)


def _parse_header(header: bytes) -> tuple[tuple[int, ...], bool, np.dtype]:
    buffer = io.BytesIO(header)
    version = np.lib.format.read_magic(buffer)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    return read(buffer)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """A member read through zipfile (which checks its CRC) and numpy's reader."""
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _read_exact(file: BinaryIO, size: int, info: zipfile.ZipInfo) -> bytes:
    data = file.read(size)
    if len(data) != size:
        raise zipfile.BadZipFile(f"The file ends inside member {info.filename!r}")
    return data


__all__ = ["CHUNK_BYTES", "read_npz"]
