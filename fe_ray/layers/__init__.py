"""Custom neural-network layers, one subpackage per framework, as FastEstimator's ``fe.layers``.

``fe_ray.layers.pytorch`` holds ``torch.nn.Module`` layers (channels-first inputs): ``Cropping2D`` and
``HadamardCode``. ``fe_ray.layers.tensorflow`` holds Keras layers (channels-last inputs): ``HadamardCode``,
``InstanceNormalization`` and ``ReflectionPadding2D``. Neither subpackage is imported until it is used, and each
imports its framework only when one of its classes is first looked up, so ``import fe_ray.layers`` needs neither
PyTorch nor TensorFlow.
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
