"""Launching replicas: connecting to Ray, reserving resources, and starting the actors.

This is the one place that makes plain classes into Ray actors (:func:`start_actor`), so the rest of the
distributed layer stays testable without Ray's decorators.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import random
import re
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

import fe_ray
from fe_ray.allocator import MALLOC_ENV, malloc_chosen
from fe_ray.distributed.errors import PlacementError, SourceMismatchError

logger = logging.getLogger(__name__)

#: The names Ray gives a placement group's share of a resource (``CPU_group_<bundle>_<id>``, ``CPU_group_<id>``).
_GROUP_RESOURCE = re.compile(r"_group_(\d+_)?[0-9a-f]{16,}$")

#: Seconds between the progress lines of a placement that waits for resources.
PLACEMENT_PROGRESS_S = 30.0

#: The source tree fe_ray is imported from; actors put it first on their PYTHONPATH so they run the same code.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fe_ray.__file__)))


@functools.lru_cache(maxsize=1)
def source_fingerprint() -> dict[str, str]:
    """Where this process's fe_ray comes from and a hash of its Python sources.

    Ray puts the driver's working directory first on every worker's import path (before PYTHONPATH), so a
    replica can import another fe_ray checkout than the driver's; comparing hashes catches that, while the same
    code at another path (an installed copy) passes.
    """
    package = os.path.join(SOURCE_ROOT, "fe_ray")
    return {"path": package, "sha256": hash_sources(package)}


def hash_sources(package: str) -> str:
    """SHA-256 over the relative paths and contents of the ``.py`` files under ``package`` (caches skipped)."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, package).encode())
            with open(path, "rb") as handle:
                digest.update(handle.read())
    return digest.hexdigest()


def check_same_source(infos: Sequence[Mapping[str, Any]]) -> None:
    """Raise if a replica (its ``info()``) runs other fe_ray sources than this driver.

    Raises:
        SourceMismatchError: Naming the replica, both paths and the fix.
    """
    mine = source_fingerprint()
    for info in infos:
        theirs = info.get("fe_ray_source") or {}
        if theirs.get("sha256") == mine["sha256"]:
            continue
        if theirs.get("path") == mine["path"]:
            raise SourceMismatchError(
                f"replica rank {info.get('rank')} (node {info.get('node_ip')}) imported other fe_ray sources under "
                f"{mine['path']} than the driver did: they changed after the driver imported them, or that node "
                "holds another fe_ray at the same path. Restart the driver so that both run the same code (with the "
                "same fe_ray on every node); a run with checkpoints resumes from its latest one.")
        raise SourceMismatchError(
            f"replica rank {info.get('rank')} (node {info.get('node_ip')}) runs fe_ray from "
            f"{theirs.get('path', 'an older fe_ray that does not say where')}, which differs from the driver's "
            f"{mine['path']}. Ray puts the driver's working directory first on every worker's import path: run "
            "the driver from a directory without another fe_ray checkout (or install the same fe_ray on every "
            "node).")


def ensure_ray(runtime_env: Mapping[str, Any] | None = None) -> None:
    """Initialise Ray unless it already is.

    ``ray.init()`` connects to the cluster named by ``RAY_ADDRESS`` (or a running local one it is pointed at) and
    otherwise starts an embedded local Ray. An already-initialised Ray (e.g. the user's own ``ray.init``) is used
    as is; the per-actor runtime environment from :func:`actor_runtime_env` still makes actors import this fe_ray.
    """
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    if runtime_env:
        kwargs["runtime_env"] = dict(runtime_env)
    # Starting Ray draws from Python's global generator: a seeded program's own draws (a pop's random.random())
    # would differ from the same program in process.
    python_random = random.getstate()
    try:
        ray.init(**kwargs)
    finally:
        random.setstate(python_random)


def actor_runtime_env(user_env: Mapping[str, Any] | None = None, more_nodes: bool = False) -> dict[str, Any]:
    """The runtime environment for replica actors: the user's, plus what makes fe_ray importable.

    On a local (single-node) Ray, actors share this file system, so prepending the source tree and the driver's
    import paths to PYTHONPATH is enough and costs nothing. On a cluster of several nodes, or one expected to grow
    (``more_nodes``: an autoscaler's nodes), other machines must import the same fe_ray by themselves: from the job's
    ``working_dir`` (``ray job submit --working-dir .`` from a checkout) or an fe_ray installed on every node (as
    cluster.yaml does), and :func:`check_same_source` names a replica that imported another one. Ray accepts local
    directories as ``py_modules`` only for the whole job (``ray.init(runtime_env=...)``), not per actor, so fe_ray
    cannot ship itself here.
    """
    env = dict(user_env or {})
    if not more_nodes and _is_local_cluster():
        variables = dict(env.get("env_vars", {}))
        existing = variables.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        # The driver's own import paths too (script folder, test folders): cloudpickle sends functions of
        # importable modules by reference, so replicas must be able to import every module the driver can.
        paths = _unique([SOURCE_ROOT, *existing.split(os.pathsep), *_driver_paths()])
        variables["PYTHONPATH"] = os.pathsep.join(paths)
        variables.setdefault("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
        env["env_vars"] = variables
    return env


def _driver_paths() -> list[str]:
    """User directories on the driver's sys.path (not the interpreter's or installed packages' folders)."""
    system = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    out = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if not os.path.isdir(path) or "site-packages" in path or "dist-packages" in path:
            continue
        if any(path == root or path.startswith(root + os.sep) for root in system):
            continue
        out.append(path)
    return out


def _unique(paths: list[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        if path and path not in out:
            out.append(path)
    return out


def _is_local_cluster() -> bool:
    try:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
    except Exception:  # noqa: BLE001 - treat an unknown topology as remote-safe
        return False
    local_ip = node_ip()
    return len(nodes) == 1 and nodes[0].get("NodeManagerAddress") in (local_ip, "127.0.0.1")


def node_ip() -> str:
    """This process's node IP as Ray sees it (falls back to loopback outside Ray)."""
    try:
        return str(ray.util.get_node_ip_address())
    except Exception:  # noqa: BLE001
        return socket.gethostbyname("localhost")


def default_bundle() -> dict[str, float]:
    """One GPU per replica when the cluster has GPUs, else one CPU."""
    return {"GPU": 1.0} if ray.cluster_resources().get("GPU", 0) >= 1 else {"CPU": 1.0}


def check_bundle(bundle: Mapping[str, float]) -> dict[str, float]:
    """Validate ``resources_per_replica``.

    Raises:
        ValueError: If it is not a non-empty mapping of resource names to non-negative numbers.
    """
    if not isinstance(bundle, Mapping) or not bundle:
        raise ValueError(f"resources_per_replica must be a non-empty dict such as {{'CPU': 1}} or {{'GPU': 1}}, got "
                         f"{bundle!r}.")
    out = {}
    for key, value in bundle.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not isinstance(key, str) or not number or not math.isfinite(value) or value < 0:
            raise ValueError(f"resources_per_replica entries must map a resource name to a finite number >= 0, got "
                             f"{key!r}: {value!r}.")
        out[key] = float(value)
    if not any(out.values()):
        # Ray drops zero amounts, and a bundle left empty cannot be placed.
        raise ValueError(f"resources_per_replica asks for nothing ({bundle!r}); give each replica at least one "
                         "resource, such as {'CPU': 1} or {'GPU': 1}.")
    return out


def reserve(num_replicas: int, bundle: Mapping[str, float], timeout_s: float,
            strategy: str = "PACK", wait_for_nodes: bool = False) -> PlacementGroup:
    """Reserve one ``bundle`` per replica in a placement group, or fail fast.

    While the group waits for resources a warning every :data:`PLACEMENT_PROGRESS_S` seconds says what it waits for
    and what is free.

    Args:
        num_replicas: How many bundles.
        bundle: The resources of one replica.
        timeout_s: How long to wait for the group to be placed.
        strategy: The placement group's strategy.
        wait_for_nodes: Wait also when the cluster's current total cannot hold the request: an autoscaler adds
            nodes for a pending placement group (up to its ``max_workers``). Without it, such a request fails at
            once, since no amount of waiting places it on a fixed cluster.

    Raises:
        PlacementError: Immediately if the cluster's total resources cannot hold the request (unless
            ``wait_for_nodes``), or after ``timeout_s`` if the group is still not placed; the message names what was
            asked and what is available.
    """
    short = _shortfall(num_replicas, bundle)
    if short and not wait_for_nodes:
        raise PlacementError(_placement_message(num_replicas, bundle, f"the cluster has only {short} in total",
                                                fix="or pass wait_for_nodes=True when an autoscaler adds nodes"))
    nodes = sum(1 for node in ray.nodes() if node.get("Alive")) if strategy == "STRICT_SPREAD" else num_replicas
    if nodes < num_replicas and not wait_for_nodes:
        # One bundle per node: no wait places more of them than there are nodes.
        raise PlacementError(_placement_message(num_replicas, bundle, f"placement_strategy='STRICT_SPREAD' puts each "
                                                f"replica on a node of its own and the cluster has {nodes} node(s)",
                                                fix="use placement_strategy='SPREAD' (or 'PACK'), or pass "
                                                    "wait_for_nodes=True when an autoscaler adds nodes"))
    if short:
        logger.warning("fe_ray: the cluster has only %s in total for %d replica(s) with resources_per_replica=%s; "
                       "waiting up to %gs (placement_timeout_s) for nodes to join (wait_for_nodes=True).", short,
                       num_replicas, dict(bundle), timeout_s)
    group = placement_group([dict(bundle) for _ in range(num_replicas)], strategy=strategy)
    ready = group.ready()
    start = time.monotonic()
    while True:
        remaining = timeout_s - (time.monotonic() - start)
        done, _ = ray.wait([ready], timeout=max(0.0, min(PLACEMENT_PROGRESS_S, remaining)))
        if done:
            ray.get(ready)
            return group
        if remaining <= PLACEMENT_PROGRESS_S:
            break
        # A long wait (resources held by another job, nodes still joining) must not look like a hang.
        short = _shortfall(num_replicas, bundle)
        logger.warning("fe_ray: still waiting for %d replica(s) with resources_per_replica=%s (%.0fs of "
                       "placement_timeout_s=%gs); available now: %s%s", num_replicas, dict(bundle),
                       time.monotonic() - start, timeout_s, _available(bundle),
                       f"; the cluster has only {short} in total" if short else "")
    remove_placement_group(group)
    short = _shortfall(num_replicas, bundle)
    reason = (f"it was not placed within {timeout_s:g}s while waiting for nodes, and the cluster has only {short} "
              "in total (no autoscaler, nodes at their max_workers, or still starting)" if short else
              f"it was not placed within {timeout_s:g}s (resources are held by other tasks or actors, or no single "
              "node fits a bundle)")
    raise PlacementError(_placement_message(num_replicas, bundle, reason,
                                            fix="or raise placement_timeout_s" if wait_for_nodes else None))


def _shortfall(num_replicas: int, bundle: Mapping[str, float]) -> str:
    """What the cluster's total resources lack for the request, e.g. "2 GPU" (empty when it could hold it)."""
    total = ray.cluster_resources()
    return ", ".join(f"{total.get(key, 0.0):g} {key}" for key, value in bundle.items()
                     if total.get(key, 0.0) < value * num_replicas)


def _placement_message(num_replicas: int, bundle: Mapping[str, float], reason: str, fix: str | None = None) -> str:
    total = ray.cluster_resources()
    # Ray's resource names are case-sensitive: {"cpu": 1} asks for a resource no node has.
    renames = {key: known for key in bundle if key not in total
               for known in total if known.lower() == key.lower()}
    spelling = "".join(f" Resource names are case-sensitive: did you mean {known!r} for {key!r}?"
                       for key, known in renames.items())
    return (f"Cannot place {num_replicas} replica(s) with resources_per_replica={dict(bundle)}: {reason}.{spelling} "
            f"Available now: {_available(bundle)}. Lower num_replicas, pass a smaller resources_per_replica, add "
            f"nodes{', ' + fix if fix else ''}.")


def _available(bundle: Mapping[str, float]) -> dict[str, float]:
    """The cluster's free resources, the asked-for kinds always included."""
    # Placement groups' own bookkeeping resources ("bundle_group_...", "CPU_group_0_<id>": what a group holds,
    # free only to its own tasks) are noise here.
    free = ray.available_resources()
    available = {key: round(value, 3) for key, value in sorted(free.items())
                 if not key.startswith(("node:", "memory", "object_store_memory", "bundle_group_"))
                 and not _GROUP_RESOURCE.search(key)}
    available.update({key: round(free.get(key, 0.0), 3) for key in bundle if key not in available})
    return available


def release(group: PlacementGroup | None) -> None:
    """Remove a placement group (ignoring errors: Ray may already be shutting down)."""
    if group is None or not ray.is_initialized():  # after ray.shutdown() a Ray call would start a new Ray
        return
    try:
        remove_placement_group(group)
    except Exception:  # noqa: BLE001
        pass


def start_actor(cls: type, args: tuple[Any, ...], group: PlacementGroup | None, bundle_index: int,
                bundle: Mapping[str, float], runtime_env: Mapping[str, Any] | None, name: str | None = None) -> Any:
    """Start ``cls(*args)`` as a Ray actor in bundle ``bundle_index`` of ``group`` (the one ``ray.remote`` call).

    The actor asks for the bundle's CPUs / GPUs so that Ray sets ``CUDA_VISIBLE_DEVICES`` for it; it is never
    restarted by Ray (fe_ray's supervisor decides what to do when a replica dies).
    """
    resources = dict(bundle)
    options: dict[str, Any] = {
        "num_cpus": resources.pop("CPU", 0.0),
        "num_gpus": resources.pop("GPU", 0.0),
        "max_restarts": 0,  # one method at a time, in call order (threaded actors would reorder calls)
    }
    if "memory" in resources:  # an option of its own for Ray, never among custom resources (a bundle takes both)
        options["memory"] = resources.pop("memory")
    if resources:
        options["resources"] = resources
    if group is not None:
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=bundle_index)
    options["runtime_env"] = replica_env(runtime_env, options["num_cpus"], num_gpus=options["num_gpus"])
    if name:
        options["name"] = name
    return ray.remote(cls).options(**options).remote(*args)


#: Ray's variable for the niceness its worker processes add to their own at start-up (default 15). Set per actor in
#: the runtime environment, it applies to that actor's process only.
WORKER_NICENESS_VAR = "RAY_worker_niceness"


#: The variable CUDA reads to decide which GPUs a process may open; ``""`` means none.
VISIBLE_GPUS_VAR = "CUDA_VISIBLE_DEVICES"


def replica_env(runtime_env: Mapping[str, Any] | None, num_cpus: float, *, num_gpus: float) -> dict[str, Any]:
    """``runtime_env`` plus the environment variables a replica process runs best with; the user's values win.

    * No GPU in the bundle (``num_gpus == 0``): :data:`VISIBLE_GPUS_VAR` ``=""``, so the replica runs on the CPU
      as its bundle says. Ray sets that variable only for actors that ask for GPUs (it leaves it alone for the
      others unless ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO`` is set), so on a GPU node a CPU replica would otherwise
      see every GPU there and use one that Ray may have given to another actor, and N such replicas would all
      pick GPU 0 (NCCL then fails with "Duplicate GPU detected": seen on a 1-GPU machine on 2026-11-26). To let
      CPU bundles use GPUs anyway (GPUs managed outside Ray), set the variable in ``runtime_env["env_vars"]``.

    * Intra-op thread counts of torch and TF set to the actor's CPU share (CPU bundles of at least one CPU; GPU or
      fractional ones keep Ray's defaults). A worker process inherits the driver's environment, so an
      ``OMP_NUM_THREADS`` exported for the whole machine (common on HPC nodes) would give every one of N replicas
      that many threads on the same cores.
    * :data:`~fe_ray.allocator.MALLOC_ENV` (why: :mod:`fe_ray.allocator`), unless ``runtime_env["env_vars"]`` or
      the driver's environment already chose malloc settings (:func:`~fe_ray.allocator.malloc_chosen`): then the
      user's choice stands alone; ``GLIBC_TUNABLES=""`` keeps glibc's defaults. Other C libraries, and allocators
      loaded with ``LD_PRELOAD``, ignore these variables.
    * The scheduling priority of the Ray node (on the embedded local Ray, the driver's): :data:`WORKER_NICENESS_VAR`
      ``=0`` adds no levels, unless the user set that variable in ``runtime_env`` or the driver's environment. Ray
      starts its workers 15 nice levels lower so that the raylet stays responsive under arbitrary task loads, but a
      replica is the training itself: at nice 15 its intra-op threads lose their core to every thread of normal
      priority on the node (the driver's merge and traces, Ray's own service threads), and one delayed thread holds
      up the whole step. On the 2-core benchmark machine the same plain TF loop in an actor ran 19% faster at nice 0,
      one TF replica 14% and 5% in two runs (paired; unchanged in a third, as torch's and two replicas' steps).
      Ray's job supervisor starts job drivers with the same setting.
    """
    env = dict(runtime_env or {})
    env_vars = dict(env.get("env_vars") or {})
    if num_cpus >= 1:
        for var in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
            env_vars.setdefault(var, str(int(num_cpus)))
    if num_gpus <= 0:
        env_vars.setdefault(VISIBLE_GPUS_VAR, "")
    if not malloc_chosen(env_vars):
        env_vars.update(MALLOC_ENV)
    if WORKER_NICENESS_VAR not in os.environ:
        env_vars.setdefault(WORKER_NICENESS_VAR, "0")
    env["env_vars"] = env_vars
    return env


def ray_session() -> tuple[str, str] | None:
    """This driver's current connection to Ray, None when Ray is not initialised: a ``ray.shutdown()`` and a new
    ``ray.init()`` change it (the job id, for a cluster connected to again; the node id, for a new local Ray, whose
    job ids start over), and the actors of the earlier one are gone."""
    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return context.get_job_id(), context.get_node_id()


def exit_actors(actors: Sequence[Any], grace_s: float) -> int:
    """Ask actors to exit their processes the normal way; how many had not begun to exit after ``grace_s`` (an actor
    busy with a call, e.g. a step an interrupted driver left, begins once that call ends).

    Each actor first runs its ``shutdown`` method, then Ray's ``__ray_terminate__``, which exits the process as a
    program ends: its ``atexit`` handlers run (TF deletes the modules autograph generated in the temp directory,
    logging handlers flush, user hooks run), whereas :func:`kill_actor` ends it at once. Calls to an actor run in
    order, so the exit waits for the shutdown. The caller kills the actors afterwards: that stops those still busy
    and leaves an exit that has begun to finish (Ray counts such an actor as dead already).
    """
    if not actors or not ray.is_initialized():
        return len(actors)
    exits = []
    for actor in actors:
        actor.shutdown.remote()
        exits.append(actor.__ray_terminate__.remote())
    # An exit's reference resolves (to an ActorDiedError) once the actor has begun to exit.
    begun, _ = ray.wait(exits, num_returns=len(exits), timeout=grace_s)
    return len(exits) - len(begun)


def kill_actor(actor: Any) -> None:
    """Kill an actor now (no graceful exit: it may be stuck in a collective)."""
    if not ray.is_initialized():
        return  # Ray already shut down (e.g. at exit): its actors are gone, and ray.kill would start a new Ray
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already dead, or Ray shut down
        pass


# Taken at import: a process runs the code it imported, whatever changes on disk afterwards (an edit during a run).
source_fingerprint()

__all__ = ["MALLOC_ENV", "SOURCE_ROOT", "VISIBLE_GPUS_VAR", "WORKER_NICENESS_VAR", "actor_runtime_env", "check_bundle",
           "check_same_source", "default_bundle", "ensure_ray", "exit_actors", "hash_sources", "kill_actor", "node_ip",
           "ray_session", "release", "replica_env", "reserve", "source_fingerprint", "start_actor"]
