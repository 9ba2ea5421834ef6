"""CheckpointStore: numbering, atomic commit, pruning, crash leftovers, fsspec URLs."""

from __future__ import annotations

import json
import os
import uuid

import fsspec
import pytest

from fe_ray.io import CheckpointStore


def _writer(content: bytes, crash: bool = False):
    def write(directory: str) -> None:
        fs, path = fsspec.core.url_to_fs(directory)
        fs.pipe_file(f"{path}/a.bin", content)
        if crash:
            raise RuntimeError("simulated crash mid-write")
        fs.makedirs(f"{path}/sub", exist_ok=True)
        fs.pipe_file(f"{path}/sub/b.bin", content * 2)
    return write


def _read(url: str) -> bytes:
    fs, path = fsspec.core.url_to_fs(url)
    return fs.cat_file(f"{path}/a.bin")


@pytest.fixture(params=["local", "file", "memory"])
def root(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "ckpts")
    if request.param == "file":
        return f"file://{tmp_path}/ckpts"
    return f"memory://store-{uuid.uuid4().hex}"


def test_check_writable_creates_the_root_and_leaves_nothing(root: str) -> None:
    store = CheckpointStore(root)
    store.check_writable()
    fs, path = fsspec.core.url_to_fs(root)
    assert fs.isdir(path) and fs.ls(path, detail=False) == []


def test_check_writable_names_a_directory_that_cannot_be_written(tmp_path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError, match=r"Cannot write checkpoints to .*a_file/ckpts: .* choose another checkpoint"):
        CheckpointStore(str(blocker / "ckpts")).check_writable()


def test_empty_store_has_no_latest(root: str) -> None:
    assert CheckpointStore(root).latest() is None


def test_save_numbers_and_keeps_last_k(root: str) -> None:
    store = CheckpointStore(root, keep=2)
    urls = [store.save(_writer(bytes([i])), info={"step": i}) for i in range(4)]
    assert [u.rstrip("/").rsplit("/", 1)[-1] for u in urls] == [f"ckpt-{i:06d}" for i in range(1, 5)]
    assert store.latest() == urls[-1]
    assert store.committed() == urls[-2:]
    assert _read(store.latest()) == bytes([3])
    assert store.manifest(store.latest())["info"] == {"step": 3}
    assert set(store.manifest(urls[-1])["files"]) == {"a.bin", "sub/b.bin"}


def test_crash_mid_write_keeps_previous_latest(root: str) -> None:
    store = CheckpointStore(root, keep=2)
    good = store.save(_writer(b"good"))
    with pytest.raises(RuntimeError, match="simulated crash"):
        store.save(_writer(b"bad", crash=True))
    # A fresh store (a restarted process) must still see only the committed checkpoint.
    reopened = CheckpointStore(root, keep=2)
    assert reopened.latest() == good
    assert _read(reopened.latest()) == b"good"
    # The next save deletes the leftovers first, then reuses their number.
    newer = reopened.save(_writer(b"newer"))
    assert reopened.latest() == newer
    fs, path = fsspec.core.url_to_fs(root)
    names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
    assert names == ["ckpt-000001", "ckpt-000002"]


def test_uncommitted_folder_without_manifest_is_ignored(root: str) -> None:
    store = CheckpointStore(root)
    good = store.save(_writer(b"good"))
    fs, path = fsspec.core.url_to_fs(root)
    fs.makedirs(f"{path}/ckpt-000002", exist_ok=True)
    fs.pipe_file(f"{path}/ckpt-000002/a.bin", b"half")  # renamed but the manifest never written
    assert store.latest() == good
    assert store.cleanup() and store.latest() == good


def _truncate(fs, path: str) -> None:
    fs.pipe_file(f"{path}/sub/b.bin", b"x")


def _delete(fs, path: str) -> None:
    fs.rm(f"{path}/sub/b.bin")


def _garble_manifest(fs, path: str) -> None:
    fs.pipe_file(f"{path}/MANIFEST.json", b'{"files": {"a.bin": 3')


def _manifest_without_files(fs, path: str) -> None:
    fs.pipe_file(f"{path}/MANIFEST.json", json.dumps({"format": 1, "number": 2}).encode())


@pytest.mark.parametrize("damage, reason", [
    (_truncate, "file sub/b.bin has 1 bytes, the manifest says 6"),
    (_delete, "missing file sub/b.bin"),
    (_garble_manifest, r"unreadable MANIFEST.json \(.*delimiter"),
    (_manifest_without_files, r"unreadable MANIFEST.json \('files'\)"),
])
def test_damaged_checkpoint_is_skipped_with_warning(root: str, damage, reason: str) -> None:
    store = CheckpointStore(root, keep=3)
    first = store.save(_writer(b"one"))
    second = store.save(_writer(b"two"))
    fs, path = fsspec.core.url_to_fs(second)
    damage(fs, path)  # after the commit
    with pytest.warns(UserWarning, match=rf"Skipping damaged checkpoint .*ckpt-000002: {reason}"):
        assert store.latest() == first
    assert store.committed() == [first]


def test_manifest_of_an_uncommitted_or_garbled_checkpoint_says_which(root: str) -> None:
    store = CheckpointStore(root)
    url = store.save(_writer(b"one"))
    fs, path = fsspec.core.url_to_fs(url)
    _garble_manifest(fs, path)
    with pytest.raises(ValueError, match=r"Checkpoint manifest .*ckpt-000001/MANIFEST.json is corrupt"):
        store.manifest(url)
    fs.rm(f"{path}/MANIFEST.json")
    with pytest.raises(FileNotFoundError, match="has no MANIFEST.json; it was never committed"):
        store.manifest(url)


def test_local_staging_is_renamed(tmp_path) -> None:
    store = CheckpointStore(str(tmp_path))
    seen = []

    def write(directory: str) -> None:
        seen.append(os.path.basename(directory))
        with open(os.path.join(directory, "f"), "w") as file:
            file.write("x")

    url = store.save(write)
    assert seen[0].startswith(".ckpt-000001.tmp-")
    assert os.path.basename(url) == "ckpt-000001"
    with open(os.path.join(url, "MANIFEST.json")) as file:
        assert json.load(file)["files"] == {"f": 1}


@pytest.mark.parametrize("keep", [0, -1, 1.5, True])
def test_bad_keep(keep) -> None:
    with pytest.raises(ValueError, match="keep"):
        CheckpointStore("memory://x", keep=keep)


def test_an_unknown_or_uninstalled_protocol_names_the_location_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """fsspec's own words ('Protocol not known: foo') named neither the checkpoint location nor the fix."""

    from fe_ray.io.checkpoint import open_fs

    with pytest.raises(ValueError, match=r"Checkpoint location 'foo://bucket/run': fsspec knows no protocol 'foo'.*"
                                         r"s3://"):
        open_fs("foo://bucket/run")

    def missing(url: str) -> None:
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    with pytest.raises(ImportError, match=r"'s3://bucket/run': Install s3fs to access S3 \(pip install it on the "
                                          r"driver and every node"):
        open_fs("s3://bucket/run")
