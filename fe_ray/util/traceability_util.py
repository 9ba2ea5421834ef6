"""FastEstimator's module path ``fastestimator.util.traceability_util``: its ``traceable`` decorator, so custom ops
and traces written as ``from fastestimator.util.traceability_util import traceable`` run unchanged.

fe_ray writes no traceability (LaTeX) reports, so ``traceable`` only records its white/black lists (see
:func:`fe_ray.util.compat.traceable`); the report helpers of that module (``trace_model``, ``FeSplitSummary``, ...)
are not ported.
"""

from __future__ import annotations

from fe_ray.util.compat import traceable

__all__ = ["traceable"]
