"""The base of image-only ops: one transform applied alike to every input key, with shared random parameters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.numpyop import NumpyOp


class UnivariateOp(NumpyOp):
    """An op applying the same transform to each of its inputs, ``inputs[i]`` written to ``outputs[i]``.

    As in FastEstimator, ``forward`` takes and returns a list (one entry per input); a direct call with a single
    array returns a single array. A random subclass draws its parameters once per sample in :meth:`get_params`, so
    several inputs (say an image and its pair) get the same augmentation, as FastEstimator's replayed
    albumentations do.

    Subclasses implement :meth:`apply`; random ones set ``is_random = True`` and override :meth:`get_params`;
    deterministic ones whose :meth:`apply` also works on a batch (element-wise ops) are used as such by
    :meth:`forward_batch`, others override :meth:`apply_batch`.

    Raises:
        ValueError: If ``inputs`` and ``outputs`` name a different number of keys.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"{type(self).__name__} transforms each input into the output at the same position, but "
                             f"got {len(self.inputs)} input(s) {self.inputs} and {len(self.outputs)} output(s) "
                             f"{self.outputs}; pass as many outputs as inputs.")
        self.in_list, self.out_list = True, True

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> Any:
        """The random parameters of one sample, drawn from ``get_rng(state)``; ``data`` is its first input."""
        return None

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        """Transform one input of one sample with the sample's ``params``."""
        raise NotImplementedError

    def apply_batch(self, data: np.ndarray) -> np.ndarray:
        """Transform a whole batch of one input (deterministic ops only); :meth:`apply` by default."""
        return self.apply(data, None)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        single = not isinstance(data, (list, tuple))
        items = [np.asarray(x) for x in ([data] if single else data)]
        params = self.get_params(items[0], state)
        results = [self.apply(x, params) for x in items]
        return results[0] if single else results

    def forward_batch(self, data: Any, state: dict[str, Any]) -> Any:
        single = not isinstance(data, (list, tuple))
        items = [np.asarray(x) for x in ([data] if single else data)]
        if self.is_random:
            results = super().forward_batch(items, state)  # per sample: each sample draws its own parameters
        else:
            results = [self.apply_batch(x) for x in items]
        return results[0] if single else results
