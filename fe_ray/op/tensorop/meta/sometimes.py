"""Sometimes: run a TensorOp on a random fraction of the steps."""

from __future__ import annotations

from typing import Any

from fe_ray.op.meta_common import SometimesBase
from fe_ray.op.tensorop.meta.meta import (
    RandomStream,
    SingleOpMeta,
    check_wrapped,
    load_random_meta_state,
    random_meta_state,
)
from fe_ray.op.tensorop.tensorop import TensorOp


class Sometimes(SometimesBase, SingleOpMeta):
    """Run ``tensor_op`` with probability ``prob`` per step (one draw for the whole batch, as in FastEstimator);
    otherwise its output keys keep their current values.

    Output keys the op does not also read are passed through when it does not run, so they must already exist
    (create a default with a LambdaOp first), and in a traced TF step the op's outputs must have the same dtypes as
    the values they replace (both branches of a ``tf.cond``). The wrapped op's ``mode`` and ``ds_id`` become this
    op's.

    The draw comes from the op's own checkpointable random stream (see
    :class:`~fe_ray.op.tensorop.meta.meta.RandomStream`): reproducible under ``fe.enable_deterministic``, resumed
    exactly from checkpoints, identical on every Ray replica. In TF the choice is a ``tf.cond`` inside the compiled
    step, so one trace serves both outcomes.

    Args:
        tensor_op: The op to run sometimes.
        prob: The probability of running it, in [0, 1].

    Raises:
        TypeError: If ``tensor_op`` is not a TensorOp.
        ValueError: If ``prob`` is not a number in [0, 1].
    """

    def __init__(self, tensor_op: TensorOp, prob: float = 0.5) -> None:
        self._wrap(check_wrapped(tensor_op, "Sometimes"), prob)
        self.framework: str | None = None
        self.stream = RandomStream()

    def build(self, framework: str, device: Any = None) -> None:
        self.op.build(framework, device)
        self.stream.build(framework)
        self.framework = framework

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        draw = self.stream.uniform()
        if self.framework == "tf":
            import tensorflow as tf

            return tf.cond(draw < self.prob, lambda: self._run(data, state), lambda: self._skip(data))
        return self._run(data, state) if float(draw) < self.prob else self._skip(data)

    def _run(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        result = self.op.forward(self._op_inputs(data), state)
        if not self.outputs:
            return []
        return list(result) if self.op.out_list else [result]

    def state_dict(self) -> dict[str, Any]:
        """The random stream's position (under 'rng') and the wrapped op's state (under 'ops', if any)."""
        return random_meta_state([self.op], self.stream)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys or another number of wrapped ops.
        """
        load_random_meta_state([self.op], self.stream, state, "Sometimes")

