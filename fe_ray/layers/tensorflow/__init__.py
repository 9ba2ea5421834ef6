"""TensorFlow / Keras layers, as FastEstimator's ``fe.layers.tensorflow`` (inputs are channels-last).

Each class's module (and so TensorFlow / Keras) is imported the first time the class is looked up here, so importing
this package alone does not need TensorFlow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fe_ray.layers.tensorflow.hadamard import HadamardCode
    from fe_ray.layers.tensorflow.instance_norm import InstanceNormalization
    from fe_ray.layers.tensorflow.reflection_padding_2d import ReflectionPadding2D

# exported class -> the module (in this package) defining it
_CLASSES = {"HadamardCode": "hadamard", "InstanceNormalization": "instance_norm",
            "ReflectionPadding2D": "reflection_padding_2d"}

__all__ = ["HadamardCode", "InstanceNormalization", "ReflectionPadding2D"]


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        value = getattr(importlib.import_module(f"{__name__}.{_CLASSES[name]}"), name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CLASSES})
