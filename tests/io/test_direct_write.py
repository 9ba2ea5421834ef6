"""DirectFileWriter writes exactly the bytes it is given, whatever their sizes, and degrades to buffered I/O."""

import errno
import os
import zipfile
from pathlib import Path

import fsspec
import numpy as np
import pytest

from fe_ray.io import direct_write
from fe_ray.io.direct_write import ALIGN, DirectFileWriter, open_sequential_writer
from fe_ray.io.state_files import read_checkpoint, save_npz, write_checkpoint


@pytest.fixture
def writer_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Opens DirectFileWriters under tmp_path; where its filesystem refuses O_DIRECT (tmpfs), the same code runs
    without the flag, so the staging, padding and truncation logic is tested on every machine."""
    try:
        DirectFileWriter(str(tmp_path / "probe")).close()
    except OSError as err:
        assert err.errno == errno.EINVAL
        monkeypatch.setattr(direct_write.os, "O_DIRECT", 0)

    def make(name: str = "out.bin", chunk_bytes: int = 2 * ALIGN) -> DirectFileWriter:
        return DirectFileWriter(str(tmp_path / name), chunk_bytes=chunk_bytes)
    return make


def test_any_sizes_and_buffer_types_land_byte_exact(writer_factory, tmp_path: Path) -> None:
    pieces = [b"abcde", np.arange(5000, dtype=np.int32), b"", bytearray(2 * ALIGN), np.float64(3.5),
              memoryview(np.ones((7, 3), dtype=np.float16)), b"x" * (5 * ALIGN + 1)]
    expected = b"".join(bytes(memoryview(np.asarray(p)).cast("B")) if not isinstance(p, (bytes, bytearray))
                        else bytes(p) for p in pieces)
    with writer_factory() as writer:
        for piece in pieces:
            start = writer.tell()
            assert writer.write(piece) == writer.tell() - start
        assert writer.tell() == len(expected)
    assert (tmp_path / "out.bin").read_bytes() == expected
    assert writer.closed
    writer.close()  # idempotent


def test_an_exact_multiple_of_the_chunk_needs_no_padding(writer_factory, tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 255, 4 * ALIGN, dtype=np.uint8)
    with writer_factory() as writer:
        writer.write(data)
    assert (tmp_path / "out.bin").read_bytes() == data.tobytes()


def test_empty_file(writer_factory, tmp_path: Path) -> None:
    writer_factory().close()
    assert (tmp_path / "out.bin").read_bytes() == b""


def test_zip_archives_are_written_forward_only_and_read_back(writer_factory, tmp_path: Path) -> None:
    arrays = {"a": np.arange(10_000.0), "b": np.array(7, dtype=np.int8), "c": np.zeros((0, 3))}
    with writer_factory("x.npz") as writer:
        save_npz(writer, arrays)
    with zipfile.ZipFile(tmp_path / "x.npz") as archive:
        assert archive.testzip() is None  # every member's CRC checks out
    with np.load(tmp_path / "x.npz", allow_pickle=False) as npz:
        for key, value in arrays.items():
            np.testing.assert_array_equal(npz[key], value)


def test_a_rejected_direct_write_falls_back_to_buffered_io(writer_factory, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    refused = []

    def write(self: DirectFileWriter, data: memoryview) -> int:
        if not refused:
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return os.write(self._fd, data)

    data = b"y" * (3 * ALIGN + 17)
    monkeypatch.setattr(DirectFileWriter, "_write_some", write)
    with writer_factory() as writer:
        writer.write(data)
    assert refused and not writer.direct
    assert (tmp_path / "out.bin").read_bytes() == data


def test_other_write_errors_propagate_and_close_the_file(writer_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    def write(self: DirectFileWriter, data: memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    writer = writer_factory()
    monkeypatch.setattr(DirectFileWriter, "_write_some", write)
    with pytest.raises(OSError, match="No space left"), writer:
        writer.write(b"z" * (3 * ALIGN))
    assert writer.closed
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"more")


def test_bad_chunk_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple of 4096"):
        DirectFileWriter(str(tmp_path / "f"), chunk_bytes=1000)


def test_open_sequential_writer_picks_the_writer_per_filesystem(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(direct_write.DIRECT_IO_ENV, "1")  # whatever filesystem the test machine's tmp is on
    memory = fsspec.filesystem("memory")
    with open_sequential_writer(memory, f"/direct-write-{os.getpid()}/f") as file:
        assert not isinstance(file, DirectFileWriter)
        file.write(b"abc")
    assert memory.cat_file(f"/direct-write-{os.getpid()}/f") == b"abc"

    # A local filesystem that refuses O_DIRECT at open time (tmpfs answers EINVAL) gets fsspec's ordinary file.
    real_open = os.open

    def refusing_open(path: str, flags: int, *args):
        if flags & direct_write.os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    local = fsspec.filesystem("file")
    with monkeypatch.context() as patch:  # os.open is patched process-wide: keep the window small
        patch.setattr(direct_write.os, "open", refusing_open)
        file = open_sequential_writer(local, str(tmp_path / "g"))
    with file:
        assert not isinstance(file, DirectFileWriter)
        file.write(b"def")
    assert (tmp_path / "g").read_bytes() == b"def"

    def denied_open(path: str, flags: int, *args):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    with monkeypatch.context() as patch, pytest.raises(PermissionError):  # real errors are not hidden
        patch.setattr(direct_write.os, "open", denied_open)
        open_sequential_writer(local, str(tmp_path / "h"))


def test_checkpoints_use_the_direct_writer_for_local_model_files(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(direct_write.DIRECT_IO_ENV, "1")  # whatever filesystem the test machine's tmp is on
    opened = []
    real = direct_write.DirectFileWriter.__init__

    def spy(self, path: str, *args, **kwargs) -> None:
        real(self, path, *args, **kwargs)
        opened.append(os.path.basename(path))

    monkeypatch.setattr(direct_write.DirectFileWriter, "__init__", spy)
    weights = np.random.default_rng(1).standard_normal((300, 301))
    payload = {"system": {}, "config": {}, "models": {"m": {"model": {"w": weights}, "opt": {"step": 3}}}}
    try:
        write_checkpoint(payload, str(tmp_path))
    except OSError:
        pytest.fail("write_checkpoint must fall back, never fail, where direct I/O is refused")
    restored = read_checkpoint(str(tmp_path))
    np.testing.assert_array_equal(restored["models"]["m"]["model"]["w"], weights)
    assert restored["models"]["m"]["opt"] == {"step": 3}
    if hasattr(os, "O_DIRECT"):
        assert opened == ["m.npz"] or not _direct_supported(tmp_path)


def _direct_supported(directory: Path) -> bool:
    try:
        DirectFileWriter(str(directory / "probe2")).close()
    except OSError:
        return False
    return True


MOUNTS = r"""proc /proc proc rw 0 0
/dev/vda / ext4 rw 0 0
server:/export /mnt/shared nfs4 rw 0 0
tmpfs /mnt/shared/scratch tmpfs rw 0 0
/dev/vdb /mnt/my\040disk xfs rw 0 0
/dev/vdc /data ext4 rw 0 0
server:/other /data nfs rw 0 0
"""


@pytest.mark.parametrize("path, expected", [("/home/u/ckpt", "ext4"), ("/mnt/shared/run1", "nfs4"),
                                            ("/mnt/shared/scratch/x", "tmpfs"), ("/mnt/sharedx", "ext4"),
                                            ("/mnt/my disk/ckpt", "xfs"), ("/data/ckpt", "nfs")])
def test_filesystem_type_takes_the_innermost_and_latest_mount(tmp_path: Path, path: str, expected: str) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS)
    assert direct_write.filesystem_type(path, str(mounts)) == expected
    assert direct_write.filesystem_type(path, str(tmp_path / "missing")) is None


def test_direct_io_only_on_local_disk_filesystems_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(direct_write.DIRECT_IO_ENV, raising=False)
    kinds = {"/disk/f": "ext4", "/nfs/f": "nfs4", "/shm/f": "tmpfs", "/fuse/f": "fuse.s3fs", "/nowhere/f": None}
    monkeypatch.setattr(direct_write, "filesystem_type", lambda path: kinds[path + "/f"])
    assert [direct_write.use_direct_io(path) for path in kinds] == [True, False, False, False, False]
    monkeypatch.setenv(direct_write.DIRECT_IO_ENV, "0")
    assert not direct_write.use_direct_io("/disk/f")
    monkeypatch.setenv(direct_write.DIRECT_IO_ENV, "1")
    assert direct_write.use_direct_io("/nfs/f")
    monkeypatch.setenv(direct_write.DIRECT_IO_ENV, "yes")
    with pytest.raises(ValueError, match="FE_RAY_DIRECT_IO='yes'.*use 1.*0"):
        direct_write.use_direct_io("/disk/f")


def test_network_filesystems_get_the_buffered_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(direct_write.DIRECT_IO_ENV, raising=False)
    monkeypatch.setattr(direct_write, "filesystem_type", lambda path: "nfs4")
    with open_sequential_writer(fsspec.filesystem("file"), str(tmp_path / "n")) as file:
        assert not isinstance(file, DirectFileWriter)
        file.write(b"nfs")
    assert (tmp_path / "n").read_bytes() == b"nfs"


def test_aligned_data_is_written_without_staging(writer_factory, tmp_path: Path) -> None:
    from fe_ray.io.snapshot import SnapshotBuffers

    rng = np.random.default_rng(1)
    big = SnapshotBuffers(1).copy({"a": rng.standard_normal(20 * ALIGN // 8 + 5)})["a"]  # page-aligned, odd tail
    assert big.ctypes.data % ALIGN == 0
    unaligned = np.frombuffer(bytes(ALIGN + 1) + big.tobytes(), dtype=np.uint8)[1:]
    with writer_factory(chunk_bytes=2 * ALIGN) as writer:
        writer.write(big)  # file offset 0, aligned memory: 20 blocks direct, the 40-byte tail staged
        assert (writer.bytes_direct, writer.bytes_staged) == (20 * ALIGN, 40)
        writer.write(b"h" * (ALIGN - 40))  # fills the staged block up to a boundary
        writer.write(big)  # one whole block staged: it is written first, then the aligned prefix directly
        assert writer.bytes_direct == 40 * ALIGN
        writer.write(b"x")
        writer.write(big)  # the file offset is not aligned now: all staged
        writer.write(unaligned)  # memory not aligned: all staged
        assert writer.bytes_direct == 40 * ALIGN
    expected = big.tobytes() + b"h" * (ALIGN - 40) + big.tobytes() + b"x" + big.tobytes() + unaligned.tobytes()
    assert (tmp_path / "out.bin").read_bytes() == expected


def test_npz_members_of_large_arrays_start_aligned_and_load_with_numpy(writer_factory, tmp_path: Path) -> None:
    from fe_ray.io.snapshot import SnapshotBuffers
    from fe_ray.io.state_files import ALIGNED_ARRAY_BYTES

    rng = np.random.default_rng(2)
    source = {"w": rng.standard_normal(ALIGNED_ARRAY_BYTES // 8 + 3), "small": np.arange(7, dtype=np.int16),
              "m": rng.standard_normal((ALIGNED_ARRAY_BYTES // 20 + 1, 5)).astype(np.float32)}
    arrays = SnapshotBuffers(1).copy(source)
    with writer_factory("a.npz", chunk_bytes=16 * ALIGN) as writer:
        save_npz(writer, arrays)
        # Everything but each large array's tail and the zip/npy headers went out without a copy.
        assert writer.bytes_direct >= sum(a.nbytes for a in (arrays["w"], arrays["m"])) - 2 * ALIGN
    raw = (tmp_path / "a.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.npz") as archive:
        for name in ("w", "m"):
            offset = archive.getinfo(f"{name}.npy").header_offset
            # Local file header: 30 fixed bytes, then the name and the extra field (lengths at bytes 26 and 28).
            npy = offset + 30 + int.from_bytes(raw[offset + 26:offset + 28], "little") + int.from_bytes(
                raw[offset + 28:offset + 30], "little")
            assert raw[npy:npy + 6] == b"\x93NUMPY"
            data = npy + 12 + int.from_bytes(raw[npy + 8:npy + 12], "little")
            assert data % ALIGN == 0, name
    with np.load(tmp_path / "a.npz", allow_pickle=False) as loaded:
        assert sorted(loaded.files) == ["m", "small", "w"]
        for key, value in source.items():
            np.testing.assert_array_equal(loaded[key], value)
