"""What a replica reports about its process: rank, pid, node, device, threads and the settings that change speed.

The driver caches it (``ReplicaGroup.infos``), names replicas in errors with it, checks that every replica runs
the driver's fe_ray sources, and shows it to users through ``RayNetwork.replica_info()``.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def process_info(rank: int, framework: str, network: Any, node: str) -> dict[str, Any]:
    """The info dict of the replica of ``rank`` whose Network is ``network`` (None before setup) on ``node``."""
    from fe_ray.backend.determinism import deterministic_kernels
    from fe_ray.distributed.cluster import source_fingerprint

    device = getattr(network, "device", None) if network is not None else None
    if framework == "tf":
        device = _tf_device()
    info: dict[str, Any] = {"rank": rank, "pid": os.getpid(), "node_ip": node, "device": str(device or "cpu"),
                            "framework": framework, "python": sys.version.split()[0],
                            "fe_ray_source": source_fingerprint()}
    if framework == "torch":
        import torch

        info["cpu_threads"] = torch.get_num_threads()
    info["malloc_env"] = {var: os.environ[var] for var in sorted(os.environ)
                          if var.startswith("MALLOC_") or var == "GLIBC_TUNABLES"}
    info["niceness"] = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None
    info["visible_gpus"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    info["deterministic_kernels"] = deterministic_kernels(framework)
    return info


def node_ip() -> str:
    """This node's IP as Ray sees it, or localhost's where Ray is not installed (a plain multi-process test)."""
    try:
        from fe_ray.distributed.cluster import node_ip as ray_node_ip
    except ImportError:
        import socket

        return socket.gethostbyname("localhost")
    return ray_node_ip()


def _tf_device() -> str:
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return gpus[0].name if gpus else "/CPU:0"


__all__ = ["node_ip", "process_info"]
