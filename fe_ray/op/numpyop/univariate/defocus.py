"""Defocus and ZoomBlur: camera-style blurs (a blurred disk kernel; an average of central zooms), as albumentations
(1.4) makes them.

FastEstimator 1.7 wraps albumentations' Defocus and ZoomBlur. Defocus builds an "aliased disk" (the pixels within
``radius`` of the centre of a ``(2 max(8, radius) + 1)``-wide square, normalised to sum 1), smooths it with a 3x3
Gaussian (5x5 above radius 8) of standard deviation ``alias_blur`` and filters the image with it (``cv2.filter2D``:
correlation, mirrored borders, integer results rounded). ZoomBlur averages the image with central crops of it scaled
back up by each factor of ``arange(1, max_factor, step_factor)`` (bilinear, ``cv2.resize``'s pixel mapping), and
clips and truncates the mean into the input's dtype. The numpy code here repeats those steps with the project's
filter (:func:`fe_ray.op.numpyop.univariate.blur.filter2d`, which follows OpenCV's direct and DFT sums) and
resizer (:func:`fe_ray.op.numpyop.multivariate.interpolation.resize_array`).

Parameters are drawn per sample from the sample's generator with albumentations' distributions (exact across
resumes and worker threads in a Pipeline; the numbers differ from albumentations' Python ``random`` draws); several
inputs of one op share them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.interpolation import INTER_LINEAR, resize_array
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, clip_to, to_range
from fe_ray.op.numpyop.univariate.blur import FILTER_DTYPES, filter2d, gaussian_kernel_256
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


def _check_image(image: np.ndarray, op: str, inputs: list[str]) -> None:
    check_dtype(image, FILTER_DTYPES, op, inputs)
    if image.ndim not in (2, 3):
        raise ValueError(f"{op} needs (height, width[, channels]) images; {inputs} has shape {image.shape}.")


def _gaussian_weights(size: int, sigma: float) -> np.ndarray:
    """``cv2.getGaussianKernel(size, sigma)`` as float32: OpenCV's fixed table when ``sigma <= 0``."""
    if sigma <= 0:
        return (gaussian_kernel_256(size) / 256.0).astype(np.float32)
    offsets = np.arange(size) - (size - 1) / 2
    weights = np.exp(-offsets * offsets / (2 * sigma * sigma))
    return (weights / weights.sum()).astype(np.float32)


def defocus_kernel(radius: int, alias_blur: float) -> np.ndarray:
    """The float32 defocus kernel of albumentations: a normalised disk of ``radius`` smoothed by a Gaussian.

    The disk holds the points ``x**2 + y**2 <= radius**2`` of a square of half-width ``max(8, radius)``; the
    Gaussian (3 wide up to radius 8, else 5, standard deviation ``alias_blur``) runs over it with mirrored borders
    (``cv2.GaussianBlur``'s default), rows then columns.
    """
    half = max(8, radius)
    offsets = np.arange(-half, half + 1)
    disk = (offsets[None, :] ** 2 + offsets[:, None] ** 2 <= radius * radius).astype(np.float32)
    disk /= disk.sum()
    size = 3 if radius <= 8 else 5
    weights = _gaussian_weights(size, alias_blur)
    pad = size // 2
    padded = np.pad(disk, pad, mode="reflect")
    extent = disk.shape[0]
    rows = sum(padded[:, j:j + extent] * weights[j] for j in range(size))
    return sum(rows[i:i + extent] * weights[i] for i in range(size)).astype(np.float32)


class Defocus(UnivariateOp):
    """Blur images as an out-of-focus lens does: filter them with a (slightly smoothed) disk of a random radius.

    Per sample ``radius`` is a uniform integer of ``radius`` (both ends included) and ``alias_blur`` a uniform
    float of ``alias_blur``; the kernel is :func:`defocus_kernel`. uint8 and uint16 results are rounded to the
    nearest level; float32 and float64 results are not clipped (as in albumentations). From radius 7 on the disk
    comes within the smoothing's reach of the kernel's edge, whose mirrored border adds up to about 1.5% to the
    kernel's sum, so such radii also brighten images slightly, as in albumentations.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        radius: The disk radius range: an int ``r`` means ``(1, r)``, or a pair of ints ``>= 1``.
        alias_blur: The Gaussian's standard deviation range: a number ``s`` means ``(0, s)``, or a pair ``>= 0``.

    Raises:
        ValueError: If ``radius`` is not an int or a pair of ints >= 1, or ``alias_blur`` not a non-negative number
            or pair; when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is not uint8, uint16, float32 or float64.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 radius: int | tuple[int, int] = (3, 10), alias_blur: float | tuple[float, float] = (0.1, 0.5)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        low, high = to_range(radius, "radius", "Defocus", low=1)
        if not (low.is_integer() and high.is_integer() and 1 <= low <= high):
            raise ValueError(f"Defocus radius must be an int r (meaning (1, r)) or a pair (low, high) of ints with "
                             f"1 <= low <= high, got {radius!r}.")
        self.radius = (int(low), int(high))
        self.alias_blur = to_range(alias_blur, "alias_blur", "Defocus", low=0.0)
        if not 0 <= self.alias_blur[0] <= self.alias_blur[1]:
            raise ValueError(f"Defocus alias_blur must be a number s >= 0 (meaning (0, s)) or a pair (low, high) with "
                             f"0 <= low <= high, got {alias_blur!r}.")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        rng = get_rng(state)
        radius = int(rng.integers(self.radius[0], self.radius[1] + 1))
        alias_blur = float(rng.uniform(*self.alias_blur))
        return defocus_kernel(radius, alias_blur)

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        _check_image(data, "Defocus", self.inputs)
        return filter2d(data, params)


def central_zoom(image: np.ndarray, factor: float) -> np.ndarray:
    """The central ``1 / factor`` crop of ``image`` scaled back up by ``factor`` (bilinear) and cropped centrally
    to the image's size; keeps the dtype (integers rounded)."""
    height, width = image.shape[:2]
    crop_h, crop_w = math.ceil(height / factor), math.ceil(width / factor)
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
    crop = image[top:top + crop_h, left:left + crop_w]
    # albumentations scales to int(crop * factor), which a float rounding can leave one pixel short of the image (it
    # then fails); never going below the image's size avoids that.
    zoomed = resize_array(crop, max(height, int(crop_h * factor)), max(width, int(crop_w * factor)), INTER_LINEAR)
    trim_top, trim_left = (zoomed.shape[0] - height) // 2, (zoomed.shape[1] - width) // 2
    return zoomed[trim_top:trim_top + height, trim_left:trim_left + width]


class ZoomBlur(UnivariateOp):
    """Blur images as a camera zooming during the exposure does: average them with central zooms of themselves.

    Per sample ``max_factor = uniform(max_factor)`` and ``step = uniform(step_factor)``; the image is averaged
    (the zooms summed in float32, as albumentations does) with one :func:`central_zoom` per factor of
    ``arange(1, max_factor, step)``, then clipped to the dtype's range (``[0, 1]`` for float images) and truncated.
    A ``max_factor`` of exactly 1 leaves images unchanged.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        max_factor: The largest zoom's range: a number ``m`` means ``(1, m)``, or a pair, all ``>= 1``.
        step_factor: The zoom step's range: a number ``s`` means always ``s``, or a pair, all ``> 0``.

    Raises:
        ValueError: If ``max_factor`` is not a number or pair >= 1, or ``step_factor`` not a positive number or pair;
            when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is not uint8, uint16, float32 or float64.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 max_factor: float | tuple[float, float] = (1, 1.31),
                 step_factor: float | tuple[float, float] = (0.01, 0.03)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.max_factor = to_range(max_factor, "max_factor", "ZoomBlur", low=1.0)
        if not 1 <= self.max_factor[0] <= self.max_factor[1]:
            raise ValueError(f"ZoomBlur max_factor must be a number m >= 1 (meaning (1, m)) or a pair (low, high) with "
                             f"1 <= low <= high, got {max_factor!r}.")
        self.step_factor = to_range(step_factor, "step_factor", "ZoomBlur",
                                    low=step_factor if not isinstance(step_factor, Sequence) else None)
        if not 0 < self.step_factor[0] <= self.step_factor[1]:
            raise ValueError(f"ZoomBlur step_factor must be a number s > 0 or a pair (low, high) with 0 < low <= high, "
                             f"got {step_factor!r}.")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        rng = get_rng(state)
        max_factor = float(rng.uniform(*self.max_factor))
        step = float(rng.uniform(*self.step_factor))
        return np.arange(1.0, max_factor, step)

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        _check_image(data, "ZoomBlur", self.inputs)
        total = np.zeros(data.shape, dtype=np.float32)
        for factor in params:
            total += central_zoom(data, float(factor))
        return clip_to((data + total) / np.float32(len(params) + 1), data.dtype)
