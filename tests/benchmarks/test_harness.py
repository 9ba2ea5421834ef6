"""The benchmark harness's device choice."""

from __future__ import annotations

import os

import pytest

from benchmarks import harness


def test_cpu_hides_the_gpus_from_the_benchmark_and_its_ray_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    # fe_ray's Network trains on any visible GPU, so a CPU comparison on a GPU machine must hide them all (workers
    # inherit the variable).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert harness.resolve_device("cpu") == ("cpu", "")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_cpu_refuses_once_cuda_is_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeCuda:
        @staticmethod
        def is_initialized() -> bool:
            return True

    class FakeTorch:
        cuda = FakeCuda

    monkeypatch.setitem(harness.sys.modules, "torch", FakeTorch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(RuntimeError, match="before CUDA is initialised"):
        harness.resolve_device("cpu")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
