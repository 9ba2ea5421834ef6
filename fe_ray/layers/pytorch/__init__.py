"""PyTorch layers, as FastEstimator's ``fe.layers.pytorch`` (inputs are channels-first).

Each class's module (and so PyTorch itself) is imported the first time the class is looked up here, so importing
this package alone does not need PyTorch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fe_ray.layers.pytorch.cropping_2d import Cropping2D
    from fe_ray.layers.pytorch.hadamard import HadamardCode

# exported class -> the module (in this package) defining it
_CLASSES = {"Cropping2D": "cropping_2d", "HadamardCode": "hadamard"}

__all__ = ["Cropping2D", "HadamardCode"]


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        value = getattr(importlib.import_module(f"{__name__}.{_CLASSES[name]}"), name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CLASSES})
