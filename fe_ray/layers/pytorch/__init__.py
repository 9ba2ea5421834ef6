"""PyTorch layers, as FastEstimator's ``fe.layers.pytorch`` (inputs are channels-first).

Each class's module (and so PyTorch itself) is imported the first time the class is looked up here, so importing
this package alone does not need PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fe_ray.util.lazy import lazy_attributes

if TYPE_CHECKING:
    from fe_ray.layers.pytorch.cropping_2d import Cropping2D
    from fe_ray.layers.pytorch.hadamard import HadamardCode

# exported class -> the module (in this package) defining it
_CLASSES = {"Cropping2D": "cropping_2d", "HadamardCode": "hadamard"}

__all__ = ["Cropping2D", "HadamardCode"]


__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}:{name}"
                                                  for name, module in _CLASSES.items()})
