"""OneOf: run one of several TensorOps, chosen uniformly at random per step."""

from __future__ import annotations

from typing import Any

from fe_ray.op.tensorop.meta.meta import (
    RandomStream,
    check_shared,
    check_wrapped,
    load_random_meta_state,
    random_meta_state,
)
from fe_ray.op.tensorop.tensorop import TensorOp


class OneOf(TensorOp):
    """Run one of ``tensor_ops``, each with probability ``1 / len(tensor_ops)``, once per step for the whole batch.

    The ops must share inputs, outputs (and how they are given: one key or a list), mode and ds_id; in a traced TF
    step their outputs must also share dtypes (the choice is a ``tf.switch_case`` inside the compiled step). The
    draw comes from the op's own checkpointable random stream (see
    :class:`~fe_ray.op.tensorop.meta.meta.RandomStream`): reproducible under ``fe.enable_deterministic``, resumed
    exactly from checkpoints, identical on every Ray replica.

    Args:
        *tensor_ops: The ops to choose from.

    Raises:
        TypeError: If an argument is not a TensorOp.
        ValueError: If no op is given or the ops differ in inputs, outputs, mode or ds_id.
    """

    def __init__(self, *tensor_ops: TensorOp) -> None:
        if not tensor_ops:
            raise ValueError("OneOf needs at least one TensorOp to choose from, e.g. OneOf(op_a, op_b).")
        ops = [check_wrapped(op, "OneOf") for op in tensor_ops]
        check_shared(ops, ("inputs", "outputs", "in_list", "out_list", "mode", "ds_id"), "OneOf")
        first = ops[0]
        super().__init__(inputs=list(first.inputs), outputs=list(first.outputs))
        self.in_list, self.out_list = first.in_list, first.out_list
        self.mode, self.ds_id = first.mode, first.ds_id  # already parsed by the wrapped ops
        self.ops = ops
        self.framework: str | None = None
        self.stream = RandomStream()

    def build(self, framework: str, device: Any = None) -> None:
        for op in self.ops:
            op.build(framework, device)
        self.stream.build(framework)
        self.framework = framework

    def get_fe_models(self) -> set[Any]:
        return set().union(*(op.get_fe_models() for op in self.ops))

    def get_fe_loss_keys(self) -> set[str]:
        return set().union(*(op.get_fe_loss_keys() for op in self.ops))

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        answers = [op.fe_retain_graph(retain) for op in self.ops]
        known = [answer for answer in answers if answer is not None]
        return any(known) if known else None

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        count = len(self.ops)
        draw = self.stream.uniform()
        if self.framework == "tf":
            import tensorflow as tf

            # min(): a draw of 1 - 2**-24 times count could round up to count in float32.
            index = tf.minimum(tf.cast(draw * count, tf.int32), count - 1)
            return tf.switch_case(index, [lambda op=op: op.forward(data, state) for op in self.ops])
        return self.ops[min(int(float(draw) * count), count - 1)].forward(data, state)

    def state_dict(self) -> dict[str, Any]:
        """The random stream's position (under 'rng') and the wrapped ops' states (under 'ops', if any)."""
        return random_meta_state(self.ops, self.stream)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys or another number of wrapped ops.
        """
        load_random_meta_state(self.ops, self.stream, state, "OneOf")
