"""Layout ops: Reshape (to a target shape) and ChannelTranspose (permute axes, e.g. HWC to CHW)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


class Reshape(UnivariateOp):
    """Reshape each sample to ``shape`` (at most one -1, which takes the remaining elements).

    As a Network pop the batch axis is kept and every sample is reshaped to ``shape``.

    Args:
        shape: The target shape of one sample.
        inputs: Key(s) of the data.
        outputs: Key(s) to write the reshaped data to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: If ``shape`` has more than one -1 or a non-int entry, or (when running) the sample's size does
            not fit it.
    """

    def __init__(self, shape: int | Sequence[int], inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < -1 for d in dims) or \
                dims.count(-1) > 1:
            raise ValueError(f"Reshape shape must be non-negative ints with at most one -1, got {shape!r}.")
        self.shape = tuple(int(d) for d in dims)

    def _reshape(self, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        try:
            return np.reshape(data, shape)
        except ValueError:
            raise ValueError(f"Reshape cannot make {self.inputs} of shape {data.shape} ({data.size} elements) into "
                             f"{self.shape}; choose a shape with as many elements (a -1 takes the rest).") from None

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        return self._reshape(data, self.shape)

    def apply_batch(self, data: np.ndarray) -> np.ndarray:
        return self._reshape(data, (len(data), *self.shape))


class ChannelTranspose(UnivariateOp):
    """Permute the axes of each sample by ``axes`` (default ``(2, 0, 1)``: height-width-channel to channel-first).

    As a Network pop the batch axis stays first.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the transposed images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        axes: The permutation of one sample's axes.

    Raises:
        ValueError: If ``axes`` is not a permutation of ``0..n-1``, or (when running) the sample has another
            number of axes.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 axes: Sequence[int] = (2, 0, 1)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        # Negative axes count from the end, as np.transpose (FastEstimator's) takes them.
        self.axes = tuple(int(a) % len(axes) if -len(axes) <= int(a) < 0 else int(a) for a in axes)
        if sorted(self.axes) != list(range(len(self.axes))):
            raise ValueError(f"ChannelTranspose axes must be a permutation of 0..{len(self.axes) - 1}, got {axes!r}.")

    def _check(self, data: np.ndarray, batched: bool) -> None:
        if data.ndim - batched != len(self.axes):
            raise ValueError(f"ChannelTranspose axes {self.axes} permute {len(self.axes)} axes, but a sample of "
                             f"{self.inputs} has shape {data.shape[batched:]}; pass axes matching its rank.")

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        self._check(data, False)
        return np.ascontiguousarray(np.transpose(data, self.axes))

    def apply_batch(self, data: np.ndarray) -> np.ndarray:
        self._check(data, True)
        return np.ascontiguousarray(np.transpose(data, (0, *(a + 1 for a in self.axes))))
