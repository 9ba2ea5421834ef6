"""NumpyOps: CPU ops on numpy data (pipeline ops and network pops), under FastEstimator's module paths."""

import importlib
from typing import Any

from fe_ray.op.numpyop.numpyop import Batch, Delete, LambdaOp, NumpyOp, forward_numpyop

# The op families load on first use (``fe.op.numpyop.univariate.X`` or an import of them): a Pipeline's loader
# needs only the base classes above, and the families hold dozens of modules.
_SUBPACKAGES = ("meta", "multivariate", "univariate")


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"fe_ray.op.numpyop.{name}")
    raise AttributeError(f"module 'fe_ray.op.numpyop' has no attribute {name!r}")

__all__ = ["Batch", "Delete", "LambdaOp", "NumpyOp", "forward_numpyop", "meta", "multivariate", "univariate"]
