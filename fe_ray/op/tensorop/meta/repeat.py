"""Repeat: run a TensorOp several times in a row, a fixed number of times or while a condition holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fe_ray.op.meta_common import load_wrapped_state, repeat_plan, wrapped_state
from fe_ray.op.tensorop.meta.meta import SingleOpMeta, check_wrapped, forward_ops
from fe_ray.op.tensorop.tensorop import TensorOp


class Repeat(SingleOpMeta):
    """Run ``op`` ``repeat`` times in a row, or (with a function) again and again while the function says so.

    A function ``repeat`` receives the tensors of the keys its parameters are named after and returns whether to
    run once more; it is checked after each run, so the op runs at least once. In torch it runs as a Python loop
    (the function must return a bool or a one-element tensor); in TF as a ``tf.while_loop`` (inside the compiled
    step, so the number of runs may differ from step to step without a retrace), so the tensors it rewrites must
    keep their dtypes and shapes from one iteration to the next.

    Args:
        op: The TensorOp to repeat (a :class:`Fuse` repeats several).
        repeat: The number of runs (>= 1), or the continuation function.
        max_iter: With a function: the most runs in total (None for no limit). Not allowed with an int.

    Raises:
        TypeError: If ``op`` is not a TensorOp, or ``repeat`` is neither an int nor a callable.
        ValueError: If ``repeat`` < 1, ``max_iter`` < 1, or ``max_iter`` is given with an int ``repeat``.
    """

    def __init__(self, op: TensorOp, repeat: int | Callable[..., Any] = 1, max_iter: int | None = None) -> None:
        op = check_wrapped(op, "Repeat")
        self.repeat, self.repeat_inputs, extra, self.max_iter = repeat_plan(op, repeat, max_iter)
        super().__init__(inputs=[*op.inputs, *extra], outputs=list(op.outputs))
        self.in_list = self.out_list = True
        self.mode, self.ds_id = op.mode, op.ds_id  # already parsed by the wrapped op
        self.op = op
        self.framework: str | None = None

    def build(self, framework: str, device: Any = None) -> None:
        self.op.build(framework, device)
        self.framework = framework

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        store = dict(zip(self.inputs, data))
        gradient_op = self.op.fe_retain_graph() is not None
        final_retain = self.op.fe_retain_graph()
        if gradient_op:
            # Every run but the last must keep the graph for the next one; the Network's setting (fe_retain_graph,
            # answered by the wrapped op) is the one for the last run.
            self.op.fe_retain_graph(True)
        try:
            if isinstance(self.repeat, int):
                for _ in range(self.repeat - 1):
                    forward_ops([self.op], store, state)
                if gradient_op:
                    self.op.fe_retain_graph(final_retain)
                forward_ops([self.op], store, state)
            else:
                forward_ops([self.op], store, state)
                if self.framework == "tf":
                    store = self._tf_while(store, state)
                else:
                    self._python_while(store, state)
        finally:
            if gradient_op:
                self.op.fe_retain_graph(final_retain)
        return [store[key] for key in self.outputs]

    def _python_while(self, store: dict[str, Any], state: dict[str, Any]) -> None:
        runs = 1
        while (self.max_iter is None or runs < self.max_iter) and bool(self._condition(store)):
            forward_ops([self.op], store, state)
            runs += 1

    def _condition(self, store: dict[str, Any]) -> Any:
        return self.repeat(*[store[key] for key in self.repeat_inputs])  # type: ignore[operator]

    def _tf_while(self, store: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        import tensorflow as tf

        # Only tensors can be loop variables: the GradientTape and other Python objects in the state stay outside,
        # closed over by the body.
        def body(loop_store: dict[str, Any]) -> tuple[dict[str, Any]]:
            loop_store = dict(loop_store)
            forward_ops([self.op], loop_store, state)
            return (loop_store,)

        (store,) = tf.while_loop(lambda loop_store: self._condition(loop_store), body, (store,),
                                 maximum_iterations=None if self.max_iter is None else self.max_iter - 1)
        return store

    def state_dict(self) -> dict[str, Any]:
        """The wrapped op's state (under 'ops'), or empty when it has none."""
        return wrapped_state([self.op])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys.
        """
        load_wrapped_state([self.op], state, "Repeat")
