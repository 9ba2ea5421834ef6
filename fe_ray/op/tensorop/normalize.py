"""Normalize: standardise image tensors with fixed channel statistics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fe_ray.backend import tensor_normalize
from fe_ray.op.tensorop.tensorop import TensorOp, check_one_output_each


class Normalize(TensorOp):
    """Write ``(x - mean * max_pixel_value) / (std * max_pixel_value + 1e-7)`` for each input, in float32 (float16
    in a mixed-precision run); see :func:`fe_ray.backend.tensor_normalize`.

    Per-channel statistics apply along the channel axis of each framework's layout: axis -3 for torch
    (``(N, C, H, W)``), the last axis for TF (``(N, H, W, C)``). The defaults are ImageNet's statistics for pixels
    in ``[0, 255]``.

    Args:
        inputs: Key(s) of the tensors to normalize.
        outputs: Key(s) of the results, one per input.
        mean: One mean, or one per channel, on the 0..1 scale.
        std: One standard deviation, or one per channel, on the 0..1 scale.
        max_pixel_value: What 1.0 on that scale is in the data (1.0 when ``mean`` / ``std`` are on the data's own
            scale).
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the output and input key counts differ (statistics that do not fit a tensor's channel axis
            are refused when the op runs).
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mean: float | Sequence[float] = (0.485, 0.456, 0.406),
                 std: float | Sequence[float] = (0.229, 0.224, 0.225), max_pixel_value: float = 255.0,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_one_output_each(self, "Normalize")
        self.mean = mean
        self.std = std
        self.max_pixel_value = max_pixel_value
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [tensor_normalize(tensor, self.mean, self.std, self.max_pixel_value) for tensor in data]
