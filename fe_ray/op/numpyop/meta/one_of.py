"""OneOf: run one NumpyOp, chosen uniformly at random per sample, out of several."""

from __future__ import annotations

from typing import Any

from fe_ray.op.meta_common import load_wrapped_state, wrapped_state
from fe_ray.op.numpyop.meta.meta import check_wrapped
from fe_ray.op.numpyop.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import get_rng


class OneOf(NumpyOp):
    """Run one of ``numpy_ops``, each with the same probability.

    All ops must read and write the same keys (in the same single/list form) and share ``mode`` and ``ds_id``,
    which become this op's.

    Random: in a Pipeline the choice comes from the sample's generator, and a random chosen op continues drawing
    from the same generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`). As
    a Network pop one choice is made for the whole batch, as in FastEstimator.

    Args:
        *numpy_ops: The ops to choose from.

    Raises:
        TypeError: If an entry is not a NumpyOp, or is a Delete.
        ValueError: If no op is given, or the ops differ in inputs, outputs, mode or ds_id.
    """

    is_random = True

    def __init__(self, *numpy_ops: NumpyOp) -> None:
        if not numpy_ops:
            raise ValueError("OneOf needs at least one NumpyOp to choose from, got none.")
        ops = [check_wrapped(op, "OneOf") for op in numpy_ops]
        first = ops[0]
        for op in ops[1:]:
            for attr in ("inputs", "outputs", "in_list", "out_list", "mode", "ds_id"):
                if getattr(op, attr) != getattr(first, attr):
                    raise ValueError(f"All ops of a OneOf must share their {attr}: {type(first).__name__} has "
                                     f"{getattr(first, attr)!r} but {type(op).__name__} has {getattr(op, attr)!r}; "
                                     "give them the same keys, mode and ds_id.")
        super().__init__(inputs=list(first.inputs), outputs=list(first.outputs))
        self.in_list, self.out_list = first.in_list, first.out_list
        self.mode, self.ds_id = first.mode, first.ds_id
        self.ops = ops

    def _choose(self, state: dict[str, Any]) -> NumpyOp:
        return self.ops[int(get_rng(state).integers(len(self.ops)))]

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return self._choose(state).forward(data, state)

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return self._choose(state).forward_batch(data, state)

    def state_dict(self) -> dict[str, Any]:
        return wrapped_state(self.ops)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_wrapped_state(self.ops, state, "OneOf")
