"""HorizontalFlip and VerticalFlip: mirror an image and its masks (always; wrap in Sometimes for a random flip)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp


class HorizontalFlip(MultiVariateOp):
    """Mirror the image and masks left to right (around the vertical axis), every time it runs.

    As in FastEstimator the flip is not random by itself: ``Sometimes(HorizontalFlip(...), prob=0.5)`` flips half
    of the samples. See :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` for the arguments.
    """

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        # A copy, not a negative-stride view: torch.from_numpy rejects those when the batch becomes a tensor.
        return np.ascontiguousarray(image[:, ::-1])


class VerticalFlip(MultiVariateOp):
    """Mirror the image and masks top to bottom (around the horizontal axis), every time it runs.

    Wrap it in ``Sometimes`` for a random flip. See
    :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` for the arguments.
    """

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        return np.ascontiguousarray(image[::-1])
