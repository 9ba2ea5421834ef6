"""Sometimes: run a NumpyOp on a random fraction of the samples."""

from __future__ import annotations

from typing import Any

from fe_ray.op.meta_common import SometimesBase, load_wrapped_state, wrapped_state
from fe_ray.op.numpyop.meta.meta import check_wrapped, set_rua_levels
from fe_ray.op.numpyop.numpyop import NumpyOp
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.types import FilteredData


class Sometimes(SometimesBase, NumpyOp):
    """Run ``numpy_op`` with probability ``prob``; otherwise its outputs keep their current values.

    The op's output keys that it does not also read are passed through unchanged when it does not run, so they must
    already exist in the data (create a default with a LambdaOp first), as in FastEstimator. The wrapped op's
    ``mode`` and ``ds_id`` become this op's.

    Random: in a Pipeline the coin comes from the sample's generator, and a random wrapped op continues drawing from
    the same generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`). As a
    Network pop one coin decides for the whole batch, as in FastEstimator.

    Args:
        numpy_op: The op to run sometimes.
        prob: The probability of running it, in [0, 1].

    Raises:
        TypeError: If ``numpy_op`` is not a NumpyOp, or is a Delete.
        ValueError: If ``prob`` is not a number in [0, 1].
    """

    is_random = True

    def __init__(self, numpy_op: NumpyOp, prob: float = 0.5) -> None:
        self._wrap(check_wrapped(numpy_op, "Sometimes"), prob)

    def _run(self, data: Any, state: dict[str, Any], batched: bool) -> Any:
        # The Pipeline always hands a list (one value per input key); a direct call with a bare value gets one back.
        single = not isinstance(data, (list, tuple))
        items = [data] if single else list(data)
        if get_rng(state).random() < self.prob:
            result = (self.op.forward_batch if batched else self.op.forward)(self._op_inputs(items), state)
            if isinstance(result, FilteredData):
                return result  # the op dropped the sample: so does Sometimes, as in FastEstimator
            if not self.op.outputs:
                return None  # an op writing nothing (a RemoveIf that kept the sample)
            results = list(result) if self.op.out_list else [result]
        else:
            results = self._skip(items)
        return results[0] if single and len(results) == 1 else results

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return self._run(data, state, batched=False)

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        return self._run(data, state, batched=True)

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Pass RUA's strength on to the wrapped op (so ``Sometimes`` can be one of RUA's choices).

        Raises:
            TypeError: If the wrapped op has no ``set_rua_level`` method.
        """
        set_rua_levels([self.op], magnitude_coef, "Sometimes")

    def state_dict(self) -> dict[str, Any]:
        return wrapped_state([self.op])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_wrapped_state([self.op], state, "Sometimes")
