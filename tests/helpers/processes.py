"""Waiting on processes of this machine in tests: a replica's, a benchmark part's child."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether the process runs (a zombie has exited already: its parent has yet to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every 0.1 s; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


__all__ = ["pid_alive", "wait_for"]
