"""CheckpointStore: numbered, atomically committed checkpoint folders on any fsspec filesystem.

Layout under ``root``::

    ckpt-000003/            a committed checkpoint: its files plus MANIFEST.json (written last)
    ckpt-000004/            a committed checkpoint
    .ckpt-000005.tmp-<id>/  a checkpoint being written (local filesystems only), renamed when complete

A checkpoint counts only once its ``MANIFEST.json`` exists and every file the manifest lists is present with the
recorded size. The manifest is written last, atomically (temp file + ``os.replace`` locally; a single object PUT on
object stores, where a PUT is atomic), so it is the commit point: a writer killed at any moment leaves either the
previous checkpoints untouched or a new, complete one. Leftovers of crashed writes are deleted by the next save.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

MANIFEST = "MANIFEST.json"
FORMAT_VERSION = 1
_CKPT_RE = re.compile(r"^ckpt-(\d+)$")
_STAGING_RE = re.compile(r"^\.ckpt-(\d+)\.tmp-[0-9a-f]+$")


def open_fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """Split a path or fsspec URL (``memory://x``, ``file:///x``, ``s3://bucket/x``) into (filesystem, path).

    Raises:
        ValueError: If the URL's protocol is unknown to fsspec, naming the URL and the known protocols.
        ImportError: If the protocol's package (s3fs, gcsfs, ...) is missing, naming the URL and fsspec's fix.
    """
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ValueError as err:
        if "Protocol not known" not in str(err):
            raise
        protocol = str(url).split("://", 1)[0]
        raise ValueError(f"Checkpoint location {url!r}: fsspec knows no protocol {protocol!r}. Use a local path "
                         "or a URL of a protocol it knows (e.g. s3://, gs://, abfs://, hdfs://, memory://; "
                         "fsspec.available_protocols() lists them all).") from None
    except ImportError as err:
        raise ImportError(f"Checkpoint location {url!r}: {err} (pip install it on the driver and every node "
                          "that runs replicas).") from err
    return fs, path


def normalize_location(location: str) -> str:
    """One spelling per checkpoint directory: a local path (or ``file://`` URL) absolute and without a trailing
    slash; any other fsspec URL as given, without one.

    Absolute because the directory is also used by other processes (a distributed run's replica rank 0 writes the
    checkpoints), whose working directory may differ from the driver's.
    """
    location = str(location)
    if location.startswith("file://"):
        location = location[len("file://"):]
    if "://" not in location:
        return os.path.abspath(os.path.expanduser(location))
    return location.rstrip("/")


def is_process_local(location: str) -> bool:
    """Whether ``location`` lives in one process's memory (``memory://``), out of reach of every other process."""
    return str(location).startswith("memory://")


def join(base: str, *parts: str) -> str:
    """Join path parts with '/', which every fsspec filesystem (local ones included) accepts."""
    return "/".join([base.rstrip("/"), *parts])


class CheckpointStore:
    """Numbered checkpoints under ``root`` that are committed atomically and pruned to the newest ``keep``.

    Writing: ``store.save(write_fn)`` calls ``write_fn(directory_url)``, which writes the checkpoint's files into
    that (fresh, empty) directory, then commits them. Reading: ``store.latest()`` gives the URL of the newest
    committed checkpoint (or None). One process should write to a root at a time; readers may run concurrently.

    Args:
        root: A local path or an fsspec URL. Local paths and ``file://`` / ``memory://`` work out of the box;
            ``s3://`` and others need their fsspec plugin (e.g. ``pip install s3fs``).
        keep: How many committed checkpoints to keep (the newest ones); None keeps all.

    Raises:
        ValueError: If ``keep`` is not None or a positive int.
    """

    def __init__(self, root: str, keep: int | None = 2) -> None:
        if keep is not None and (not isinstance(keep, int) or isinstance(keep, bool) or keep < 1):
            raise ValueError(f"CheckpointStore keep must be a positive int or None (keep all), got {keep!r}.")
        self.root_url = str(root)
        self.keep = keep
        self.fs, self.root = open_fs(self.root_url)
        # Only local folders can be renamed atomically; object stores write in place and rely on the manifest.
        self._rename_commit = isinstance(self.fs, LocalFileSystem)
        self._has_protocol = "://" in self.root_url
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ paths
    def url(self, path: str) -> str:
        """The URL of a filesystem path, in the same style (plain path or protocol URL) as ``root``."""
        return self.fs.unstrip_protocol(path) if self._has_protocol else path

    def _path(self, url_or_path: str) -> str:
        return open_fs(url_or_path)[1] if "://" in url_or_path else url_or_path

    def _entries(self) -> list[str]:
        if not self.fs.exists(self.root):
            return []
        return [entry.rstrip("/").rsplit("/", 1)[-1] for entry in self.fs.ls(self.root, detail=False)]

    def _numbers(self) -> list[int]:
        return sorted(int(m.group(1)) for name in self._entries() if (m := _CKPT_RE.match(name)))

    # ------------------------------------------------------------------ reading
    def committed(self) -> list[str]:
        """URLs of every committed, complete checkpoint, oldest first."""
        out = []
        for number in self._numbers():
            path = join(self.root, f"ckpt-{number:06d}")
            if self._verify(path) is None:
                out.append(self.url(path))
        return out

    def latest(self) -> str | None:
        """URL of the newest committed, complete checkpoint, or None if there is none.

        Checkpoints whose manifest is missing (an interrupted write) are skipped silently; ones whose manifest
        disagrees with the files on disk are skipped with a warning.
        """
        for number in reversed(self._numbers()):
            path = join(self.root, f"ckpt-{number:06d}")
            problem = self._verify(path)
            if problem is None:
                return self.url(path)
            if problem != "uncommitted":
                warnings.warn(f"Skipping damaged checkpoint {self.url(path)}: {problem}", stacklevel=2)
        return None

    def manifest(self, checkpoint: str) -> dict[str, Any]:
        """The parsed MANIFEST.json of a checkpoint URL.

        Raises:
            FileNotFoundError: If the checkpoint has no manifest (it was never committed).
            ValueError: If the manifest is not valid JSON.
        """
        path = join(self._path(checkpoint), MANIFEST)
        if not self.fs.exists(path):
            raise FileNotFoundError(f"Checkpoint {checkpoint} has no {MANIFEST}; it was never committed.")
        try:
            return json.loads(self.fs.cat_file(path))
        except ValueError as err:
            raise ValueError(f"Checkpoint manifest {self.url(path)} is corrupt ({err}).") from err

    def _verify(self, path: str) -> str | None:
        """None if the checkpoint at ``path`` is committed and complete, else why not."""
        manifest_path = join(path, MANIFEST)
        if not self.fs.exists(manifest_path):
            return "uncommitted"
        try:
            manifest = json.loads(self.fs.cat_file(manifest_path))
            files = manifest["files"]
        except (ValueError, KeyError, TypeError) as err:
            return f"unreadable {MANIFEST} ({err})"
        for rel, size in files.items():
            file_path = join(path, rel)
            if not self.fs.exists(file_path):
                return f"missing file {rel}"
            if self.fs.size(file_path) != size:
                return f"file {rel} has {self.fs.size(file_path)} bytes, the manifest says {size}"
        return None

    # ------------------------------------------------------------------ writing
    def check_writable(self) -> None:
        """Create ``root`` if missing and write and remove a small file there, so that a directory training cannot
        write to is reported before the first epoch rather than when the first checkpoint is due.

        Raises:
            OSError: Naming the directory, the reason and the fix.
        """
        probe = join(self.root, f".write-probe-{uuid.uuid4().hex[:12]}")
        try:
            self.fs.makedirs(self.root, exist_ok=True)
            self.fs.pipe_file(probe, b"fe_ray")
            self.fs.rm(probe)
        except OSError as err:
            reason = err.strerror or str(err)
            message = (f"Cannot write checkpoints to {self.root_url}: {reason} ({type(err).__name__}). Fix the "
                       "directory's permissions or free space, or choose another checkpoint directory.")
            raise (OSError(err.errno, message) if err.errno is not None else OSError(message)) from err

    def save(self, write_fn: Callable[[str], None], info: dict[str, Any] | None = None) -> str:
        """Write a new checkpoint with ``write_fn(directory_url)`` and commit it.

        Args:
            write_fn: Writes the checkpoint's files into the given (empty) directory URL.
            info: JSON-able metadata stored in the manifest (e.g. the global step).

        Returns:
            The URL of the committed checkpoint.
        """
        with self._lock:
            self.cleanup()
            number = max(self._numbers(), default=0) + 1
            name = f"ckpt-{number:06d}"
            final = join(self.root, name)
            staging = join(self.root, f".{name}.tmp-{uuid.uuid4().hex[:12]}") if self._rename_commit else final
            try:
                self.fs.makedirs(staging, exist_ok=True)
                write_fn(self.url(staging))
                files = self._list_files(staging)
                if self._rename_commit:
                    _fsync_tree(staging)
                    os.rename(staging, final)
                self._write_manifest(final, {"format": FORMAT_VERSION, "number": number, "created": time.time(),
                                             "files": files, "info": info or {}})
            except OSError as err:
                self._discard(staging, final)
                raise _write_error(err, self.url(final), self._latest_or_none()) from err
            self._prune()
            return self.url(final)

    def _latest_or_none(self) -> str | None:
        try:
            return self.latest()
        except OSError:
            return None

    def _discard(self, staging: str, final: str) -> None:
        """Best-effort removal of a failed write (uncommitted either way: the manifest was never written)."""
        for path in {staging, final}:
            try:
                if self.fs.exists(path) and not self.fs.exists(join(path, MANIFEST)):
                    self.fs.rm(path, recursive=True)
            except OSError:
                pass

    def _list_files(self, directory: str) -> dict[str, int]:
        prefix = directory.rstrip("/") + "/"
        found = self.fs.find(directory, detail=True)
        return {path[len(prefix):]: int(meta["size"]) for path, meta in sorted(found.items())
                if path.startswith(prefix) and not path.endswith("/" + MANIFEST)}

    def _write_manifest(self, directory: str, manifest: dict[str, Any]) -> None:
        data = json.dumps(manifest, indent=2, sort_keys=True).encode()
        target = join(directory, MANIFEST)
        if self._rename_commit:
            tmp = join(directory, f".{MANIFEST}.tmp")
            with open(tmp, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, target)
            _fsync_dir(directory)
        else:
            self.fs.pipe_file(target, data)

    def cleanup(self) -> list[str]:
        """Delete leftovers of interrupted writes: staging folders and checkpoint folders without a manifest.

        Returns:
            The URLs that were deleted.
        """
        removed = []
        for name in self._entries():
            path = join(self.root, name)
            if _STAGING_RE.match(name) or (_CKPT_RE.match(name) and not self.fs.exists(join(path, MANIFEST))):
                self.fs.rm(path, recursive=True)
                removed.append(self.url(path))
        return removed

    def _prune(self) -> None:
        if self.keep is None:
            return
        committed = [n for n in self._numbers() if self.fs.exists(join(self.root, f"ckpt-{n:06d}", MANIFEST))]
        for number in committed[:-self.keep]:
            path = join(self.root, f"ckpt-{number:06d}")
            # Drop the manifest first so a deletion interrupted halfway leaves an uncommitted folder, never a
            # committed-looking but incomplete one.
            self.fs.rm(join(path, MANIFEST))
            self.fs.rm(path, recursive=True)

    def __repr__(self) -> str:
        return f"CheckpointStore(root={self.root_url!r}, keep={self.keep})"


def _write_error(err: OSError, target: str, previous: str | None) -> OSError:
    """The OSError of a failed checkpoint write, with what was being written, what is still intact, and the fix."""
    kept = f"the previous checkpoint {previous} is intact" if previous else "there is no earlier checkpoint"
    reason = err.strerror or str(err)
    message = (f"Could not write checkpoint {target}: {reason} ({type(err).__name__}, errno {err.errno}). Nothing "
               f"was committed; {kept} and the in-memory training state is unchanged. Free disk space, fix the "
               "directory's permissions, or choose another checkpoint directory, then resume.")
    return OSError(err.errno, message) if err.errno is not None else OSError(message)


def _fsync_tree(directory: str) -> None:
    """Flush every file under a local directory to disk so a committed checkpoint survives a power cut."""
    for dirpath, _, filenames in os.walk(directory):
        for filename in filenames:
            with open(os.path.join(dirpath, filename), "rb+") as file:
                os.fsync(file.fileno())
        _fsync_dir(dirpath)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
