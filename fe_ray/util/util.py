"""FastEstimator's module path ``fastestimator.util.util``: the same names, from fe_ray's utility modules, so code
importing from that path runs unchanged (its model-summary helpers ``count_params``, ``get_model_parameters`` and
``get_optimizer_name`` are not ported)."""

from __future__ import annotations

from fe_ray.util.base import get_batch_size
from fe_ray.util.compat import is_valid_file
from fe_ray.util.devices import cpu_count, get_device, get_gpu_info, get_num_devices, get_num_gpus
from fe_ray.util.environment import Suppressor, Timer, draw
from fe_ray.util.tensors import detach_tensors, move_tensors_to_device, pad_batch, pad_data, to_number

__all__ = ["Suppressor", "Timer", "cpu_count", "detach_tensors", "draw", "get_batch_size", "get_device",
           "get_gpu_info", "get_num_devices", "get_num_gpus", "is_valid_file", "move_tensors_to_device", "pad_batch",
           "pad_data", "to_number"]
