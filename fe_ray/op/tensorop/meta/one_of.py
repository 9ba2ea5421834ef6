"""OneOf: run one of several TensorOps, chosen at random per step (uniformly, or with given probabilities)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fe_ray.op.numpyop.meta.one_of import check_probs, choice_boundaries
from fe_ray.op.tensorop.meta.meta import (
    RandomStream,
    check_shared,
    check_wrapped,
    load_random_meta_state,
    random_meta_state,
)
from fe_ray.op.tensorop.tensorop import TensorOp


class OneOf(TensorOp):
    """Run one of ``tensor_ops``, each with probability ``1 / len(tensor_ops)`` or as ``probs`` gives, once per step
    for the whole batch.

    The ops must share inputs, outputs (and how they are given: one key or a list), mode and ds_id; in a traced TF
    step their outputs must also share dtypes (the choice is a ``tf.switch_case`` inside the compiled step). The
    draw comes from the op's own checkpointable random stream (see
    :class:`~fe_ray.op.tensorop.meta.meta.RandomStream`): reproducible under ``fe.enable_deterministic``, resumed
    exactly from checkpoints, identical on every Ray replica.

    With ``probs`` the step's uniform draw picks the op whose interval of the cumulative probabilities holds it (an
    op of probability 0 never runs); the stream makes one draw per step either way.

    Args:
        *tensor_ops: The ops to choose from.
        probs: The probability of each op (one per op, non-negative, summing to 1), keyword only; None (or empty)
            for equal probabilities.

    Raises:
        TypeError: If an argument is not a TensorOp.
        ValueError: If no op is given, the ops differ in inputs, outputs, mode or ds_id, or ``probs`` has the wrong
            length, a negative entry, or does not sum to 1.
    """

    # Class defaults, so that an instance set up without __init__ (a subclass's own) chooses uniformly.
    probs: list[float] | None = None
    _boundaries: Any = None

    def __init__(self, *tensor_ops: TensorOp, probs: Sequence[float] | None = None) -> None:
        if not tensor_ops:
            raise ValueError("OneOf needs at least one TensorOp to choose from, e.g. OneOf(op_a, op_b).")
        ops = [check_wrapped(op, "OneOf") for op in tensor_ops]
        check_shared(ops, ("inputs", "outputs", "in_list", "out_list", "mode", "ds_id"), "OneOf")
        first = ops[0]
        super().__init__(inputs=list(first.inputs), outputs=list(first.outputs))
        self.in_list, self.out_list = first.in_list, first.out_list
        self.mode, self.ds_id = first.mode, first.ds_id  # already parsed by the wrapped ops
        self.ops = ops
        self.probs = check_probs(probs, len(ops), "OneOf")
        self._boundaries = None if self.probs is None else choice_boundaries(self.probs)
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

            if self._boundaries is None:
                # min(): a draw of 1 - 2**-24 times count could round up to count in float32.
                index = tf.minimum(tf.cast(draw * count, tf.int32), count - 1)
            else:
                boundaries = tf.constant(self._boundaries, dtype=draw.dtype)
                index = tf.reduce_sum(tf.cast(draw >= boundaries, tf.int32))
            return tf.switch_case(index, [lambda op=op: op.forward(data, state) for op in self.ops])
        if self._boundaries is None:
            return self.ops[min(int(float(draw) * count), count - 1)].forward(data, state)
        return self.ops[int((float(draw) >= self._boundaries).sum())].forward(data, state)

    def state_dict(self) -> dict[str, Any]:
        """The random stream's position (under 'rng') and the wrapped ops' states (under 'ops', if any)."""
        return random_meta_state(self.ops, self.stream)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys or another number of wrapped ops.
        """
        load_random_meta_state(self.ops, self.stream, state, "OneOf")
