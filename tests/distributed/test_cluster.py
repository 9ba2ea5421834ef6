"""Replica placement details: default bundles, resource validation, CPU replicas' thread counts, malloc settings
and priority."""

from __future__ import annotations

import functools
import os
import platform
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import fe_ray as fe
from fe_ray.distributed import cluster
from fe_ray.distributed.cluster import MALLOC_ENV, VISIBLE_GPUS_VAR, WORKER_NICENESS_VAR, replica_env
from fe_ray.distributed.errors import SourceMismatchError
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from tests.helpers.heap_rounds import heap_rounds
from tests.helpers.models import linear


def test_replica_env_sets_thread_share_and_malloc_and_respects_user_values(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                "GLIBC_TUNABLES", WORKER_NICENESS_VAR):
        monkeypatch.delenv(var, raising=False)
    env_of = functools.partial(replica_env, num_gpus=1.0)  # GPU bundles: the GPU variable is Ray's
    nice = {WORKER_NICENESS_VAR: "0"}  # the driver's priority, not Ray's default of 15 levels lower
    # GPU-only / fractional bundles: Ray's thread defaults, fe_ray's malloc settings.
    assert env_of(None, 0.0) == {"env_vars": {**MALLOC_ENV, **nice}}
    env = env_of({"pip": ["x"], "env_vars": {"OMP_NUM_THREADS": "3"}}, 2.0)
    assert env == {"pip": ["x"], "env_vars": {"OMP_NUM_THREADS": "3", "TF_NUM_INTRAOP_THREADS": "2", **MALLOC_ENV,
                                              **nice}}
    # A malloc choice of the user's, in runtime_env or exported on the driver, stands alone.
    env = env_of({"env_vars": {"MALLOC_TRIM_THRESHOLD_": "0"}}, 0.0)
    assert env == {"env_vars": {"MALLOC_TRIM_THRESHOLD_": "0", **nice}}
    assert env_of({"env_vars": {"GLIBC_TUNABLES": ""}}, 0.0) == {"env_vars": {"GLIBC_TUNABLES": "", **nice}}
    # Tunables of other glibc parts are no malloc choice.
    cpu_tunable = {"GLIBC_TUNABLES": "glibc.cpu.x86_shstk=0"}
    assert env_of({"env_vars": cpu_tunable}, 0.0) == {"env_vars": {**cpu_tunable, **MALLOC_ENV, **nice}}
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.cpu.x86_shstk=0:glibc.malloc.arena_max=2")
    assert env_of(None, 1.0) == {"env_vars": {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", **nice}}
    # A worker niceness of the user's, per actor or exported for the whole Ray session, stands.
    assert env_of({"env_vars": {WORKER_NICENESS_VAR: "15"}}, 0.0)["env_vars"][WORKER_NICENESS_VAR] == "15"
    monkeypatch.setenv(WORKER_NICENESS_VAR, "5")
    assert WORKER_NICENESS_VAR not in env_of(None, 0.0)["env_vars"]



def test_replica_env_hides_gpus_from_a_replica_whose_bundle_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # the driver's: Ray passes it on to every worker
    # A CPU bundle: Ray leaves the variable alone for actors without GPUs, so fe_ray empties it.
    assert replica_env(None, 2.0, num_gpus=0.0)["env_vars"][VISIBLE_GPUS_VAR] == ""
    # GPU bundles, whole or shared: Ray sets it to the GPUs it gave the actor.
    assert VISIBLE_GPUS_VAR not in replica_env(None, 2.0, num_gpus=1.0)["env_vars"]
    assert VISIBLE_GPUS_VAR not in replica_env(None, 0.0, num_gpus=0.25)["env_vars"]
    # GPUs managed outside Ray: the user's value for the replicas stands.
    env = replica_env({"env_vars": {VISIBLE_GPUS_VAR: "1"}}, 2.0, num_gpus=0.0)
    assert env["env_vars"][VISIBLE_GPUS_VAR] == "1"

@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="MALLOC_ENV configures glibc's malloc")
def test_malloc_env_keeps_a_side_threads_freed_memory() -> None:
    # A non-main thread's arena grows in 64 MiB heaps, which glibc unmaps once wholly free unless the top pad is a
    # heap's size: without MALLOC_TOP_PAD_ every round after the first faulted ~10,000 pages in again.
    _, faults = heap_rounds(**MALLOC_ENV)
    first, *later = faults["side"]
    assert first > 20_000, faults  # 96 MiB touched for the first time: ~24,600 pages
    assert max(later) < first // 20, faults


@pytest.mark.parametrize("resources, expected", [({"CPU": 8.0, "GPU": 2.0}, {"GPU": 1.0}),
                                                  ({"CPU": 4.0}, {"CPU": 1.0}),
                                                  ({"CPU": 4.0, "GPU": 0.5}, {"CPU": 1.0})])
def test_default_bundle_is_one_gpu_when_the_cluster_has_gpus(monkeypatch: pytest.MonkeyPatch,
                                                             resources: dict[str, float],
                                                             expected: dict[str, float]) -> None:
    monkeypatch.setattr(cluster.ray, "cluster_resources", lambda: resources)
    assert cluster.default_bundle() == expected


@pytest.mark.parametrize("bundle", [{}, {"CPU": -1}, {"GPU": True}, {"CPU": "2"}, [("CPU", 1)]])
def test_bad_resources_per_replica_are_named(bundle: object) -> None:
    with pytest.raises(ValueError, match="resources_per_replica"):
        cluster.check_bundle(bundle)  # type: ignore[arg-type]


def copy_sources(source: str, target: str) -> str:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_starting_ray_leaves_pythons_generator_where_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting the embedded Ray drew from Python's global generator, so a seeded program's own draws (a pop's
    random.random()) differed between num_replicas=2 and in process; ensure_ray puts the generator back."""
    import random

    import ray

    inits: list[dict] = []

    def init(**kwargs: object) -> None:  # Ray's start-up, drawing as the real one does
        random.random()
        inits.append(kwargs)

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    random.seed(123)
    expected = random.random()
    random.seed(123)
    cluster.ensure_ray()
    assert random.random() == expected and len(inits) == 1


def test_source_hash_follows_content_not_location(tmp_path: Path) -> None:
    package = os.path.join(cluster.SOURCE_ROOT, "fe_ray")
    copy = copy_sources(package, str(tmp_path / "elsewhere" / "fe_ray"))
    os.makedirs(os.path.join(copy, "__pycache__"), exist_ok=True)
    Path(copy, "__pycache__", "stale.py").write_text("ignored")
    assert cluster.hash_sources(copy) == cluster.hash_sources(package) == cluster.source_fingerprint()["sha256"]
    with open(os.path.join(copy, "distributed", "replica.py"), "a") as handle:
        handle.write("\n# edited\n")
    assert cluster.hash_sources(copy) != cluster.hash_sources(package)


def test_replicas_running_other_fe_ray_sources_are_refused() -> None:
    mine = cluster.source_fingerprint()
    same_elsewhere = {"rank": 0, "node_ip": "10.0.0.1",
                      "fe_ray_source": {"path": "/site/fe_ray", "sha256": mine["sha256"]}}
    cluster.check_same_source([same_elsewhere])  # the same code installed elsewhere is fine
    other = {"rank": 1, "node_ip": "10.0.0.2", "fe_ray_source": {"path": "/home/me/old/fe_ray", "sha256": "0" * 64}}
    with pytest.raises(SourceMismatchError, match=r"rank 1 .*/home/me/old/fe_ray.*working directory"):
        cluster.check_same_source([same_elsewhere, other])
    with pytest.raises(SourceMismatchError, match="older fe_ray"):
        cluster.check_same_source([{"rank": 0, "node_ip": "10.0.0.1"}])  # a replica too old to report its source
    edited = {"rank": 0, "node_ip": "10.0.0.1", "fe_ray_source": {"path": mine["path"], "sha256": "1" * 64}}
    with pytest.raises(SourceMismatchError, match="changed after the driver imported them.*Restart the driver"):
        cluster.check_same_source([edited])  # same checkout, edited after the driver imported it


@pytest.fixture(scope="module")
def session_with_exported_threads() -> Iterator[None]:
    """A local Ray whose workers inherit OMP_NUM_THREADS=2, as when a user exports it for the whole machine."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    previous = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "2"
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = previous


@pytest.mark.timeout(120)
def test_cpu_replica_threads_follow_their_cpu_share(session_with_exported_threads: None) -> None:
    model = linear("torch", lr=0.1)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
                          UpdateOp(model=model, loss_name="mse")], num_replicas=2,
                         resources_per_replica={"CPU": 1})
    try:
        infos = network.replica_info()
    finally:
        network.shutdown()
    assert [info["cpu_threads"] for info in infos] == [1, 1], infos
    assert [info["malloc_env"] for info in infos] == [MALLOC_ENV, MALLOC_ENV], infos
    # Replicas compute at the driver's priority, not at the 15 levels lower Ray gives its workers by default.
    assert [info["niceness"] for info in infos] == [os.getpriority(os.PRIO_PROCESS, 0)] * 2, infos
    # CPU bundles: no GPU visible, even on a GPU node (Ray leaves CUDA_VISIBLE_DEVICES alone for them).
    assert [info["visible_gpus"] for info in infos] == ["", ""], infos
    assert [info["device"] for info in infos] == ["cpu", "cpu"], infos
    assert {info["fe_ray_source"]["sha256"] for info in infos} == {cluster.source_fingerprint()["sha256"]}
