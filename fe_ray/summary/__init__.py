"""Run-time bookkeeping: the Summary history and the System state shared by the Estimator and its Traces.

``fe.summary.logs`` (log parsing and plotting) loads on first use.
"""

from __future__ import annotations

from fe_ray.summary.summary import Summary, ValWithError, average_summaries
from fe_ray.summary.system import System
from fe_ray.util.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, {"logs": "fe_ray.summary.logs"})


__all__ = ["Summary", "System", "ValWithError", "average_summaries"]
