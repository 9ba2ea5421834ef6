"""Disk helpers of the checkpoint benchmarks: flush, evict from the page cache (for cold reads), measure."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: str | Path) -> None:
    """Flush ``path``'s written data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cache(root: str | Path) -> None:
    """Evict every file under ``root`` from the page cache (clean pages only: call after fsync)."""
    root = Path(root)
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def dir_bytes(root: str | Path) -> int:
    """Total size of the files under ``root``."""
    root = Path(root)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
