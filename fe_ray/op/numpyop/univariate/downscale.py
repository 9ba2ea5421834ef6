"""Downscale: lower image quality by shrinking by a random factor and enlarging back (random op).

FastEstimator wraps albumentations' (1.4.1) Downscale, which resizes with OpenCV (``cv2.resize`` with ``fx = fy =
scale``, then back to the input size), both nearest neighbour or both bilinear. The numpy code here repeats OpenCV's
arithmetic for both:

- nearest neighbour picks the same pixels: the shrunk size is ``round(size * scale)`` (half to even) and output pixel
  ``i`` takes source pixel ``floor(i * in_size / out_size)`` (``floor(i / scale)`` when shrinking);
- bilinear works in float32, as albumentations hands OpenCV uint8 images as ``float32(image / 255)`` and turns the
  result back with ``uint8(clip(result, 0, 1) * 255)`` (truncating). OpenCV has Intel's IPP resize float images;
  :func:`_lerp_axis` repeats the arithmetic of IPP's vector loop. IPP's scalar loop (a few columns at the right of
  some sizes), its affine-warp shrink (used when ``size * scale`` is not a whole number) and OpenCV's own code (two
  or five+ channels) round differently in the last bit: measured against OpenCV 4.11, a few percent of float32 values
  differ, by at most 3e-7, and under 0.1% of uint8 values by one level.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

INTER_NEAREST, INTER_LINEAR = 0, 1
"""OpenCV's ``cv2.INTER_NEAREST`` and ``cv2.INTER_LINEAR``: the ``interpolation`` values Downscale supports."""

def _nearest_rows(count: int, source: int, step: float) -> np.ndarray:
    """OpenCV's nearest-neighbour source index of each of ``count`` outputs (``floor(i * step)``, capped)."""
    return np.minimum(np.floor(np.arange(count) * step).astype(np.int64), source - 1)


def _shrunk_size(image: np.ndarray, scale: float) -> tuple[int, int]:
    """``cv2.resize(image, None, fx=scale, fy=scale)``'s output size (rounded half to even).

    Raises:
        ValueError: If the shrunk image would have no rows or columns.
    """
    height, width = image.shape[:2]
    small_h, small_w = int(np.rint(height * scale)), int(np.rint(width * scale))
    if small_h < 1 or small_w < 1:
        raise ValueError(f"Downscale by {scale} leaves no pixels of a {height}x{width} image; raise scale_min.")
    return small_h, small_w


def downscale_nearest(image: np.ndarray, scale: float) -> np.ndarray:
    """Shrink ``image`` by ``scale`` and enlarge it back to its size, both nearest neighbour, as OpenCV does.

    Raises:
        ValueError: If the shrunk image would have no rows or columns.
    """
    height, width = image.shape[:2]
    small_h, small_w = _shrunk_size(image, scale)
    small = image[_nearest_rows(small_h, height, 1.0 / scale)][:, _nearest_rows(small_w, width, 1.0 / scale)]
    # OpenCV's step back up is 1 / (size / small), not small / size: the two differ in the last bit, which moves
    # the rows and columns whose source position lands on a whole number.
    return small[_nearest_rows(height, small_h, 1.0 / (height / small_h))][
        :, _nearest_rows(width, small_w, 1.0 / (width / small_w))]


def _lerp_axis(image: np.ndarray, axis: int, size_out: int, step: float) -> np.ndarray:
    """Bilinear resampling of float32 ``image`` along ``axis`` to ``size_out`` samples, ``step`` input pixels apart.

    Output ``i`` reads position ``p = (i + 0.5) * step - 0.5`` (double precision), between pixels ``floor(p)`` and
    ``floor(p) + 1`` (clipped into the image, so the edges repeat), as ``a + (b - a) * frac`` with ``frac`` in
    float32 and one rounding of the multiply-add: the arithmetic of the Intel IPP resize that OpenCV calls for float
    images (its vector loop; its scalar loop and OpenCV's own code differ from it in the last bit).
    """
    size_in = image.shape[axis]
    position = (np.arange(size_out) + 0.5) * step - 0.5
    low = np.floor(position).astype(np.int64)
    shape = [1] * image.ndim
    shape[axis] = size_out
    frac = (position - low).astype(np.float32).astype(np.float64).reshape(shape)
    first = np.take(image, np.clip(low, 0, size_in - 1), axis=axis)
    second = np.take(image, np.clip(low + 1, 0, size_in - 1), axis=axis)
    # The float32 difference times a float32 fraction is exact in double, so adding there rounds once, as an FMA.
    return ((second - first).astype(np.float64) * frac + first).astype(np.float32)


def _resize_linear(image: np.ndarray, size: tuple[int, int], steps: tuple[float, float]) -> np.ndarray:
    """``cv2.resize(..., interpolation=cv2.INTER_LINEAR)`` of a float32 image to ``size`` (rows, columns), with
    OpenCV's input pixels per output pixel ``steps`` (rows, columns): columns first, then rows."""
    return _lerp_axis(_lerp_axis(image, 1, size[1], steps[1]), 0, size[0], steps[0])


def downscale_linear(image: np.ndarray, scale: float) -> np.ndarray:
    """Shrink ``image`` by ``scale`` and enlarge it back to its size, both bilinear, as albumentations and OpenCV do.

    uint8 images go through float32 in [0, 1] and come back truncated; float32 images are resized as they are.

    Raises:
        ValueError: If the shrunk image would have no rows or columns.
    """
    height, width = image.shape[:2]
    small_size = _shrunk_size(image, scale)
    values = (image / 255).astype(np.float32) if image.dtype == np.uint8 else image
    if small_size == (height, width):
        restored = values.copy()  # cv2.resize copies an image it is asked to keep at its size, both ways
    else:
        small = _resize_linear(values, small_size, (1.0 / scale, 1.0 / scale))
        # Enlarging to a given size, OpenCV's step is 1 / (size / small), as for nearest neighbour.
        restored = _resize_linear(small, (height, width), (1.0 / (height / small_size[0]),
                                                            1.0 / (width / small_size[1])))
    if image.dtype == np.uint8:
        return (np.clip(restored, 0, 1) * np.float32(255)).astype(np.uint8)
    return restored


class Downscale(UnivariateOp):
    """Shrink images by a random factor ``uniform(scale_min, scale_max)`` and enlarge them back (pixelation).

    Both resizes are nearest neighbour (the default, which keeps values and dtype) or both bilinear (uint8 and
    float32 images only, as in albumentations). Several inputs get the same factor.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the downscaled images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        scale_min: The smallest factor, > 0.
        scale_max: The largest factor, >= ``scale_min`` and < 1.
        interpolation: OpenCV's interpolation code: ``0`` (``cv2.INTER_NEAREST``, FastEstimator's default) or ``1``
            (``cv2.INTER_LINEAR``); fe_ray does not repeat OpenCV's cubic, area and Lanczos resizes.

    Raises:
        ValueError: If the factors are not ``0 < scale_min <= scale_max < 1``, or ``interpolation`` is not 0 or 1;
            when running, if an image would shrink to nothing.
        TypeError: When running bilinear, if an image is neither uint8 nor float32.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 scale_min: float = 0.25, scale_max: float = 0.25, interpolation: int = INTER_NEAREST) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not 0 < scale_min <= scale_max < 1:
            raise ValueError(f"Downscale needs 0 < scale_min <= scale_max < 1, got scale_min={scale_min!r}, "
                             f"scale_max={scale_max!r}.")
        if isinstance(interpolation, bool) or interpolation not in (INTER_NEAREST, INTER_LINEAR):
            raise ValueError(f"Downscale interpolation must be {INTER_NEAREST} (cv2.INTER_NEAREST) or {INTER_LINEAR} "
                             f"(cv2.INTER_LINEAR), got {interpolation!r}; fe_ray does not repeat OpenCV's cubic, "
                             "area and Lanczos resizes.")
        self.scale_min, self.scale_max = float(scale_min), float(scale_max)
        self.interpolation = int(interpolation)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return float(get_rng(state).uniform(self.scale_min, self.scale_max))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        if data.ndim not in (2, 3):
            raise ValueError(f"Downscale needs (height, width[, channels]) images; {self.inputs} has shape "
                             f"{data.shape}.")
        if self.interpolation == INTER_NEAREST:
            return downscale_nearest(data, params)
        if data.dtype not in (np.uint8, np.float32):
            raise TypeError(f"Downscale with interpolation=1 (bilinear) takes uint8 or float32 images, but "
                            f"{self.inputs} has dtype {data.dtype}; convert it (e.g. image.astype(np.float32)) or "
                            "use interpolation=0.")
        return downscale_linear(data, params)
