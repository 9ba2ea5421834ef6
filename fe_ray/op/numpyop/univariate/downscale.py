"""Downscale: lower image quality by shrinking by a random factor and enlarging back, nearest neighbour (random op).

FastEstimator wraps albumentations' (1.3) Downscale, which resizes with OpenCV (``cv2.resize`` with ``fx = fy =
scale``, then back to the input size); with the default nearest-neighbour interpolation the numpy code here picks
the same pixels: the shrunk size is ``round(size * scale)`` (half to even) and output pixel ``i`` takes source
pixel ``floor(i * in_size / out_size)`` (``floor(i / scale)`` when shrinking).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

INTER_NEAREST = 0
"""OpenCV's ``cv2.INTER_NEAREST``: the only ``interpolation`` fe_ray's Downscale supports."""


def _nearest_rows(count: int, source: int, step: float) -> np.ndarray:
    """OpenCV's nearest-neighbour source index of each of ``count`` outputs (``floor(i * step)``, capped)."""
    return np.minimum(np.floor(np.arange(count) * step).astype(np.int64), source - 1)


def downscale_nearest(image: np.ndarray, scale: float) -> np.ndarray:
    """Shrink ``image`` by ``scale`` and enlarge it back to its size, both nearest neighbour, as OpenCV does.

    Raises:
        ValueError: If the shrunk image would have no rows or columns.
    """
    height, width = image.shape[:2]
    small_h, small_w = int(np.rint(height * scale)), int(np.rint(width * scale))
    if small_h < 1 or small_w < 1:
        raise ValueError(f"Downscale by {scale} leaves no pixels of a {height}x{width} image; raise scale_min.")
    small = image[_nearest_rows(small_h, height, 1.0 / scale)][:, _nearest_rows(small_w, width, 1.0 / scale)]
    # OpenCV's step back up is 1 / (size / small), not small / size: the two differ in the last bit, which moves
    # the rows and columns whose source position lands on a whole number.
    return small[_nearest_rows(height, small_h, 1.0 / (height / small_h))][
        :, _nearest_rows(width, small_w, 1.0 / (width / small_w))]


class Downscale(UnivariateOp):
    """Shrink images by a random factor ``uniform(scale_min, scale_max)`` and enlarge them back (pixelation).

    Both resizes are nearest neighbour, so values and dtype are kept. Several inputs get the same factor.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the downscaled images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        scale_min: The smallest factor, > 0.
        scale_max: The largest factor, >= ``scale_min`` and < 1.
        interpolation: OpenCV's interpolation code; only ``0`` (``cv2.INTER_NEAREST``, FastEstimator's default) is
            supported (fe_ray does not repeat OpenCV's other resize kernels).

    Raises:
        ValueError: If the factors are not ``0 < scale_min <= scale_max < 1``, or ``interpolation`` is not 0; when
            running, if an image would shrink to nothing.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 scale_min: float = 0.25, scale_max: float = 0.25, interpolation: int = INTER_NEAREST) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not 0 < scale_min <= scale_max < 1:
            raise ValueError(f"Downscale needs 0 < scale_min <= scale_max < 1, got scale_min={scale_min!r}, "
                             f"scale_max={scale_max!r}.")
        if interpolation != INTER_NEAREST:
            raise ValueError(f"Downscale supports interpolation={INTER_NEAREST} (cv2.INTER_NEAREST) only, got "
                             f"{interpolation!r}; fe_ray does not repeat OpenCV's other resize kernels.")
        self.scale_min, self.scale_max = float(scale_min), float(scale_max)
        self.interpolation = interpolation

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return float(get_rng(state).uniform(self.scale_min, self.scale_max))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        if data.ndim not in (2, 3):
            raise ValueError(f"Downscale needs (height, width[, channels]) images; {self.inputs} has shape "
                             f"{data.shape}.")
        return downscale_nearest(data, params)
