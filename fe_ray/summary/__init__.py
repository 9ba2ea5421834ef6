"""Run-time bookkeeping: the Summary history and the System state shared by the Estimator and its Traces.

``fe.summary.logs`` (log parsing and plotting) loads on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from fe_ray.summary.summary import Summary, ValWithError
from fe_ray.summary.system import System


def __getattr__(name: str) -> Any:
    if name == "logs":
        return importlib.import_module("fe_ray.summary.logs")
    raise AttributeError(f"module 'fe_ray.summary' has no attribute {name!r}")


__all__ = ["Summary", "System", "ValWithError"]
