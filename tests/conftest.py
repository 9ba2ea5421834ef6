"""Fixtures shared by every test folder: one small local Ray session per test module that runs replicas."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Ends the process right after the summary when FE_RAY_TEST_FAST_EXIT=1 (`scripts/dev test`); see its docstring.
pytest_plugins = ("tests.fast_exit",)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("RAY_DEDUP_LOGS", "1")


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    """A local Ray with 4 CPUs for this module's tests (replicas take 1 CPU each)."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    # address="local": always a new instance of this module's own, never a cluster named by RAY_ADDRESS or one that
    # an earlier, crashed run left recorded in /tmp/ray (plain ray.init() would try to join it and fail).
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
