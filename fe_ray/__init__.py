"""fe_ray: FastEstimator-style training, data-parallel on Ray actors, for PyTorch and TensorFlow.

Change ``import fastestimator as fe`` to ``import fe_ray as fe``; pass ``num_replicas=N`` to ``fe.Network`` to
train on N Ray actors. Heavy submodules (Pipeline, Estimator, the distributed layer) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from fe_ray.build import build
from fe_ray.network import Network

__version__ = "0.1.0"

_LAZY = {
    "Pipeline": ("fe_ray.pipeline", "Pipeline"),
    "Estimator": ("fe_ray.estimator", "Estimator"),
    "enable_deterministic": ("fe_ray.backend.determinism", "enable_deterministic"),
}


# Subpackages reachable as attributes (``fe.trace.Accuracy``) without importing them all up front.
_SUBPACKAGES = ("architecture", "backend", "dataset", "io", "layers", "op", "pipeline", "schedule", "search", "slicer",
               "summary", "trace", "util", "xai")


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"fe_ray.{name}")
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'fe_ray' has no attribute {name!r}")


__all__ = ["Estimator", "Network", "Pipeline", "build", "enable_deterministic", "__version__"]
