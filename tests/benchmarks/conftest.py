"""Benchmarks run in-process here: keep what their ``--device cpu`` does to the environment inside each test."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _restore_visible_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    # harness.resolve_device("cpu") hides the GPUs for the rest of its process, as a benchmark run wants; a test
    # session must not carry that into other modules' tests. Setting the variable to its own value through
    # monkeypatch makes the test's end put it back, whatever the test did to it.
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
