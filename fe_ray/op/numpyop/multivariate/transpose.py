"""Transpose and RandomRotate90: move an image and its masks by exact pixel permutations (no interpolation)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.randomness import get_rng


class Transpose(MultiVariateOp):
    """Swap the rows and columns of the image and masks (mirror across the main diagonal), every time it runs.

    A ``(height, width, channels)`` input becomes ``(width, height, channels)``; channels are untouched. Wrap it in
    ``Sometimes`` for a random transpose. See :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`
    for the arguments.
    """

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        # A C-ordered copy, never a view: the output must not alias the input, and torch wants plain strides.
        return np.swapaxes(image, 0, 1).copy()

    def box_map(self, params: Any, height: int, width: int) -> np.ndarray:
        return np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # (x, y) -> (y, x)


class RandomRotate90(MultiVariateOp):
    """Rotate the image and masks counter-clockwise by 0, 1, 2 or 3 quarter turns, chosen uniformly per sample.

    Pixels move exactly; a quarter turn swaps height and width. Random: in a Pipeline the number of turns comes from
    the sample's generator (exact across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`). See
    :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` for the arguments.
    """

    is_random = True

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> int:
        return int(get_rng(state).integers(0, 4))

    def apply(self, image: np.ndarray, params: int) -> np.ndarray:
        return np.rot90(image, params, axes=(0, 1)).copy()  # a copy even for 0 turns

    def box_map(self, params: int, height: int, width: int) -> np.ndarray:
        return _quarter_turns(params, height, width, 0)

    def keypoint_map(self, params: int, height: int, width: int) -> np.ndarray:
        return _quarter_turns(params, height, width, 1)  # keypoints are pixel indices: column 0 <-> width - 1


def _quarter_turns(turns: int, height: int, width: int, index_offset: int) -> np.ndarray:
    matrix = np.eye(3)
    for _ in range(turns):
        # A counter-clockwise quarter turn of a width-wide image: (x, y) -> (y, width - x); then the sides swap.
        matrix = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, width - index_offset], [0.0, 0.0, 1.0]]) @ matrix
        height, width = width, height
    return matrix[:2]
