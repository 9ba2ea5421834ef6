"""Gather: pick one entry per sample from batched tensors (by index, or the largest)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import gather_from_batch, reduce_max
from fe_ray.op.tensorop.tensorop import TensorOp


class Gather(TensorOp):
    """Write, for each input batch ``(N, d1, ...)``, the entry ``x[i, index_i]`` of every sample ``i``, shaped
    ``(N, d2, ...)`` (see :func:`fe_ray.backend.gather_from_batch`); without indices, each sample's largest value
    along axis 1 instead.

    Typical use: keep only the score of each sample's true class (``Gather(inputs="y_pred", indices="y",
    outputs="y_true_score")``), e.g. to take gradients of it.

    Indices are paired with inputs as in FastEstimator: the i-th indices key serves the i-th input; a single
    indices key serves every input; inputs beyond the indices keys given (with several of them), and inputs whose
    indices tensor is empty, get the maximum along axis 1.

    Args:
        inputs: Key(s) of the batches to gather from.
        outputs: Key(s) of the results, one per input.
        indices: Key(s) of integer tensors holding one index per sample (shaped ``(N,)`` or ``(N, 1)``); None to
            take the maximum.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.

    Raises:
        ValueError: If the number of output keys differs from the number of input keys, or no input is given.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 indices: None | str | Iterable[str] = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        index_keys = [] if indices is None else [indices] if isinstance(indices, str) else list(indices)
        data_keys = [inputs] if isinstance(inputs, str) else list(inputs)
        # The Network reads inputs in one list: the indices keys first, as FastEstimator orders them.
        super().__init__(inputs=index_keys + data_keys, outputs=outputs, mode=mode, ds_id=ds_id)
        if not data_keys or len(self.outputs) != len(data_keys):
            raise ValueError(f"Gather writes one output per input: got inputs={data_keys} and outputs={self.outputs}; "
                             "give as many output keys as input keys.")
        self.num_indices = len(index_keys)
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        indices, tensors = data[:self.num_indices], data[self.num_indices:]
        results = []
        for position, tensor in enumerate(tensors):
            if position < len(indices):
                index = indices[position]
            elif len(indices) == 1:
                index = indices[0]
            else:
                index = None
            if index is None or _is_empty(index):
                results.append(reduce_max(tensor, axis=1))
            else:
                results.append(gather_from_batch(tensor, indices=index))
        return results


def _is_empty(index: Any) -> bool:
    """True for an indices tensor (or list) with no entries; an unknown (traced) length counts as non-empty."""
    shape = getattr(index, "shape", None)
    if shape is None:
        return len(index) == 0
    return len(shape) > 0 and shape[0] == 0
