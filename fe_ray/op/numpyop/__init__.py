"""NumpyOps: CPU ops on numpy data (pipeline ops and network pops), under FastEstimator's module paths."""

from fe_ray.op.numpyop.numpyop import Batch, Delete, LambdaOp, NumpyOp, RemoveIf, forward_numpyop
from fe_ray.util.lazy import lazy_attributes

# The op families load on first use (``fe.op.numpyop.univariate.X`` or an import of them): a Pipeline's loader
# needs only the base classes above, and the families hold dozens of modules.
_SUBPACKAGES = ("meta", "multivariate", "univariate")


__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{name}" for name in _SUBPACKAGES})

__all__ = ["Batch", "Delete", "LambdaOp", "NumpyOp", "RemoveIf", "forward_numpyop", "meta", "multivariate",
           "univariate"]
