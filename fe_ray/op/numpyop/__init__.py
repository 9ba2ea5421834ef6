"""NumpyOps: CPU ops on numpy data (pipeline ops and network pops), under FastEstimator's module paths."""

from fe_ray.op.numpyop import meta, multivariate, univariate
from fe_ray.op.numpyop.numpyop import Delete, LambdaOp, NumpyOp, forward_numpyop

__all__ = ["Delete", "LambdaOp", "NumpyOp", "forward_numpyop", "meta", "multivariate", "univariate"]
