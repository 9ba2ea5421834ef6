"""Fuse: run a sequence of TensorOps as one op."""

from __future__ import annotations

from typing import Any

from fe_ray.op.meta_common import chain_keys, load_wrapped_state, wrapped_state
from fe_ray.op.tensorop.meta.meta import check_shared, check_wrapped, forward_ops
from fe_ray.op.tensorop.tensorop import TensorOp
from fe_ray.util import to_list


class Fuse(TensorOp):
    """Run ``ops`` in order as a single op, e.g. to wrap several ops in one :class:`Sometimes` or :class:`Repeat`.

    The fused op reads the keys the ops read before any of them writes them, and writes every key they write. The
    ops must share mode and ds_id (which become the fused op's); schedule the Fuse rather than the ops inside it.

    Args:
        ops: The TensorOp(s) to run.

    Raises:
        TypeError: If an entry is not a TensorOp (e.g. a Scheduler).
        ValueError: If no op is given or the ops differ in mode or ds_id.
    """

    def __init__(self, ops: TensorOp | list[TensorOp]) -> None:
        op_list = [check_wrapped(op, "Fuse") for op in to_list(ops)]
        if not op_list:
            raise ValueError("Fuse needs at least one TensorOp, e.g. Fuse([ModelOp(...), CrossEntropy(...)]).")
        check_shared(op_list, ("mode", "ds_id"), "Fuse")
        inputs, outputs = chain_keys(op_list)
        super().__init__(inputs=inputs, outputs=outputs)
        self.in_list = self.out_list = True
        self.mode, self.ds_id = op_list[0].mode, op_list[0].ds_id  # already parsed by the wrapped ops
        self.ops = op_list
        gradient_ops = [pos for pos, op in enumerate(op_list) if op.fe_retain_graph() is not None]
        # Every gradient computation inside but the last must keep the graph; the Network decides about the last
        # one (through fe_retain_graph), as it would for the op unfused.
        for pos in gradient_ops:
            op_list[pos].fe_retain_graph(True)
        self.last_gradient_op: int | None = gradient_ops[-1] if gradient_ops else None

    def build(self, framework: str, device: Any = None) -> None:
        for op in self.ops:
            op.build(framework, device)

    def get_fe_models(self) -> set[Any]:
        return set().union(*(op.get_fe_models() for op in self.ops))

    def get_fe_loss_keys(self) -> set[str]:
        return set().union(*(op.get_fe_loss_keys() for op in self.ops))

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        if self.last_gradient_op is None:
            return None
        return self.ops[self.last_gradient_op].fe_retain_graph(retain)

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        store = dict(zip(self.inputs, data))
        forward_ops(self.ops, store, state)
        return [store[key] for key in self.outputs]

    def state_dict(self) -> dict[str, Any]:
        """The fused ops' states (under 'ops'), or empty when none has state."""
        return wrapped_state(self.ops)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys or another number of ops.
        """
        load_wrapped_state(self.ops, state, "Fuse")
