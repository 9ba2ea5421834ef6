"""Reference model architectures, one subpackage per framework (import only the one you use).

``fe_ray.architecture.pytorch`` holds PyTorch modules (channels-first inputs) and ``fe_ray.architecture.tensorflow``
functions returning Keras models (channels-last inputs), as FastEstimator's. Neither is imported until it is used, so
``fe.architecture.pytorch.ResNet9`` needs only PyTorch installed, and the TensorFlow ones only TensorFlow.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_FRAMEWORKS = ("pytorch", "tensorflow")


def __getattr__(name: str) -> ModuleType:
    if name in _FRAMEWORKS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FRAMEWORKS})
