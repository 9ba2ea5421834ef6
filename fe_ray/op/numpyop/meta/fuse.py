"""Fuse: run a sequence of NumpyOps as one op."""

from __future__ import annotations

from fe_ray.op.meta_common import chain_keys
from fe_ray.op.numpyop.meta.meta import OpChain, check_shared, check_wrapped, set_rua_levels
from fe_ray.op.numpyop.numpyop import Delete, NumpyOp
from fe_ray.util import to_list


class Fuse(OpChain):
    """Run ``ops`` in order as a single op, e.g. to wrap several ops in one :class:`Sometimes`, :class:`OneOf` or
    :class:`Repeat`.

    The fused op reads the keys the ops read before any of them writes them, and writes every key they write but a
    :class:`Delete` among them drops (an intermediate the Fuse keeps to itself, as in FastEstimator). The ops must
    share mode and ds_id (which become the fused op's); schedule the Fuse rather than the ops inside it.

    Random when any op inside is: in a Pipeline the ops then draw, one after another, from the sample's generator
    for the Fuse (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`). As a Network
    pop each op runs on the whole batch, as it would unfused.

    Args:
        ops: The NumpyOp(s) to run.

    Raises:
        TypeError: If an entry is not a NumpyOp.
        ValueError: If no op is given or the ops differ in mode or ds_id.
    """

    def __init__(self, ops: NumpyOp | list[NumpyOp]) -> None:
        op_list = [check_wrapped(op, "Fuse", allow_delete=True) for op in to_list(ops)]
        if not op_list:
            raise ValueError("Fuse needs at least one NumpyOp, e.g. Fuse([HorizontalFlip(...), Rotate(...)]).")
        check_shared(op_list, ("mode", "ds_id"), "Fuse")
        inputs, outputs = chain_keys(op_list, lambda op: isinstance(op, Delete))
        super().__init__(inputs=inputs, outputs=outputs)
        self.in_list = self.out_list = True
        self.mode, self.ds_id = op_list[0].mode, op_list[0].ds_id  # already parsed by the wrapped ops
        self.ops = op_list
        # Per instance: whether the Pipeline must hand this Fuse a generator depends on the ops inside.
        self.is_random = any(op.is_random for op in op_list)  # type: ignore[misc]

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Pass RUA's strength ``magnitude_coef`` (in [0, 1]) on to every fused op.

        Raises:
            TypeError: If a fused op has no ``set_rua_level`` method.
        """
        set_rua_levels(self.ops, magnitude_coef, "Fuse")
