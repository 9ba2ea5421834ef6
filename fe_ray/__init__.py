"""fe_ray: FastEstimator-style training, data-parallel on Ray actors, for PyTorch and TensorFlow.

Change ``import fastestimator as fe`` to ``import fe_ray as fe``; pass ``num_replicas=N`` to ``fe.Network`` to
train on N Ray actors. Heavy submodules (Pipeline, Estimator, the distributed layer) load on first use.
"""

from __future__ import annotations

from fe_ray.build import build
from fe_ray.network import Network
from fe_ray.util.lazy import lazy_attributes

__version__ = "0.1.0"

_LAZY = {
    "Pipeline": ("fe_ray.pipeline", "Pipeline"),
    "Estimator": ("fe_ray.estimator", "Estimator"),
    "enable_deterministic": ("fe_ray.backend.determinism", "enable_deterministic"),
    "record_history": ("fe_ray.estimator", "record_history"),
}


# Subpackages reachable as attributes (``fe.trace.Accuracy``) without importing them all up front.
_SUBPACKAGES = ("architecture", "backend", "dataset", "io", "layers", "op", "pipeline", "schedule", "search", "slicer",
               "summary", "trace", "util", "xai")


__getattr__, __dir__ = lazy_attributes(__name__, {**{name: f"fe_ray.{name}" for name in _SUBPACKAGES},
                                                  **{name: f"{module}:{attr}" for name, (module, attr)
                                                     in _LAZY.items()}})


__all__ = ["Estimator", "Network", "Pipeline", "build", "enable_deterministic", "record_history", "__version__"]
