"""FastEstimator's module path ``fastestimator.util.base_util``: the same names, from fe_ray's utility modules,
so code importing from that path runs unchanged (``FigureFE``, a plotly figure, is not ported)."""

from __future__ import annotations

from fe_ray.util.base import (
    IfElse,
    NonContext,
    check_ds_id,
    check_io_names,
    filter_nones,
    parse_modes,
    to_list,
    to_set,
)
from fe_ray.util.compat import get_colors, warn
from fe_ray.util.environment import LogSplicer, in_notebook, list_files
from fe_ray.util.structures import FEID, DefaultKeyDict, Flag, param_to_range
from fe_ray.util.tensors import get_shape, get_type
from fe_ray.util.text import is_number, prettify_metric_name, strip_prefix, strip_suffix

__all__ = ["FEID", "DefaultKeyDict", "Flag", "IfElse", "LogSplicer", "NonContext", "check_ds_id", "check_io_names",
           "filter_nones", "get_colors", "get_shape", "get_type", "in_notebook", "is_number", "list_files",
           "param_to_range", "parse_modes", "prettify_metric_name", "strip_prefix", "strip_suffix", "to_list",
           "to_set", "warn"]
