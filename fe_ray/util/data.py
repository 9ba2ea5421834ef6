"""FastEstimator's module path ``fastestimator.util.data``: the Trace event's :class:`Data` and the per-dataset
:class:`DSData` (defined in :mod:`fe_ray.trace.trace`), so traces written against that path import unchanged."""

from __future__ import annotations

from fe_ray.trace.trace import Data, DSData

__all__ = ["DSData", "Data"]
