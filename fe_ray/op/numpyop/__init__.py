"""NumpyOps: CPU ops on numpy data (pipeline ops and network pops)."""

from fe_ray.op.numpyop.numpyop import Delete, LambdaOp, NumpyOp, forward_numpyop

__all__ = ["Delete", "LambdaOp", "NumpyOp", "forward_numpyop"]
