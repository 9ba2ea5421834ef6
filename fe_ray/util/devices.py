"""Hardware helpers of FastEstimator's ``fe.util``: counting GPUs and CPUs, limiting framework threads, and the
default torch device.

GPUs are counted without importing torch or TensorFlow where possible: importing a framework only to count devices
costs seconds and hundreds of MB per process (and a TF-only program would load torch). When torch is already
imported its own count is used, so the result is always the one ``torch.cuda.device_count()`` gives.
"""

from __future__ import annotations

import numbers
import os
import re
import shutil
import subprocess
import sys
import warnings
from typing import Any

# One line per physical GPU in `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6f1c...)".
_SMI_GPU_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?$")
_DEVICE_NODE = re.compile(r"^nvidia\d+$")
#: Env var marking the thread limit :func:`cpu_count` enforced in this process (as FastEstimator names it).
_ENFORCED_ENV = "FE_NUM_THREADS_"
#: Env var through which a user limits the threads of every FE program (e.g. in a job script).
_USER_ENV = "FE_NUM_THREADS"
#: Thread counts that processes started later read at start-up.
_THREAD_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS")


def _smi_gpus() -> list[tuple[int, str, str | None]] | None:
    """``(index, name, uuid)`` of each GPU that nvidia-smi lists, or None if nvidia-smi is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):  # a hung or broken driver: fall back to the device nodes
        return None
    if out.returncode != 0:
        return None
    found = [_SMI_GPU_LINE.match(line.strip()) for line in out.stdout.splitlines()]
    return [(int(m.group(1)), m.group(2), m.group(3)) for m in found if m is not None]


def _physical_gpus() -> list[tuple[int, str, str | None]]:
    """The NVIDIA GPUs this process can open, from nvidia-smi, else from the ``/dev/nvidiaN`` device nodes (a
    container only gets the nodes of the GPUs given to it)."""
    gpus = _smi_gpus()
    if gpus is not None:
        return gpus
    try:
        nodes = sorted(int(name[6:]) for name in os.listdir("/dev") if _DEVICE_NODE.match(name))
    except OSError:
        return []
    return [(index, "NVIDIA GPU", None) for index in nodes]


def _count_visible(gpus: list[tuple[int, str, str | None]], visible: str) -> int:
    """How many of ``gpus`` CUDA exposes under ``CUDA_VISIBLE_DEVICES=visible``.

    CUDA reads the comma-separated list up to its first invalid entry (an index out of range or repeated, an
    unknown UUID, ``-1``), so ``"0,1,-1,2"`` exposes two devices and ``""`` none.
    """
    indices = {index for index, _, _ in gpus}
    uuids = [uuid for _, _, uuid in gpus if uuid]
    seen: set[str] = set()
    for entry in (part.strip() for part in visible.split(",")):
        if entry.isdigit():
            valid = int(entry) in indices
            key = str(int(entry))
        elif entry.startswith(("GPU-", "MIG-")):
            # A unique prefix of a UUID selects that GPU; without nvidia-smi the UUIDs are unknown, so trust it.
            matches = [uuid for uuid in uuids if uuid.startswith(entry)]
            valid = len(matches) == 1 or (not uuids and entry.startswith("GPU-")) or entry.startswith("MIG-")
            key = matches[0] if len(matches) == 1 else entry
        else:
            valid, key = False, entry
        if not valid or key in seen:
            break
        seen.add(key)
    return len(seen)


def get_num_gpus() -> int:
    """The number of GPUs this process may use, 0 without any: ``torch.cuda.device_count()``, as FastEstimator
    counts them, so the GPUs ``CUDA_VISIBLE_DEVICES`` hides are not counted.

    If torch is already imported its count is taken; otherwise the GPUs are counted with ``nvidia-smi`` (or the
    device nodes) and the ``CUDA_VISIBLE_DEVICES`` rules, so that a TensorFlow program does not load torch.
    :func:`get_gpu_info` lists every GPU attached to the machine.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.cuda.device_count())
    gpus = _physical_gpus()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return len(gpus) if visible is None else _count_visible(gpus, visible)


def get_num_devices() -> int:
    """The number of GPUs this process may use, or 1 without any: FastEstimator's device count for scaling batch
    sizes (``batch_size=32 * fe.util.get_num_devices()``).

    It is ``max(get_num_gpus(), 1)``, i.e. ``max(torch.cuda.device_count(), 1)``: the GPUs left visible by
    ``CUDA_VISIBLE_DEVICES``, counted without importing a framework where torch is not loaded yet.

    In fe_ray the count is a natural ``num_replicas`` for a single machine: ``fe.Network(ops,
    num_replicas=fe.util.get_num_devices())`` puts one replica on each GPU (fe_ray's ``batch_size`` is the global
    batch, cut across replicas, as FastEstimator's is across GPUs). On a multi-node Ray cluster count the cluster's
    GPUs instead (``ray.cluster_resources()["GPU"]``); this function sees only the local machine.
    """
    return max(get_num_gpus(), 1)


def get_gpu_info() -> list[str]:
    """One line per GPU attached to this machine, ``"<index>: <name>"`` (e.g. ``"0: NVIDIA H100 80GB HBM3"``); an
    empty list without any.

    For logs and reports; every attached GPU is listed, whatever ``CUDA_VISIBLE_DEVICES`` hides (fe_ray's format,
    from ``nvidia-smi -L``).
    """
    return [f"{index}: {name}" for index, name, _ in _physical_gpus()]


def _parse_thread_env(name: str) -> int | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"Environment variable {name} must be an integer number of threads, got {value!r}; "
                         f"unset it or set e.g. {name}=4.") from None


def cpu_count(limit: int | None = None) -> int:
    """The number of CPU cores this process may use (its affinity mask, which honours ``docker --cpuset-cpus``),
    optionally capped, and the cap applied to torch's and TensorFlow's thread pools.

    A cap comes from ``limit`` or the ``FE_NUM_THREADS`` environment variable (the smaller wins; neither can raise
    the count above the cores available). Once a cap is applied it holds for the rest of the process: later calls
    return it, and a different ``limit`` is an error. torch and TensorFlow get the cap as their intra- and
    inter-op thread counts, at once if already imported, else as soon as the program imports them, and
    ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``TF_NUM_INTEROP_THREADS`` / ``TF_NUM_INTRAOP_THREADS`` are exported
    for the processes started afterwards. Set it before any training starts (TensorFlow refuses changes after its
    runtime starts, which is reported as a warning).

    Args:
        limit: The most threads to use, or None for no cap beyond ``FE_NUM_THREADS``.

    Returns:
        The usable core count, after the cap.

    Raises:
        TypeError: If ``limit`` is not an int or None.
        ValueError: If ``limit`` differs from a cap already applied in this process, the environment variables are
            not integers, or the result is below 1.
    """
    if limit is not None and (not isinstance(limit, numbers.Integral) or isinstance(limit, bool)):
        raise TypeError(f"cpu_count: limit must be an int or None, got {type(limit).__name__} {limit!r}.")
    limit = None if limit is None else int(limit)  # numpy integers too
    enforced = _parse_thread_env(_ENFORCED_ENV)
    if enforced is not None:
        if limit and limit != enforced:
            raise ValueError(f"cpu_count: a limit of {enforced} threads is already applied in this process, so "
                             f"limit={limit} cannot take effect; call cpu_count() without a limit, or set the limit "
                             f"once at the start of the program.")
        return enforced
    env_limit = _parse_thread_env(_USER_ENV)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cores = min(cores, limit or cores, env_limit or cores)
    if cores < 1:
        raise ValueError(f"cpu_count: at least 1 thread is needed, got {cores} (limit={limit!r}, "
                         f"{_USER_ENV}={env_limit!r}); pass a positive limit.")
    if limit or env_limit:
        os.environ[_ENFORCED_ENV] = str(cores)
        # The thread libraries of processes started from here on (data-loading workers, Ray's local workers, which
        # inherit this environment) read these at start-up, as FastEstimator exports them.
        for name in _THREAD_ENVS:
            os.environ[name] = str(cores)
        _limit_framework_threads(cores)
    return cores


def _limit_framework_threads(threads: int) -> None:
    from fe_ray.backend.import_hooks import when_imported

    def limit_torch(torch: Any) -> None:
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError as err:  # torch allows it once, before any inter-op work
            warnings.warn(f"cpu_count: torch's inter-op threads stay as they are ({err}).", RuntimeWarning,
                          stacklevel=3)

    def limit_tf(tf: Any) -> None:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError as err:  # TensorFlow's runtime already started
            warnings.warn(f"cpu_count: TensorFlow's thread pools stay as they are ({err}); set the limit before "
                          f"TensorFlow runs anything.", RuntimeWarning, stacklevel=3)

    when_imported("torch", "fe_ray.util.cpu_count", limit_torch)
    when_imported("tensorflow", "fe_ray.util.cpu_count", limit_tf)


def get_device() -> Any:
    """The ``torch.device`` models run on: the first CUDA GPU if there is one, else the CPU (imports torch).

    fe_ray's torch device choice, :func:`fe_ray.backend.torch.get_device`; unlike FastEstimator 1.7 it does not
    pick Apple's ``mps`` device.
    """
    from fe_ray.backend import get_backend

    return get_backend("torch").get_device()
