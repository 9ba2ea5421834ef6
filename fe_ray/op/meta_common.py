"""What the meta ops of both kinds (NumpyOps in a Pipeline, TensorOps in a Network) share, framework-neutral: the
checkpoint state of the ops they wrap, and Sometimes' keys and probability.

The numpy-vs-tensor specifics (which ops may be wrapped, where the random draws come from, how a batch runs) stay
in :mod:`fe_ray.op.numpyop.meta.meta` and :mod:`fe_ray.op.tensorop.meta.meta`. Nothing here imports torch or TF.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fe_ray.op.op import Op


def wrapped_state(ops: Sequence[Op]) -> dict[str, Any]:
    """The wrapped ops' states as one meta-op state (under 'ops'); empty when none of them has state."""
    states = [op.state_dict() for op in ops]
    return {"ops": states} if any(states) else {}


def load_wrapped_state(ops: Sequence[Op], state: dict[str, Any], meta: str, valid: Iterable[str] = ("ops",)) -> None:
    """Restore :func:`wrapped_state` into ``ops``.

    Args:
        ops: The wrapped ops.
        state: The meta op's saved state.
        meta: The meta op's name, for the messages.
        valid: The keys ``state`` may hold (a meta op saving more than its ops' states restores the rest itself).

    Raises:
        ValueError: If ``state`` holds other keys, or was saved from a meta op wrapping another number of ops.
    """
    unknown = set(state) - set(valid)
    if unknown:
        raise ValueError(f"{meta} state has unknown keys {sorted(unknown)} (valid: {list(valid)}); the checkpoint "
                         "belongs to a different configuration.")
    states = state.get("ops", [{} for _ in ops])
    if len(states) != len(ops):
        raise ValueError(f"{meta} wraps {len(ops)} op(s) but the checkpoint holds states for {len(states)}; it "
                         "belongs to a different configuration.")
    for op, op_state in zip(ops, states):
        op.load_state_dict(op_state)


def chain_keys(ops: Sequence[Op], is_delete: Callable[[Op], bool] = lambda op: False) -> tuple[list[str], list[str]]:
    """The keys a chain of ops (Fuse) reads before any of them writes them, and every key they write, in order.

    A Delete (``is_delete``) of a key an earlier op wrote takes it off the outputs, as in FastEstimator: the chain
    keeps it to itself. A Delete of a key the chain reads only removes it inside the chain.
    """
    inputs: list[str] = []
    outputs: list[str] = []
    for op in ops:
        deletes = is_delete(op)
        for key in op.inputs:
            if deletes and key in outputs:
                outputs.remove(key)
            elif key not in inputs and key not in outputs:
                inputs.append(key)
        outputs += [key for key in op.outputs if key not in outputs]
    return inputs, outputs


def repeat_plan(op: Op, repeat: Any, max_iter: Any) -> tuple[int | Callable[..., Any], list[str], list[str],
                                                           int | None]:
    """Check Repeat's arguments.

    Returns:
        ``repeat`` (an int, or the continuation function), the keys the function reads (its parameter names; empty
        for an int), those of them the op neither reads nor writes (extra inputs of the Repeat), and ``max_iter``.

    Raises:
        ValueError: If ``repeat`` < 1, ``max_iter`` < 1, or ``max_iter`` is given with an int ``repeat``.
        TypeError: If ``repeat`` is neither an int nor a callable.
    """
    if max_iter is not None and (isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral)
                                 or max_iter < 1):
        raise ValueError(f"Repeat max_iter must be an int >= 1 or None, got {max_iter!r}.")
    if isinstance(repeat, numbers.Integral) and not isinstance(repeat, bool):
        if repeat < 1:
            raise ValueError(f"Repeat repeat must be >= 1 (the number of runs), got {repeat!r}.")
        if max_iter is not None:
            raise ValueError(f"Repeat max_iter ({max_iter!r}) only limits a function repeat; with repeat={repeat} "
                             "the run count is fixed: drop max_iter.")
        return int(repeat), [], [], None
    if callable(repeat):
        reads = list(inspect.signature(repeat).parameters)
        extra = [key for key in reads if key not in op.inputs and key not in op.outputs]
        return repeat, reads, extra, None if max_iter is None else int(max_iter)
    raise TypeError(f"Repeat repeat must be an int (the number of runs) or a function of data keys returning "
                    f"whether to run again, got {type(repeat).__name__}.")


class SometimesBase:
    """The part of ``Sometimes`` that numpy's and the Network's share; mixed in before NumpyOp / TensorOp.

    The meta op reads the wrapped op's inputs plus its output keys that it does not also read (passed through
    unchanged when the op does not run) and writes the op's outputs; the wrapped op's ``mode`` and ``ds_id`` become
    the meta op's.
    """

    op: Any
    prob: float
    num_op_inputs: int
    inputs: list[str]
    outputs: list[str]

    def _wrap(self, op: Op, prob: Any) -> None:
        """Check ``prob`` and initialise the op (``Op.__init__`` through the class next in the MRO) around ``op``.

        Raises:
            ValueError: If ``prob`` is not a number in [0, 1].
        """
        if isinstance(prob, bool) or not isinstance(prob, numbers.Real) or not 0.0 <= prob <= 1.0:
            raise ValueError(f"Sometimes prob must be a probability in [0, 1], got {prob!r}.")
        passthrough = [key for key in op.outputs if key not in op.inputs]
        super().__init__(inputs=[*op.inputs, *passthrough], outputs=list(op.outputs))  # type: ignore[call-arg]
        self.mode, self.ds_id = op.mode, op.ds_id  # already parsed by the wrapped op
        self.op = op
        self.prob = float(prob)
        self.num_op_inputs = len(op.inputs)

    def _op_inputs(self, data: list[Any]) -> Any:
        """The wrapped op's share of the meta op's inputs, in the op's single/list form."""
        return data[:self.num_op_inputs] if self.op.in_list else data[0]

    def _skip(self, data: list[Any]) -> list[Any]:
        """The outputs when the op does not run: the current values of its output keys."""
        return [data[self.inputs.index(key)] for key in self.outputs]
