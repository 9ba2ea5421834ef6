"""fe_ray's utilities: FastEstimator 1.7's ``fe.util`` namespace plus the internal helpers fe_ray's modules share.

``import fe_ray as fe; fe.util.to_list(x)`` works as with ``import fastestimator as fe``. Nothing here imports torch
or TensorFlow at import time. One concept per module:

* :mod:`fe_ray.util.base`: containers, mode / ds_id / key checks, batch size (fe_ray's internal helpers too).
* :mod:`fe_ray.util.text`: metric-name prettifying, prefix / suffix stripping, number and literal parsing.
* :mod:`fe_ray.util.structures`: ``DefaultKeyDict``, ``FEID``, ``Flag``, ``param_to_range``.
* :mod:`fe_ray.util.tensors`: ``to_number``, detaching / moving torch tensors, ``get_type``/``get_shape``, padding.
* :mod:`fe_ray.util.devices`: GPU and CPU counts, thread limits, the torch device.
* :mod:`fe_ray.util.environment`: ``Suppressor``, ``LogSplicer``, ``Timer``, ``draw``, ``in_notebook``,
  ``list_files``.
* :mod:`fe_ray.util.img_data`: ``ImageDisplay``, ``BatchDisplay``, ``GridDisplay``, drawn with matplotlib (loaded on
  first use; matplotlib is optional).

* :mod:`fe_ray.util.compat`: ``traceable``, ``warn``, ``get_colors``, ``is_valid_file``.

``fe.util.Data`` is the Trace event's :class:`fe_ray.trace.trace.Data`, loaded on first use (the trace package
itself imports this one). FastEstimator's LaTeX and traceability-report helpers and its download progress bars are
not ported (``traceable`` is accepted and records its lists only).
"""

from __future__ import annotations

from fe_ray.util.base import (
    MODES,
    IfElse,
    NonContext,
    accepts_positional,
    check_count,
    check_ds_id,
    check_epoch,
    check_io_names,
    check_mode,
    drop_nones,
    filter_nones,
    get_batch_size,
    lower_priority,
    map_nested,
    parse_ds_ids,
    parse_modes,
    to_list,
    to_set,
)
from fe_ray.util.compat import get_colors, is_valid_file, traceable, warn
from fe_ray.util.devices import cpu_count, get_device, get_gpu_info, get_num_devices, get_num_gpus
from fe_ray.util.environment import LogSplicer, Suppressor, Timer, draw, in_notebook, list_files
from fe_ray.util.lazy import lazy_attributes
from fe_ray.util.structures import FEID, DefaultKeyDict, Flag, param_to_range
from fe_ray.util.tensors import (
    detach_tensors,
    get_shape,
    get_type,
    move_tensors_to_device,
    pad_batch,
    pad_data,
    to_number,
)
from fe_ray.util.text import is_number, parse_string_to_python, prettify_metric_name, strip_prefix, strip_suffix

# Loaded on first access: their modules import fe_ray.util themselves.
__getattr__, __dir__ = lazy_attributes(__name__, {"Data": "fe_ray.trace.trace:Data",
                                                  "BatchDisplay": "fe_ray.util.img_data:BatchDisplay",
                                                  "GridDisplay": "fe_ray.util.img_data:GridDisplay",
                                                  "ImageDisplay": "fe_ray.util.img_data:ImageDisplay"})


__all__ = [
    # FastEstimator 1.7's fe.util
    "FEID", "Data", "DefaultKeyDict", "Flag", "IfElse", "LogSplicer", "NonContext", "Suppressor", "Timer",
    "check_ds_id", "BatchDisplay", "GridDisplay", "ImageDisplay",
    "check_io_names", "cpu_count", "detach_tensors", "draw", "filter_nones", "get_batch_size", "get_device",
    "get_num_devices", "get_num_gpus", "get_shape", "get_type", "in_notebook", "is_number", "list_files",
    "move_tensors_to_device", "pad_batch", "pad_data", "param_to_range", "parse_modes", "parse_string_to_python",
    "prettify_metric_name", "strip_prefix", "strip_suffix", "to_list", "to_number", "to_set", "get_colors",
    "is_valid_file", "traceable", "warn",
    # fe_ray's additions and internal helpers
    "MODES", "accepts_positional", "check_count", "check_epoch", "check_mode", "drop_nones", "get_gpu_info",
    "lower_priority",
    "map_nested", "parse_ds_ids",
]
