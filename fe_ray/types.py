"""Shared types (FastEstimator's ``fastestimator.types``): the ``FilteredData`` marker and runtime-checkable aliases.

``Tensor``, ``Array``, ``DataSequence`` and ``Model`` work with ``isinstance``/``issubclass`` without importing torch
or TensorFlow when this module loads: each check imports the frameworks only when it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["Array", "ArrayT", "DataSequence", "FilteredData", "Model", "ModelT", "Tensor", "TensorT"]


class FilteredData:
    """Returned by a NumpyOp's ``forward`` (or ``forward_batch`` after a Batch op) to drop its sample (or batch).

    Args:
        replacement: True: the loader puts another sample of the dataset in its place, so batches keep their size and
            the epoch its number of steps. False: the sample is dropped without a replacement, so its batch comes out
            shorter (a batch dropped by ``forward_batch`` is skipped).
    """

    def __init__(self, replacement: bool = True) -> None:
        self.replacement = replacement

    def __repr__(self) -> str:
        return "FilteredData"


TensorT = TypeVar("TensorT")
ArrayT = TypeVar("ArrayT")
ModelT = TypeVar("ModelT")


def _framework_types(kind: str) -> tuple[type, ...]:
    """The framework classes behind an alias, imported on first use so that loading this module stays cheap.

    Args:
        kind: "tensor" (torch and TF tensors, TF variables) or "model" (torch modules, Keras models).

    Returns:
        The classes to check against.
    """
    import tensorflow as tf
    import torch

    if kind == "tensor":
        return (torch.Tensor, tf.Tensor, tf.Variable)
    return (torch.nn.Module, tf.keras.Model)


class _MetaTensor(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, _framework_types("tensor"))

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _framework_types("tensor"))


class Tensor(metaclass=_MetaTensor):
    """A torch or TensorFlow tensor (for ``isinstance`` checks and type hints)."""


class _MetaArray(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        import numpy as np

        return isinstance(instance, (np.ndarray, Tensor))

    def __subclasscheck__(cls, subclass: type) -> bool:
        import numpy as np

        return issubclass(subclass, np.ndarray) or issubclass(subclass, Tensor)


class Array(metaclass=_MetaArray):
    """A numpy array or a torch/TensorFlow tensor."""


class _MetaDataSequence(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, (Sequence, Array))

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, Sequence) or issubclass(subclass, Array)


class DataSequence(metaclass=_MetaDataSequence):
    """A Python sequence or an array/tensor."""


class _MetaModel(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, _framework_types("model"))

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _framework_types("model"))


class Model(metaclass=_MetaModel):
    """A torch module or a Keras model."""
