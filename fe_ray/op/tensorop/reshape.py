"""Reshape: lay tensors out in a new shape."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import reshape
from fe_ray.op.tensorop.tensorop import TensorOp, check_one_output_each
from fe_ray.util.base import is_int


class Reshape(TensorOp):
    """Write each input's elements (in row-major order) laid out in ``shape``.

    The batch axis is part of the shape: ``(-1, 784)`` flattens a batch of 28 x 28 images, keeping one row per
    sample. FastEstimator's Reshape takes one key; fe_ray also takes several (one output key each).

    Args:
        inputs: Key(s) of the tensors to reshape.
        outputs: Key(s) of the results, one per input.
        shape: The new shape (an int for a flat tensor); one entry may be -1 for whatever size is left.
        mode: Mode(s) in which to run; None for all. The default skips "infer", as FastEstimator's does.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the output and input key counts differ, or ``shape`` holds more than one -1.
        TypeError: If ``shape`` holds something other than ints.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], shape: int | tuple[int, ...],
                 mode: None | str | Iterable[str] = "!infer", ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_one_output_each(self, "Reshape")
        single = is_int(shape)
        sizes = [shape] if single else list(shape) if isinstance(shape, Iterable) else [shape]
        if not all(is_int(size) for size in sizes):
            raise TypeError(f"Reshape shape must be an int or a tuple of ints (numpy ints too), got {shape!r}.")
        sizes = [int(size) for size in sizes]  # e.g. (-1, np.prod(image_shape)), as FastEstimator takes it
        if sizes.count(-1) > 1:
            raise ValueError(f"Reshape shape {tuple(sizes)} holds more than one -1; only one size can be inferred.")
        self.shape: int | tuple[int, ...] = sizes[0] if single else tuple(sizes)
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        shape = [self.shape] if isinstance(self.shape, int) else list(self.shape)
        return [reshape(tensor, shape) for tensor in data]
