"""Resize3D: resize batches of volumes (3D images) inside a Network."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fe_ray.backend import resize_3d
from fe_ray.backend.tensor_image import RESIZE_3D_MODES
from fe_ray.op.tensorop.tensorop import TensorOp, check_one_output_each
from fe_ray.util.base import is_int


class Resize3D(TensorOp):
    """Write each input batch of volumes resized to ``output_shape``, its batch and channel axes untouched; see
    :func:`fe_ray.backend.resize_3d` for the sampling of each mode.

    Volumes follow each framework's layout: torch ``(N, C, D, H, W)``, TF ``(N, D, H, W, C)``; ``output_shape``
    gives the three spatial sizes in that order. FastEstimator 1.7 resizes torch tensors only; fe_ray also resizes
    TF tensors.

    Args:
        inputs: Key(s) of the volume batches.
        outputs: Key(s) of the resized batches, one per input.
        output_shape: The new spatial size: three positive ints.
        resize_mode: 'nearest' (nearest neighbour) or 'area' (each output voxel averages the source voxels it
            covers: best for shrinking; when enlarging it repeats voxels, like 'nearest').
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the output and input key counts differ, ``output_shape`` is not three positive ints, or
            ``resize_mode`` is unknown.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], output_shape: Sequence[int],
                 resize_mode: str = "nearest", mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_one_output_each(self, "Resize3D")
        if resize_mode not in RESIZE_3D_MODES:
            raise ValueError(f"Resize3D resize_mode {resize_mode!r} is unknown; valid choices are "
                             f"{list(RESIZE_3D_MODES)}.")
        sizes = list(output_shape) if isinstance(output_shape, Sequence) else []
        if len(sizes) != 3 or not all(is_int(size) and size > 0 for size in sizes):
            raise ValueError(f"Resize3D output_shape must be three positive ints, the spatial sizes without batch and "
                             f"channel axes, got {output_shape!r}.")
        self.output_shape = tuple(int(size) for size in sizes)
        self.resize_mode = resize_mode
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [resize_3d(tensor, self.output_shape, self.resize_mode) for tensor in data]
