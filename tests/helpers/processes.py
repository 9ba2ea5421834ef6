"""Processes of this machine in tests: waiting on a replica's or a benchmark part's child; a Ray cluster of its own
in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_HEAD = """
import json, sys, ray
ray.init(**json.loads(sys.argv[1]))
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # hold the cluster until the test closes our stdin
ray.shutdown()
"""


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


@contextmanager
def ray_head(env: Mapping[str, str], cwd: str, **init_kwargs: Any) -> Iterator[str]:
    """A Ray cluster that a child process starts with ``ray.init(**init_kwargs)`` (JSON values), as a cluster's head
    node; yields its GCS address and shuts it down when the block ends. Drivers joining it, a job's included, need
    its token where ``env`` turns token authentication on."""
    head = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_HEAD), json.dumps(init_kwargs)], cwd=cwd,
                            env=dict(env), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        assert head.stdout is not None
        address = head.stdout.readline().strip()
        assert address, "the head process did not start a cluster"
        yield address
    finally:
        if head.stdin is not None:
            head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()


__all__ = ["pid_alive", "ray_head", "wait_for"]
