"""Seeding every random number generator fe_ray may use, without importing frameworks that are absent."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

_last_seed: int | None = None


def enable_deterministic(seed: int) -> None:
    """Seed Python, numpy, and (when installed) torch and TensorFlow, and ask them for deterministic kernels.

    Frameworks are imported only if installed, so a torch-only environment never pulls in TensorFlow.

    Args:
        seed: The seed for every generator.

    Raises:
        TypeError: If ``seed`` is not an int.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"enable_deterministic needs an int seed, got {seed!r} ({type(seed).__name__}).")
    global _last_seed
    _last_seed = seed
    os.environ["PYTHONHASHSEED"] = str(seed)  # only affects subprocesses (e.g. Ray workers) started from now on
    random.seed(seed)
    np.random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)
        # Deterministic cuBLAS needs this workspace setting; it is read when CUDA initialises.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        # warn_only: ops without a deterministic kernel warn instead of failing the whole run.
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow as tf

        tf.keras.utils.set_random_seed(seed)
        tf.config.experimental.enable_op_determinism()


def last_seed() -> int | None:
    """The seed of the latest :func:`enable_deterministic` call in this process (None if never called)."""
    return _last_seed


def seed_generators(seed: int) -> None:
    """Seed Python's, numpy's and (if imported) torch's global generators, without the determinism switches."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def get_rng_state() -> dict[str, Any]:
    """The states of Python's, numpy's and (if imported) torch's global generators (CPU, and CUDA if in use)."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state()}
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = torch.get_rng_state().numpy().copy()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = [s.numpy().copy() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore a :func:`get_rng_state` snapshot (parts for absent frameworks or devices are skipped)."""
    if "python" in state:
        random.setstate(state["python"])
    if "numpy" in state:
        np.random.set_state(state["numpy"])
    torch = sys.modules.get("torch")
    if torch is not None and "torch" in state:
        torch.set_rng_state(torch.from_numpy(np.array(state["torch"], dtype=np.uint8)))  # writable copy
    if torch is not None and state.get("cuda") and torch.cuda.is_available():
        cuda = [torch.from_numpy(np.array(s, dtype=np.uint8)) for s in state["cuda"]]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
