"""glibc malloc settings for the processes that train: fe_ray's replicas and the process of an in-process Network.

With glibc's defaults a training step's large tensors (activations, gradients) are unmapped or trimmed when freed and
faulted in again, zero-filled, by the next step. On the 2-core benchmark VM a replica's LeNet step on one CPU thread
took ~1,750 page faults, 3.0 ms of them in the kernel, 15.6 ms in all; with these settings ~27 faults and 12.1 ms. In
the driver, a plain torch ResNet-8 loop took ~7,700 faults per step and an in-process Network ~23,700 (its tensors
are freed in another order), and none with them (benchmarks/RESULTS.md).

The settings keep freed memory for the next step instead of giving it back: 32 MiB is the largest mmap threshold
glibc accepts; up to 1 GiB of free memory at the heap's top is kept, as caching allocators do. The top pad is for
threads other than the main one (a replica computes on its step thread): their arenas grow in heaps of 64 MiB, and
glibc unmaps a heap as soon as it is wholly free, whatever the trim threshold, unless the top pad is a heap's size. A
ResNet-8 step (batch 64) on a side thread took ~6,900 page faults and 15 ms of kernel time without it, ~64 and 0.5
ms with it.

A replica gets them as environment variables (:data:`MALLOC_ENV`, read by glibc at process start); a running process,
such as the user's own for an in-process Network, through ``mallopt`` (:func:`tune_process_malloc`). Either way a
user's own choice wins: a ``MALLOC_*_`` threshold variable, or a ``GLIBC_TUNABLES`` that is empty or names a
``glibc.malloc.`` tunable, and fe_ray sets nothing (``GLIBC_TUNABLES=""`` keeps glibc's defaults; processes started
from the driver inherit it). :func:`leave_process_malloc`, called before the first context, keeps the calling process
as it is and the replicas tuned. Other C libraries, and allocators loaded with ``LD_PRELOAD``, are left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Mapping

logger = logging.getLogger("fe_ray")

#: The settings, once: glibc's environment variable, its ``mallopt`` parameter (``M_TRIM_THRESHOLD`` -1,
#: ``M_TOP_PAD`` -2, ``M_MMAP_THRESHOLD`` -3 in glibc's malloc.h) and the value in bytes.
_SETTINGS = (("MALLOC_MMAP_THRESHOLD_", -3, 32 << 20), ("MALLOC_TRIM_THRESHOLD_", -1, 1 << 30),
             ("MALLOC_TOP_PAD_", -2, 64 << 20))

#: The settings as glibc's environment variables, for processes fe_ray starts (replicas).
MALLOC_ENV = {name: str(value) for name, _, value in _SETTINGS}

#: Variables by which a user (or an administrator) already chose malloc settings; fe_ray then adds none: its own
#: three, and the mmap count limit.
_MALLOC_VARS = (*MALLOC_ENV, "MALLOC_MMAP_MAX_")

_lock = threading.Lock()
_tuned: bool | None = None  # this process: None = not tried yet, else whether the settings were applied


def malloc_chosen(env_vars: Mapping[str, str] | None = None) -> bool:
    """Whether ``env_vars`` (a process's extra variables) or this process's environment already choose malloc
    settings: a ``MALLOC_*_`` threshold variable, or a ``GLIBC_TUNABLES`` that is empty or names a ``glibc.malloc.``
    tunable (other tunables, e.g. CPU ones, are unrelated)."""
    for source in (env_vars or {}, os.environ):
        tunables = source.get("GLIBC_TUNABLES")
        if any(var in source for var in _MALLOC_VARS) or tunables == "" or "glibc.malloc." in (tunables or ""):
            return True
    return False


def tune_process_malloc() -> bool:
    """Apply the settings to this process's glibc malloc through ``mallopt``, once; return whether they are applied.

    Nothing is set where the user chose malloc settings (:func:`malloc_chosen`; a replica started with
    :data:`MALLOC_ENV` counts as such), or where the C library is not glibc. Only future allocations and frees are
    affected: memory already in use stays where it is.
    """
    global _tuned
    with _lock:
        if _tuned is None:
            _tuned = False if malloc_chosen() else _apply()
        return _tuned


def leave_process_malloc() -> bool:
    """Keep this process's allocator as it is: an in-process Network will not tune it (replicas keep their settings,
    which :func:`malloc_chosen` governs). Return False, or True where the settings were already applied (they stay:
    glibc cannot restore its dynamic thresholds)."""
    global _tuned
    with _lock:
        if _tuned is None:
            _tuned = False
        return _tuned


def _apply() -> bool:
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl, macOS: AttributeError)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    applied = all(mallopt(param, value) == 1 for _, param, value in _SETTINGS)
    if applied:
        settings = ", ".join(f"{name}={value}" for name, _, value in _SETTINGS)
        logger.info("fe_ray: glibc malloc keeps freed memory for the next step (%s); set GLIBC_TUNABLES= (empty) or a "
                    "MALLOC_*_ variable to choose otherwise.", settings)
    return applied
