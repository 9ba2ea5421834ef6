"""Seeding every random number generator fe_ray may use, without importing frameworks that are absent."""

from __future__ import annotations

import importlib.util
import os
import random

import numpy as np


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
