"""Benchmarks run in-process here: keep what their ``--device cpu`` does to the environment inside each test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_visible_gpus() -> Iterator[None]:
    # harness.resolve_device("cpu") hides the GPUs for the rest of its process, as a benchmark run wants; a test
    # session must not carry that into other modules' tests.
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    yield
    if before is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = before
