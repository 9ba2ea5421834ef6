"""Repeat: run a NumpyOp several times in a row, a fixed number of times or while a condition holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fe_ray.op.meta_common import load_wrapped_state, repeat_plan, wrapped_state
from fe_ray.op.numpyop.meta.meta import check_wrapped, run_ops, set_rua_levels
from fe_ray.op.numpyop.numpyop import NumpyOp
from fe_ray.types import FilteredData


class Repeat(NumpyOp):
    """Run ``op`` ``repeat`` times in a row, or (with a function) again and again while the function says so.

    A function ``repeat`` receives the values of the data keys its parameters are named after and returns whether to
    run once more; it is checked after each run, so the op runs at least once, and at most ``max_iter`` times in
    all. Keys the function reads that the op neither reads nor writes become inputs of the Repeat.

    Random when ``op`` is: each run draws anew from the sample's generator (in a Pipeline exact across resumes and
    worker threads, see :mod:`fe_ray.op.numpyop.randomness`). As a Network pop each run covers the whole batch and
    the function sees batch values. The wrapped op's ``mode`` and ``ds_id`` become this op's.

    Args:
        op: The NumpyOp to repeat (a :class:`Fuse` repeats several).
        repeat: The number of runs (>= 1), or the continuation function.
        max_iter: With a function: the most runs in total (None for no limit). Not allowed with an int.

    Raises:
        TypeError: If ``op`` is not a NumpyOp (or is a Delete), or ``repeat`` is neither an int nor a callable.
        ValueError: If ``repeat`` < 1, ``max_iter`` < 1, or ``max_iter`` is given with an int ``repeat``.
    """

    def __init__(self, op: NumpyOp, repeat: int | Callable[..., Any] = 1, max_iter: int | None = None) -> None:
        op = check_wrapped(op, "Repeat")
        self.repeat, self.repeat_inputs, extra, self.max_iter = repeat_plan(op, repeat, max_iter)
        super().__init__(inputs=[*op.inputs, *extra], outputs=list(op.outputs))
        self.in_list = self.out_list = True
        self.mode, self.ds_id = op.mode, op.ds_id  # already parsed by the wrapped op
        self.op = op
        self.is_random = op.is_random  # type: ignore[misc]

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Pass RUA's strength ``magnitude_coef`` (in [0, 1]) on to the repeated op.

        Raises:
            TypeError: If the op has no ``set_rua_level`` method.
        """
        set_rua_levels([self.op], magnitude_coef, "Repeat")

    def _run(self, data: list[Any], state: dict[str, Any], batched: bool) -> list[Any] | FilteredData:
        store = dict(zip(self.inputs, data))
        # A run that drops the sample (FilteredData) ends the repeats, and the Repeat drops it too, as in
        # FastEstimator.
        if isinstance(self.repeat, int):
            for _ in range(self.repeat):
                if (filtered := run_ops([self.op], store, state, batched)) is not None:
                    return filtered
        else:
            if (filtered := run_ops([self.op], store, state, batched)) is not None:
                return filtered
            runs = 1
            while (self.max_iter is None or runs < self.max_iter) and bool(
                    self.repeat(*[store[key] for key in self.repeat_inputs])):
                if (filtered := run_ops([self.op], store, state, batched)) is not None:
                    return filtered
                runs += 1
        return [store[key] for key in self.outputs]

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return self._run(data, state, batched=False)

    def forward_batch(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return self._run(data, state, batched=True)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped op's state (under 'ops'), or empty when it has none."""
        return wrapped_state([self.op])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys.
        """
        load_wrapped_state([self.op], state, "Repeat")
