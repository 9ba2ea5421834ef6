"""Custom neural-network layers, one subpackage per framework, as FastEstimator's ``fe.layers``.

``fe_ray.layers.pytorch`` holds ``torch.nn.Module`` layers (channels-first inputs): ``Cropping2D`` and
``HadamardCode``. ``fe_ray.layers.tensorflow`` holds Keras layers (channels-last inputs): ``HadamardCode``,
``InstanceNormalization`` and ``ReflectionPadding2D``. Neither subpackage is imported until it is used, and each
imports its framework only when one of its classes is first looked up, so ``import fe_ray.layers`` needs neither
PyTorch nor TensorFlow.
"""

from __future__ import annotations

from fe_ray.util.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, {"pytorch": "fe_ray.layers.pytorch",
                                                  "tensorflow": "fe_ray.layers.tensorflow"})
