"""HorizontalFlip and VerticalFlip mirror an image and its masks every time; Flip mirrors them a random way."""

from __future__ import annotations

from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, translate_scale
from fe_ray.op.numpyop.randomness import get_rng

# The axes Flip mirrors for each of its three equally likely choices (OpenCV flip codes -1, 0, 1).
_FLIP_AXES = ((0, 1), (0,), (1,))


class HorizontalFlip(MultiVariateOp):
    """Mirror the image and masks left to right (around the vertical axis), every time it runs.

    As in FastEstimator the flip is not random by itself: ``Sometimes(HorizontalFlip(...), prob=0.5)`` flips half
    of the samples. See :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` for the arguments.
    """

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        # A copy, not a negative-stride view: torch.from_numpy rejects those when the batch becomes a tensor.
        return np.ascontiguousarray(image[:, ::-1])

    def box_map(self, params: Any, height: int, width: int) -> np.ndarray:
        return translate_scale(sx=-1.0, tx=width)

    def keypoint_map(self, params: Any, height: int, width: int) -> np.ndarray:
        return translate_scale(sx=-1.0, tx=width - 1)  # keypoints are pixel indices: column 0 <-> width - 1


class VerticalFlip(MultiVariateOp):
    """Mirror the image and masks top to bottom (around the horizontal axis), every time it runs.

    Wrap it in ``Sometimes`` for a random flip. See
    :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` for the arguments.
    """

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        return np.ascontiguousarray(image[::-1])

    def box_map(self, params: Any, height: int, width: int) -> np.ndarray:
        return translate_scale(sy=-1.0, ty=height)

    def keypoint_map(self, params: Any, height: int, width: int) -> np.ndarray:
        return translate_scale(sy=-1.0, ty=height - 1)


class Flip(MultiVariateOp):
    """Mirror the image and masks one of three ways, chosen uniformly per sample: left to right, top to bottom, or
    both (a half turn).

    Unlike HorizontalFlip and VerticalFlip this op is random by itself (albumentations' ``Flip``); it never leaves
    the input unchanged. In a Pipeline the choice comes from the sample's generator (exact across resumes and worker
    threads, see :mod:`fe_ray.op.numpyop.randomness`). See
    :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` for the arguments.
    """

    is_random = True

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> tuple[int, ...]:
        return _FLIP_AXES[int(get_rng(state).integers(0, len(_FLIP_AXES)))]

    def apply(self, image: np.ndarray, params: tuple[int, ...]) -> np.ndarray:
        return np.flip(image, axis=params).copy()  # C-ordered, so torch.from_numpy accepts it

    def box_map(self, params: tuple[int, ...], height: int, width: int) -> np.ndarray:
        return self._map(params, height, width)

    def keypoint_map(self, params: tuple[int, ...], height: int, width: int) -> np.ndarray:
        return self._map(params, height - 1, width - 1)  # keypoints are pixel indices

    @staticmethod
    def _map(params: tuple[int, ...], far_y: float, far_x: float) -> np.ndarray:
        flip_x, flip_y = 1 in params, 0 in params
        return translate_scale(sx=-1.0 if flip_x else 1.0, sy=-1.0 if flip_y else 1.0, tx=far_x if flip_x else 0.0,
                               ty=far_y if flip_y else 0.0)
