"""Blur, GaussianBlur and MedianBlur: smoothing with a random odd kernel size, with OpenCV's arithmetic (random ops).

FastEstimator wraps albumentations (1.3), which filters with OpenCV (``cv2.blur``, ``cv2.GaussianBlur`` with
``sigma=0``, ``cv2.medianBlur``); the numpy code here repeats that arithmetic: a box mean rounded to the nearest
uint8, OpenCV's Gaussian kernels (its fixed table up to size 9, its error-diffused 8-bit fixed-point kernels above)
applied exactly and rounded half up, an exact median; borders mirror without repeating the edge pixel (OpenCV's
``BORDER_REFLECT_101``) for the means and repeat the edge pixel for the median. uint8 results equal OpenCV's;
float32 box and median results too, float32 Gaussian results may differ from OpenCV's in the last bit.

The kernel size is drawn per sample from the sample's generator with albumentations' distribution (in a Pipeline
exact across resumes and worker threads; the numbers differ from albumentations' Python ``random`` draws); several
inputs of one op get the same size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, to_range
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

# OpenCV's fixed Gaussian kernels for sizes 3 to 9 with sigma 0, in units of 1/256 (exact in 8 bits, so float
# images use them as they are).
_SMALL_GAUSSIAN = {3: [64, 128, 64], 5: [16, 64, 96, 64, 16], 7: [8, 28, 56, 72, 56, 28, 8],
                   9: [4, 13, 30, 51, 60, 51, 30, 13, 4]}


def _windows(image: np.ndarray, size: int, mode: str) -> tuple[np.ndarray, int, int]:
    """``image`` padded by ``size // 2`` on both spatial axes (numpy pad ``mode``), with its height and width."""
    radius = size // 2
    pad = [(radius, radius), (radius, radius)] + [(0, 0)] * (image.ndim - 2)
    return np.pad(image, pad, mode=mode), image.shape[0], image.shape[1]  # type: ignore[call-overload]


def box_blur(image: np.ndarray, size: int) -> np.ndarray:
    """``cv2.blur(image, (size, size))`` for an odd ``size``: the window mean, rounded for uint8 images."""
    wide = image.dtype == np.uint8
    padded, height, width = _windows(image.astype(np.int64 if wide else np.float64), size, "reflect")
    rows = sum(padded[i:i + height] for i in range(size))
    total = sum(rows[:, j:j + width] for j in range(size))
    area = size * size
    if wide:
        # An odd area never gives a mean ending in exactly .5, so rounding needs no tie rule.
        return ((2 * total + area) // (2 * area)).astype(np.uint8)
    return (total / area).astype(image.dtype)


def _float_gaussian(size: int) -> np.ndarray:
    """OpenCV's Gaussian weights of an odd ``size`` for sigma 0 (sigma from the size), in double precision."""
    sigma = 0.3 * ((size - 1) * 0.5 - 1) + 0.8
    offsets = np.arange(size) - (size - 1) / 2
    weights = np.exp(-offsets * offsets / (2 * sigma * sigma))
    return weights / weights.sum()


def gaussian_kernel_256(size: int) -> np.ndarray:
    """OpenCV's 8-bit fixed-point Gaussian kernel (in 1/256 units, summing to 256) of an odd ``size``, sigma 0."""
    if size in _SMALL_GAUSSIAN:
        return np.array(_SMALL_GAUSSIAN[size], dtype=np.int64)
    weights = _float_gaussian(size)
    # OpenCV rounds the weights from the outside in, carrying each rounding error inward; the centre takes the rest.
    kernel = np.zeros(size, dtype=np.int64)
    carried = 0.0
    for i in range(size // 2):
        adjusted = weights[i] * 256 + carried
        kernel[i] = kernel[size - 1 - i] = int(np.rint(adjusted))
        carried = adjusted - kernel[i]
    kernel[size // 2] = 256 - 2 * int(kernel[:size // 2].sum())
    return kernel


def gaussian_blur(image: np.ndarray, size: int) -> np.ndarray:
    """``cv2.GaussianBlur(image, (size, size), 0)`` for an odd ``size``: rows, then columns."""
    kernel = gaussian_kernel_256(size)
    if image.dtype == np.uint8:
        padded, height, width = _windows(image.astype(np.int64), size, "reflect")
        rows = sum(padded[:, j:j + width] * kernel[j] for j in range(size))
        total = sum(rows[i:i + height] * kernel[i] for i in range(size))
        return ((total + (1 << 15)) >> 16).astype(np.uint8)  # exact in 16 fraction bits, rounded half up
    weights = (kernel / 256.0 if size in _SMALL_GAUSSIAN else _float_gaussian(size)).astype(np.float32)
    padded, height, width = _windows(image.astype(np.float32), size, "reflect")
    rows = sum(padded[:, j:j + width] * weights[j] for j in range(size))
    return sum(rows[i:i + height] * weights[i] for i in range(size)).astype(image.dtype)


def median_blur(image: np.ndarray, size: int) -> np.ndarray:
    """``cv2.medianBlur(image, size)`` for an odd ``size``: the window median, edge pixels repeated at borders."""
    padded, height, width = _windows(image, size, "edge")
    stack = np.stack([padded[i:i + height, j:j + width] for i in range(size) for j in range(size)])
    return np.partition(stack, size * size // 2, axis=0)[size * size // 2]


def _int_range(value: int | Sequence[int], low: int, op: str) -> tuple[int, int]:
    limits = to_range(value, "blur_limit", op, low=low)
    if not all(float(v).is_integer() for v in limits) or limits[0] > limits[1]:
        raise ValueError(f"{op} blur_limit must be an int or a pair (low, high) of ints, got {value!r}.")
    return int(limits[0]), int(limits[1])


class _RandomKernel(UnivariateOp):
    """A random odd kernel size per sample, applied by :meth:`filter` to uint8 or float32 images."""

    is_random = True

    def apply(self, data: np.ndarray, params: int) -> np.ndarray:
        check_dtype(data, (np.uint8, np.float32), type(self).__name__, self.inputs)
        if data.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__} needs (height, width[, channels]) images; {self.inputs} has "
                             f"shape {data.shape}.")
        return self.filter(data, params)

    def filter(self, data: np.ndarray, size: int) -> np.ndarray:
        """Filter one image with kernel ``size``."""
        raise NotImplementedError


class Blur(_RandomKernel):
    """Blur images with a box (mean) filter of a random odd size from ``blur_limit``.

    The size is uniform over the odd numbers from ``blur_limit[0]`` to ``blur_limit[1]``; a single number ``v``
    means ``(3, v)``, as albumentations reads it. uint8 means are rounded to the nearest integer.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The kernel size range, ``low`` odd and at least 3.

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of ints with an odd ``low >= 3`` (albumentations would
            also run even sizes; fe_ray refuses them); when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blur_limit: int | Sequence[int] = 7) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.blur_limit = _int_range(blur_limit, 3, "Blur")
        if self.blur_limit[0] < 3 or self.blur_limit[0] % 2 != 1:
            raise ValueError(f"Blur blur_limit must start at an odd size >= 3, got {blur_limit!r} (read as "
                             f"{self.blur_limit}).")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int:
        sizes = np.arange(self.blur_limit[0], self.blur_limit[1] + 1, 2)
        return int(sizes[get_rng(state).integers(len(sizes))])

    def filter(self, data: np.ndarray, size: int) -> np.ndarray:
        return box_blur(data, size)


class GaussianBlur(_RandomKernel):
    """Blur images with a Gaussian filter of a random odd size from ``blur_limit`` (sigma from the size).

    The size is drawn as albumentations does: uniform over ``blur_limit[0] .. blur_limit[1]`` with an even draw
    moved up by one, so the default ``7`` (read as ``(3, 7)``) gives 3, 5 and 7 with probabilities 1/5, 2/5 and
    2/5. Sigma is OpenCV's default for the size, ``0.3 * ((size - 1) / 2 - 1) + 0.8``.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The kernel size range: a number ``v`` means ``(3, v)``, or a pair of odd sizes >= 3.

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of odd ints >= 3; when running, if an image is not
            2-D or 3-D.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blur_limit: int | Sequence[int] = 7) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        low, high = _int_range(blur_limit, 0, "GaussianBlur")
        if low == 0:
            low, high = 3, max(3, high)  # albumentations' rule when neither the size nor sigma has a minimum
        if low < 3 or low % 2 != 1 or high % 2 != 1:
            raise ValueError(f"GaussianBlur blur_limit must hold odd sizes >= 3, got {blur_limit!r} (read as "
                             f"{(low, high)}).")
        self.blur_limit = (low, high)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int:
        low, high = self.blur_limit
        size = int(get_rng(state).integers(low, high + 1))
        return size + 1 if size % 2 == 0 else size

    def filter(self, data: np.ndarray, size: int) -> np.ndarray:
        return gaussian_blur(data, size)


class MedianBlur(_RandomKernel):
    """Replace each pixel by the median of a window of a random odd size from ``blur_limit``.

    The size is uniform over the odd numbers from ``blur_limit[0]`` to ``blur_limit[1]``; a single number ``v``
    means ``(3, v)``. float32 images take sizes 3 and 5 only, as OpenCV.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The window size range, odd sizes >= 3.

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of odd ints >= 3; when running, if an image is not
            2-D or 3-D, or a float32 image meets a size above 5.
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blur_limit: int | Sequence[int] = 5) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.blur_limit = _int_range(blur_limit, 3, "MedianBlur")
        if self.blur_limit[0] < 3 or self.blur_limit[0] % 2 != 1 or self.blur_limit[1] % 2 != 1:
            raise ValueError(f"MedianBlur blur_limit must hold odd sizes >= 3, got {blur_limit!r} (read as "
                             f"{self.blur_limit}).")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int:
        sizes = np.arange(self.blur_limit[0], self.blur_limit[1] + 1, 2)
        return int(sizes[get_rng(state).integers(len(sizes))])

    def filter(self, data: np.ndarray, size: int) -> np.ndarray:
        if data.dtype == np.float32 and size > 5:
            raise ValueError(f"MedianBlur filters float32 images with sizes 3 and 5 only (as OpenCV), but drew "
                             f"{size} for {self.inputs}: lower blur_limit to (3, 5) or convert to uint8.")
        return median_blur(data, size)
