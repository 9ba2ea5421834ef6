"""Run-time bookkeeping: the Summary history and the System state shared by the Estimator and its Traces."""

from fe_ray.summary.summary import Summary, ValWithError
from fe_ray.summary.system import System

__all__ = ["Summary", "System", "ValWithError"]
