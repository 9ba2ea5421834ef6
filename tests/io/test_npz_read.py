"""The checkpoint .npz reader returns what np.load returns, for every archive layout, and reports damage."""

from __future__ import annotations

import io
import mmap
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fe_ray.io import npz_read
from fe_ray.io.npz_read import read_npz
from fe_ray.io.state_files import CheckpointError, read_checkpoint, save_npz, write_checkpoint

ARRAYS = {"matrix": np.arange(12, dtype=np.float32).reshape(3, 4), "fortran": np.asfortranarray(np.ones((3, 2))),
          "scalar": np.array(5, dtype=np.int64), "empty": np.zeros((0, 3)), "mask": np.array([True, False]),
          "half": np.ones(3, dtype=np.float16), "text": np.array(["ab", "c"]), "big": np.arange(300_000.0)}


def assert_same_arrays(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(expected)
    for key, array in expected.items():
        assert got[key].dtype == array.dtype and got[key].shape == array.shape, key
        np.testing.assert_array_equal(got[key], array)
        assert got[key].flags.writeable, key  # optimizers adopt these arrays


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(npz_read, "CHUNK_BYTES", 4099)  # many pieces per array, none aligned to the dtype


@pytest.mark.parametrize("writer", ["save_npz", "np.savez", "np.savez_compressed"])
def test_reads_every_archive_layout_as_np_load_does(writer: str) -> None:
    # save_npz writes .npy 2.0 headers, np.savez 1.0 ones (and keeps Fortran order); compressed members take
    # numpy's own reader.
    buffer = io.BytesIO()
    if writer == "save_npz":
        save_npz(buffer, ARRAYS)
    else:
        getattr(np, writer.removeprefix("np."))(buffer, **ARRAYS)
    buffer.seek(0)
    assert_same_arrays(read_npz(buffer), dict(np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False)))
    assert_same_arrays(read_npz(buffer), ARRAYS)


def test_aligned_checkpoint_files_round_trip(tmp_path: Path) -> None:
    # Local checkpoints pad the .npy headers of arrays >= 1 MiB so that their data starts at aligned offsets.
    weights = np.random.default_rng(0).random((512, 600))  # 2.3 MiB
    write_checkpoint({"system": {}, "config": {}, "models": {"m": {"w": weights, "b": np.ones(3)}}}, str(tmp_path))
    restored = read_checkpoint(str(tmp_path))["models"]["m"]
    np.testing.assert_array_equal(restored["w"], weights)
    np.testing.assert_array_equal(restored["b"], np.ones(3))


def test_large_members_get_memory_of_their_own_and_stay_usable(tmp_path: Path) -> None:
    # Large members are read into anonymous mappings (ordinary pages, not numpy's huge-page advice); small ones into
    # numpy arrays. Both must behave as ordinary writable arrays, also once copied, pickled or viewed by torch.
    weights = np.random.default_rng(1).random((512, 600))  # 2.3 MiB: at least MAPPED_BYTES
    small = np.arange(10.0)
    write_checkpoint({"system": {}, "config": {}, "models": {"m": {"w": weights, "s": small}}}, str(tmp_path))
    restored = read_checkpoint(str(tmp_path))["models"]["m"]
    big, little = restored["w"], restored["s"]
    assert weights.nbytes >= npz_read.MAPPED_BYTES > little.nbytes
    base = big
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)  # np.frombuffer keeps a memoryview
    assert big.flags.writeable and little.flags.writeable
    big[0, 0] = -1.0
    assert big[0, 0] == -1.0
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(big)), big)
    np.testing.assert_array_equal(little, small)


def test_a_damaged_member_fails_its_crc(tmp_path: Path) -> None:
    write_checkpoint({"system": {}, "config": {}, "models": {"m": {"w": np.arange(50_000.0)}}}, str(tmp_path))
    path = tmp_path / "models" / "m.npz"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # inside the array's data
    path.write_bytes(bytes(raw))
    with open(path, "rb") as file, pytest.raises(zipfile.BadZipFile, match="Bad CRC-32 for member 'a0.npy'"):
        read_npz(file)
    with pytest.raises(CheckpointError, match=r"m\.npz is corrupt: Bad CRC-32"):
        read_checkpoint(str(tmp_path))


def test_a_member_whose_header_disagrees_with_its_size_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        header = io.BytesIO()
        np.lib.format.write_array(header, np.arange(10.0))
        archive.writestr("x.npy", header.getvalue()[:-8])  # one float short
    with pytest.raises(zipfile.BadZipFile, match="'x.npy' is 200 bytes, its header describes 208"):
        read_npz(buffer)


def test_a_damaged_header_length_is_refused_before_it_sizes_a_read() -> None:
    buffer = io.BytesIO()
    save_npz(buffer, {"x": np.arange(10.0)})
    raw = bytearray(buffer.getvalue())
    magic = raw.index(b"\x93NUMPY")
    raw[magic + 8:magic + 12] = (2**31).to_bytes(4, "little")  # version 2.0's header length field
    with pytest.raises(zipfile.BadZipFile, match="header of member 'x.npy' is longer than the member"):
        read_npz(io.BytesIO(bytes(raw)))


def test_object_arrays_are_refused_not_unpickled() -> None:
    buffer = io.BytesIO()
    np.savez(buffer, bad=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="object array"):
        read_npz(buffer)
