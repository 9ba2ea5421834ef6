"""Permute: reorder the axes of tensors."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fe_ray.backend import permute
from fe_ray.op.tensorop.tensorop import TensorOp, check_one_output_each


class Permute(TensorOp):
    """Write each input with its axes reordered: output axis i is input axis ``permutation[i]``.

    The default ``(0, 3, 1, 2)`` turns a channels-last image batch ``(N, H, W, C)`` into channels-first
    ``(N, C, H, W)``. FastEstimator's Permute takes one key; fe_ray also takes several (one output key each), all
    permuted alike.

    Args:
        inputs: Key(s) of the tensors to permute.
        outputs: Key(s) of the results, one per input.
        permutation: Each axis index ``0 .. rank-1`` exactly once.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the output and input key counts differ, or ``permutation`` repeats an axis (a tensor whose
            rank does not match is refused when the op runs).
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 permutation: Sequence[int] = (0, 3, 1, 2), mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        check_one_output_each(self, "Permute")
        if sorted(permutation) != list(range(len(permutation))):
            raise ValueError(f"Permute permutation {list(permutation)} must hold each of "
                             f"{list(range(len(permutation)))} exactly once.")
        self.permutation = list(permutation)
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return [permute(tensor, self.permutation) for tensor in data]
