"""TensorFlow / Keras layers, as FastEstimator's ``fe.layers.tensorflow`` (inputs are channels-last).

Each class's module (and so TensorFlow / Keras) is imported the first time the class is looked up here, so importing
this package alone does not need TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fe_ray.util.lazy import lazy_attributes

if TYPE_CHECKING:
    from fe_ray.layers.tensorflow.hadamard import HadamardCode
    from fe_ray.layers.tensorflow.instance_norm import InstanceNormalization
    from fe_ray.layers.tensorflow.reflection_padding_2d import ReflectionPadding2D

# exported class -> the module (in this package) defining it
_CLASSES = {"HadamardCode": "hadamard", "InstanceNormalization": "instance_norm",
            "ReflectionPadding2D": "reflection_padding_2d"}

__all__ = ["HadamardCode", "InstanceNormalization", "ReflectionPadding2D"]


__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}:{name}"
                                                  for name, module in _CLASSES.items()})
