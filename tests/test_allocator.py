"""fe_ray.allocator: malloc settings applied to a running process, the user's choice winning, once per process; and
the in-process Network applying them when a context starts."""

from __future__ import annotations

import platform

import pytest

import fe_ray as fe
from fe_ray import allocator
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from tests.helpers.heap_rounds import heap_rounds
from tests.helpers.models import linear

_TUNE = "from fe_ray.allocator import tune_process_malloc; applied = tune_process_malloc()"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings configure glibc's malloc")
def test_tuning_a_running_process_keeps_freed_memory_for_the_next_round() -> None:
    applied, faults = heap_rounds(_TUNE)
    assert applied
    for where, (first, *later) in faults.items():
        assert first > 20_000, faults  # 96 MiB touched for the first time: ~24,600 pages
        assert max(later) < first // 20, (where, faults)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings configure glibc's malloc")
def test_an_empty_glibc_tunables_keeps_glibcs_defaults() -> None:
    applied, faults = heap_rounds(_TUNE, GLIBC_TUNABLES="")
    assert not applied
    # glibc's defaults: the main thread's 8 MiB blocks are mapped per allocation and unmapped when freed, and a side
    # thread's arena gives back part of its heap, so every round faults thousands of pages in again (the tuned
    # process above: under 1/20 of the first round's ~24,600).
    assert min(faults["main"]) > 20_000, faults
    assert min(faults["side"]) > 5_000, faults


@pytest.mark.parametrize("env, chosen", [({}, False),
                                         ({"MALLOC_TRIM_THRESHOLD_": "0"}, True),
                                         ({"MALLOC_MMAP_MAX_": "0"}, True),
                                         ({"GLIBC_TUNABLES": ""}, True),
                                         ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, True),
                                         ({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}, False)])
def test_malloc_chosen_reads_the_given_and_the_process_environment(monkeypatch: pytest.MonkeyPatch,
                                                                   env: dict[str, str], chosen: bool) -> None:
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                "GLIBC_TUNABLES"):
        monkeypatch.delenv(var, raising=False)
    assert allocator.malloc_chosen(env) is chosen
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert allocator.malloc_chosen() is chosen


def test_tuning_runs_once_per_process_and_not_where_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(allocator, "_apply", lambda: calls.append(1) or True)
    monkeypatch.setattr(allocator, "_tuned", None)
    monkeypatch.setattr(allocator, "malloc_chosen", lambda env_vars=None: False)
    assert allocator.tune_process_malloc() and allocator.tune_process_malloc()
    assert calls == [1]
    monkeypatch.setattr(allocator, "_tuned", None)
    monkeypatch.setattr(allocator, "malloc_chosen", lambda env_vars=None: True)
    assert allocator.tune_process_malloc() is False
    assert calls == [1]


def test_leaving_the_process_malloc_alone_stops_a_later_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(allocator, "_apply", lambda: calls.append(1) or True)
    monkeypatch.setattr(allocator, "malloc_chosen", lambda env_vars=None: False)
    monkeypatch.setattr(allocator, "_tuned", None)
    assert allocator.leave_process_malloc() is False
    assert allocator.tune_process_malloc() is False and calls == []
    # Settings already applied cannot be taken back: leaving says so.
    monkeypatch.setattr(allocator, "_tuned", None)
    assert allocator.tune_process_malloc() is True
    assert allocator.leave_process_malloc() is True and calls == [1]


def test_an_in_process_network_tunes_malloc_when_a_context_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import fe_ray.network

    calls: list[int] = []
    monkeypatch.setattr(fe_ray.network, "tune_process_malloc", lambda: calls.append(1) or True)
    model = linear("torch")
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"),
                              MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                              UpdateOp(model=model, loss_name="mse")])
    assert calls == []  # building a network changes nothing in the process
    with network(mode="train", epoch=1):
        assert calls == [1]
