"""Reference model architectures, one subpackage per framework (import only the one you use).

``fe_ray.architecture.pytorch`` holds PyTorch modules (channels-first inputs) and ``fe_ray.architecture.tensorflow``
functions returning Keras models (channels-last inputs), as FastEstimator's. Neither is imported until it is used, so
``fe.architecture.pytorch.ResNet9`` needs only PyTorch installed, and the TensorFlow ones only TensorFlow.
"""

from __future__ import annotations

from fe_ray.util.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, {"pytorch": "fe_ray.architecture.pytorch",
                                                  "tensorflow": "fe_ray.architecture.tensorflow"})
