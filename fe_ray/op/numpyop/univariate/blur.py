"""Blur, GaussianBlur and MedianBlur: smoothing with a random odd kernel size, with OpenCV's arithmetic (random ops).

FastEstimator wraps albumentations (1.3), which filters with OpenCV (``cv2.blur``, ``cv2.GaussianBlur`` with
``sigma=0``, ``cv2.medianBlur``); the numpy code here repeats that arithmetic: a box mean rounded to the nearest
uint8, OpenCV's Gaussian kernels (its fixed table up to size 9, its error-diffused 8-bit fixed-point kernels above)
applied exactly and rounded half up, an exact median; borders mirror without repeating the edge pixel (OpenCV's
``BORDER_REFLECT_101``) for the means and repeat the edge pixel for the median. The ops take the dtypes OpenCV's
filters take under albumentations: uint8, uint16, float32 and float64 (MedianBlur: not float64, which
``cv2.medianBlur`` refuses). uint8 and uint16 results equal OpenCV's (uint16 Gaussians with its 16-bit fixed-point
kernels), float box and median results too; float Gaussian results may differ from OpenCV's in the last bit.

The kernel size is drawn per sample from the sample's generator with albumentations' distribution (in a Pipeline
exact across resumes and worker threads; the numbers differ from albumentations' Python ``random`` draws); several
inputs of one op get the same size.

``Blur(advanced=True)`` is albumentations' ``AdvancedBlur``: a generalized-Gaussian kernel with its own sigma per
axis, rotated, shaped by ``beta`` and multiplied by uniform noise, applied as ``cv2.filter2D`` does (a correlation
with a mirrored border, rounded to the nearest value for uint8). ``GaussianBlur``'s ``sigma_limit`` draws the
Gaussian's sigma per sample, as ``cv2.GaussianBlur(image, (size, size), sigma)`` uses it.
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


# The dtypes the filters here take: those cv2.blur / cv2.GaussianBlur / cv2.filter2D take under albumentations
# (FastEstimator blurs uint16 and float64 images too; integers wider than 16 bits and bools OpenCV refuses or
# converts, so they are refused here).
FILTER_DTYPES: tuple[type, ...] = (np.uint8, np.uint16, np.float32, np.float64)


def round_to(total: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """A float filter result as OpenCV's ``saturate_cast`` writes it to ``dtype``: integers rounded to the nearest
    (half to even) and clipped to the dtype's range, floats cast as they are."""
    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return np.clip(np.rint(total), limits.min, limits.max).astype(dtype)
    return np.asarray(total).astype(dtype)


def _windows(image: np.ndarray, size: int, mode: str) -> tuple[np.ndarray, int, int]:
    """``image`` padded on both spatial axes (numpy pad ``mode``) for ``size`` x ``size`` windows anchored at
    ``size // 2`` as OpenCV anchors them (``size // 2`` before, ``(size - 1) // 2`` after: equal for odd sizes), with
    its height and width."""
    span = (size // 2, (size - 1) // 2)
    pad = [span, span] + [(0, 0)] * (image.ndim - 2)
    return np.pad(image, pad, mode=mode), image.shape[0], image.shape[1]  # type: ignore[call-overload]


def box_blur(image: np.ndarray, size: int) -> np.ndarray:
    """``cv2.blur(image, (size, size))`` for any ``size >= 1``: the window mean, rounded half up for integer images
    (an odd area has no ties; for an even one OpenCV may round a tie down)."""
    integer = np.issubdtype(image.dtype, np.integer)
    padded, height, width = _windows(image.astype(np.int64 if integer else np.float64), size, "reflect")
    rows = sum(padded[i:i + height] for i in range(size))
    total = sum(rows[:, j:j + width] for j in range(size))
    area = size * size
    if integer:
        return ((2 * total + area) // (2 * area)).astype(image.dtype)
    return (total / area).astype(image.dtype)


def _float_gaussian(size: int, sigma: float = 0.0) -> np.ndarray:
    """OpenCV's Gaussian weights of an odd ``size`` (sigma <= 0: sigma from the size), in double precision."""
    if sigma <= 0:
        sigma = 0.3 * ((size - 1) * 0.5 - 1) + 0.8
    offsets = np.arange(size) - (size - 1) / 2
    weights = np.exp(-offsets * offsets / (2 * sigma * sigma))
    return weights / weights.sum()


def gaussian_kernel_fixed(size: int, sigma: float = 0.0, bits: int = 8) -> np.ndarray:
    """OpenCV's fixed-point Gaussian kernel of an odd ``size`` with ``bits`` fraction bits (in ``1 / 2**bits``
    units, summing to ``2**bits``): 8 bits for uint8 images, 16 for uint16 ones.

    ``sigma <= 0`` takes sigma from the size (and OpenCV's fixed table for sizes up to 9, exact in 8 bits).
    """
    unit = 1 << bits
    if sigma <= 0 and size in _SMALL_GAUSSIAN:
        return np.array(_SMALL_GAUSSIAN[size], dtype=np.int64) << (bits - 8)
    weights = _float_gaussian(size, sigma)
    # OpenCV rounds the weights from the outside in, carrying each rounding error inward; the centre takes the rest.
    kernel = np.zeros(size, dtype=np.int64)
    carried = 0.0
    for i in range(size // 2):
        adjusted = weights[i] * unit + carried
        kernel[i] = kernel[size - 1 - i] = int(np.rint(adjusted))
        carried = adjusted - kernel[i]
    kernel[size // 2] = unit - 2 * int(kernel[:size // 2].sum())
    return kernel


def gaussian_kernel_256(size: int, sigma: float = 0.0) -> np.ndarray:
    """OpenCV's 8-bit fixed-point Gaussian kernel (in 1/256 units, summing to 256) of an odd ``size``.

    ``sigma <= 0`` takes sigma from the size (and OpenCV's fixed table for sizes up to 9).
    """
    return gaussian_kernel_fixed(size, sigma, 8)


def gaussian_kernel_size(sigma: float, dtype: np.dtype[Any]) -> int:
    """The size ``cv2.GaussianBlur`` derives from ``sigma`` (> 0) when given size 0: 3 sigmas a side for uint8, 4
    for float images, made odd."""
    return int(np.rint(sigma * (3 if dtype == np.uint8 else 4) * 2 + 1)) | 1


def gaussian_blur(image: np.ndarray, size: int, sigma: float = 0.0) -> np.ndarray:
    """``cv2.GaussianBlur(image, (size, size), sigma)`` for an odd ``size`` (or 0 with ``sigma > 0``: the size from
    sigma; ``sigma <= 0``: sigma from the size): rows, then columns."""
    if size == 0:
        if sigma <= 0:
            raise ValueError("gaussian_blur needs a size > 0 or a sigma > 0, got size 0 and sigma "
                             f"{sigma}.")
        size = gaussian_kernel_size(sigma, image.dtype)
    if image.dtype in (np.uint8, np.uint16):
        # OpenCV's bit-exact path: 8 (uint8) or 16 (uint16) fraction bits a pass, summed exactly, rounded half up.
        bits = 8 if image.dtype == np.uint8 else 16
        kernel = gaussian_kernel_fixed(size, sigma, bits)
        padded, height, width = _windows(image.astype(np.int64), size, "reflect")
        rows = sum(padded[:, j:j + width] * kernel[j] for j in range(size))
        total = sum(rows[i:i + height] * kernel[i] for i in range(size))
        return ((total + (1 << (2 * bits - 1))) >> (2 * bits)).astype(image.dtype)
    # Float images filter in their own precision (OpenCV's kernel is float32 for float32 images, double for double).
    small = sigma <= 0 and size in _SMALL_GAUSSIAN
    weights = (gaussian_kernel_256(size) / 256.0 if small else _float_gaussian(size, sigma)).astype(image.dtype)
    padded, height, width = _windows(image, size, "reflect")
    rows = sum(padded[:, j:j + width] * weights[j] for j in range(size))
    return sum(rows[i:i + height] * weights[i] for i in range(size)).astype(image.dtype)


def median_blur(image: np.ndarray, size: int) -> np.ndarray:
    """``cv2.medianBlur(image, size)`` for an odd ``size``: the window median, edge pixels repeated at borders."""
    padded, height, width = _windows(image, size, "edge")
    stack = np.stack([padded[i:i + height, j:j + width] for i in range(size) for j in range(size)])
    return np.partition(stack, size * size // 2, axis=0)[size * size // 2]


def advanced_kernel(size: int, sigma_x: float, sigma_y: float, angle: float, beta: float,
                    noise: np.ndarray) -> np.ndarray:
    """AdvancedBlur's float32 kernel: a generalized Gaussian ``exp(-0.5 * (p^T S^-1 p) ** beta)`` over the ``size x
    size`` grid of offsets ``p`` (x across, y down), with ``S`` the covariance of sigmas ``(sigma_x, sigma_y)``
    rotated by ``angle`` radians, multiplied by ``noise`` (``size x size``) and normalised to sum to 1."""
    offsets = np.arange(size, dtype=np.float64) - size // 2
    grid_x, grid_y = np.meshgrid(offsets, offsets)
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    covariance = rotation @ np.diag([sigma_x ** 2, sigma_y ** 2]) @ rotation.T
    inverse = np.linalg.inv(covariance)
    quadratic = inverse[0, 0] * grid_x ** 2 + (inverse[0, 1] + inverse[1, 0]) * grid_x * grid_y \
        + inverse[1, 1] * grid_y ** 2
    kernel = np.exp(-0.5 * np.power(quadratic, beta)) * noise
    return kernel.astype(np.float32) / np.float32(kernel.sum())


# cv2.filter2D correlates kernels of at least this many taps through a DFT (computed in double precision for all
# but uint8 images): 130 for uint8 and float32 images (OpenCV's threshold on SSE3 machines), 50 for the others.
_DFT_TAPS = {np.dtype(np.uint8): 130, np.dtype(np.float32): 130}


def filter2d(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``cv2.filter2D(image, -1, kernel)`` for a float32 ``kernel``: a correlation (the kernel is not flipped) anchored
    at ``kernel.shape // 2``, borders mirrored without repeating the edge pixel, integer results rounded to the
    nearest (half to even) and saturated.

    The sums follow OpenCV's two paths. Small kernels go tap by tap over the non-zero taps (row by row), each step a
    float32 fused multiply-add (one rounding, as OpenCV's AVX2 loop); large ones (see ``_DFT_TAPS``), which OpenCV
    correlates through a DFT, and float64 images are summed in double precision. Checked against OpenCV 4.11: uint8,
    uint16 and float32 results are equal (uint8 ones through a float32 DFT may rarely differ by a level), float64
    ones differ in the last bit (OpenCV fuses its double multiply-adds, or goes through a DFT).
    """
    rows, cols = kernel.shape
    top, left = rows // 2, cols // 2
    pad = [(top, rows - 1 - top), (left, cols - 1 - left)] + [(0, 0)] * (image.ndim - 2)
    height, width = image.shape[:2]
    taps = [(i, j, float(np.float32(kernel[i, j]))) for i, j in zip(*np.nonzero(kernel))]
    direct = image.dtype != np.float64 and kernel.size < _DFT_TAPS.get(np.dtype(image.dtype), 50)
    # Direct sums read float32 pixels; widening them and the float32 weights to double makes each product exact, so
    # one rounding of product plus running sum to float32 is the fused multiply-add.
    padded = np.pad(image.astype(np.float32) if direct else image, pad, mode="reflect").astype(np.float64)
    total = np.zeros(image.shape, dtype=np.float64)
    for i, j, weight in taps:
        total = total + padded[i:i + height, j:j + width] * weight
        if direct:
            total = total.astype(np.float32).astype(np.float64)
    return round_to(total.astype(np.float32) if direct else total, image.dtype)


def _int_range(value: int | Sequence[int], low: int, op: str) -> tuple[int, int]:
    limits = to_range(value, "blur_limit", op, low=low)
    if not all(float(v).is_integer() for v in limits) or limits[0] > limits[1]:
        raise ValueError(f"{op} blur_limit must be an int or a pair (low, high) of ints, got {value!r}.")
    return int(limits[0]), int(limits[1])


def _float_range(value: float | Sequence[float], name: str, op: str, low: float | None = 0.0,
                 minimum: float | None = 0.0) -> tuple[float, float]:
    """``to_range`` plus albumentations' check that ``minimum <= low <= high`` (None: no minimum)."""
    limits = to_range(value, name, op, low=low)
    if limits[0] > limits[1] or (minimum is not None and limits[0] < minimum):
        bound = "" if minimum is None else f" with {minimum} <= low"
        raise ValueError(f"{op} {name} must be a number or a pair (low, high){bound} and low <= high, got "
                         f"{value!r} (read as {limits}).")
    return limits


class _RandomKernel(UnivariateOp):
    """A random kernel per sample, applied by :meth:`filter` to images of a dtype in ``dtypes``."""

    is_random = True
    dtypes: tuple[type, ...] = FILTER_DTYPES

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        check_dtype(data, self.dtypes, type(self).__name__, self.inputs)
        if data.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__} needs (height, width[, channels]) images; {self.inputs} has "
                             f"shape {data.shape}.")
        return self.filter(data, params)

    def filter(self, data: np.ndarray, params: Any) -> np.ndarray:
        """Filter one image with the drawn ``params`` (a kernel size, or what the subclass draws)."""
        raise NotImplementedError


class Blur(_RandomKernel):
    """Blur images with a box (mean) filter of a random odd size from ``blur_limit``, or (``advanced=True``) with
    albumentations' AdvancedBlur kernel.

    The size is uniform over the odd numbers from ``blur_limit[0]`` to ``blur_limit[1]``; a single number ``v``
    means ``(3, v)``, as albumentations reads it. uint8 and uint16 means are rounded to the nearest integer.

    With ``advanced=True`` each sample draws, in this order, the size, ``sigma_x`` from ``sigmaX_limit``,
    ``sigma_y`` from ``sigmaY_limit``, an angle in degrees from ``rotate_limit``, ``beta`` (with probability 1/2
    from ``(beta_limit[0], 1)``, else from ``(1, beta_limit[1])``, so narrow and wide kernels are equally likely)
    and a ``size x size`` matrix of noise factors from ``noise_limit``; the kernel is
    ``exp(-0.5 * (p^T S^-1 p) ** beta) * noise`` over the grid offsets ``p``, normalised to sum to 1, where ``S``
    is the covariance ``diag(sigma_x^2, sigma_y^2)`` rotated by the angle. It is applied as ``cv2.filter2D``
    (correlation, mirrored border, integers rounded to nearest); float sums are in double precision, so integer
    results may differ from OpenCV's by one where a sum lies within float32 rounding of a half.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The kernel size range, ``low`` odd and at least 3.
        advanced: Whether to blur with the AdvancedBlur kernel; the arguments below are used only when True.
        sigmaX_limit: The range of the horizontal sigma, ``0 <= low <= high`` (a number ``v`` means ``(0, v)``).
        sigmaY_limit: The range of the vertical sigma, as ``sigmaX_limit``; the two lows may not both be 0.
        rotate_limit: The range of the kernel's rotation in degrees (a number ``v`` means ``(-v, v)``).
        beta_limit: The range of the shape parameter: below 1 heavier tails than a Gaussian, above 1 lighter; it
            must hold 1 strictly inside (a number ``v`` means ``(0, v)``).
        noise_limit: The range of the multiplicative noise of each kernel element, ``0 <= low <= high`` (a number
            ``v`` means ``(0, v)``).

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of ints with an odd ``low >= 3`` (albumentations would
            also run even sizes; fe_ray refuses them); with ``advanced=True``, if a range is malformed, a sigma or
            noise range goes below 0, both sigma ranges start at 0 or ``beta_limit`` does not hold 1 strictly
            inside; when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is not uint8, uint16, float32 or float64.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blur_limit: int | Sequence[int] = 7, advanced: bool = False,
                 sigmaX_limit: float | Sequence[float] = (0.2, 1.0),  # noqa: N803 (FastEstimator's name)
                 sigmaY_limit: float | Sequence[float] = (0.2, 1.0),  # noqa: N803 (FastEstimator's name)
                 rotate_limit: float | Sequence[float] = 90,
                 beta_limit: float | Sequence[float] = (0.5, 8.0),
                 noise_limit: float | Sequence[float] = (0.9, 1.1)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.blur_limit = _int_range(blur_limit, 3, "Blur")
        if self.blur_limit[0] < 3 or self.blur_limit[0] % 2 != 1:
            raise ValueError(f"Blur blur_limit must start at an odd size >= 3, got {blur_limit!r} (read as "
                             f"{self.blur_limit}).")
        self.advanced = bool(advanced)
        if self.advanced:
            self.sigmaX_limit = _float_range(sigmaX_limit, "sigmaX_limit", "Blur")
            self.sigmaY_limit = _float_range(sigmaY_limit, "sigmaY_limit", "Blur")
            if self.sigmaX_limit[0] == 0 and self.sigmaY_limit[0] == 0:
                raise ValueError(f"Blur sigmaX_limit and sigmaY_limit may not both start at 0 (a zero sigma on both "
                                 f"axes has no kernel), got {sigmaX_limit!r} and {sigmaY_limit!r}.")
            self.rotate_limit = _float_range(rotate_limit, "rotate_limit", "Blur", low=None, minimum=None)
            self.beta_limit = _float_range(beta_limit, "beta_limit", "Blur")
            if not self.beta_limit[0] < 1.0 < self.beta_limit[1]:
                raise ValueError(f"Blur beta_limit must hold 1.0 strictly inside, e.g. (0.5, 8.0); got "
                                 f"{beta_limit!r} (read as {self.beta_limit}).")
            self.noise_limit = _float_range(noise_limit, "noise_limit", "Blur")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int | np.ndarray:
        rng = get_rng(state)
        sizes = np.arange(self.blur_limit[0], self.blur_limit[1] + 1, 2)
        size = int(sizes[rng.integers(len(sizes))])
        if not self.advanced:
            return size
        sigma_x = float(rng.uniform(*self.sigmaX_limit))
        sigma_y = float(rng.uniform(*self.sigmaY_limit))
        angle = float(np.deg2rad(rng.uniform(*self.rotate_limit)))
        if rng.random() < 0.5:
            beta = float(rng.uniform(self.beta_limit[0], 1.0))
        else:
            beta = float(rng.uniform(1.0, self.beta_limit[1]))
        noise = rng.uniform(self.noise_limit[0], self.noise_limit[1], size=(size, size))
        return advanced_kernel(size, sigma_x, sigma_y, angle, beta, noise)

    def filter(self, data: np.ndarray, params: int | np.ndarray) -> np.ndarray:
        if isinstance(params, np.ndarray):
            return filter2d(data, params)
        return box_blur(data, params)


class GaussianBlur(_RandomKernel):
    """Blur images with a Gaussian filter of a random odd size from ``blur_limit`` and a random sigma from
    ``sigma_limit``.

    The size is drawn as albumentations does: uniform over ``blur_limit[0] .. blur_limit[1]`` with an even draw
    moved up by one; a number ``v`` means ``(0, v)``, and a range starting at 0 while ``sigma_limit`` also starts
    at 0 starts at 3 instead, so the default ``3`` always gives size 3 and ``7`` gives 3, 5 and 7 with
    probabilities 1/5, 2/5 and 2/5. Sigma is uniform over ``sigma_limit`` (a number ``v`` means ``(0, v)``); a
    sigma of 0 means OpenCV's default for the size, ``0.3 * ((size - 1) / 2 - 1) + 0.8``, and a size of 0 (possible
    only when ``sigma_limit`` starts above 0) means OpenCV's size for the sigma,
    ``round(sigma * 2 * (3 for uint8, else 4) + 1) | 1``. uint8 and uint16 images use OpenCV's 8- and 16-bit
    fixed-point kernels, so their results equal OpenCV's.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The kernel size range: a number ``v`` means ``(0, v)``; sizes are 0 or odd.
        sigma_limit: The sigma range, ``0 <= low <= high``.

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of ints whose ends are 0 or odd, or ``sigma_limit``
            is not a number or a pair with ``0 <= low <= high``; when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is not uint8, uint16, float32 or float64.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blur_limit: int | Sequence[int] = 3, sigma_limit: float | Sequence[float] = 0.0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.sigma_limit = _float_range(sigma_limit, "sigma_limit", "GaussianBlur")
        low, high = _int_range(blur_limit, 0, "GaussianBlur")
        if low == 0 and self.sigma_limit[0] == 0:
            low, high = 3, max(3, high)  # albumentations' rule when neither the size nor sigma has a minimum
        if low < 0 or (low != 0 and low % 2 != 1) or (high != 0 and high % 2 != 1):
            raise ValueError(f"GaussianBlur blur_limit must hold 0 or odd sizes >= 3 (0: size from sigma, allowed "
                             f"when sigma_limit starts above 0), got {blur_limit!r} (read as {(low, high)}).")
        self.blur_limit = (low, high)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[int, float]:
        low, high = self.blur_limit
        rng = get_rng(state)
        size = int(rng.integers(low, high + 1))
        if size != 0 and size % 2 == 0:
            size += 1
        # The default (0, 0) sigma range draws nothing, so the size draws stay those of a plain size-only op.
        sigma = float(rng.uniform(*self.sigma_limit)) if self.sigma_limit[1] > 0 else 0.0
        return size, sigma

    def filter(self, data: np.ndarray, params: tuple[int, float]) -> np.ndarray:
        size, sigma = params
        return gaussian_blur(data, size, sigma)


class MedianBlur(_RandomKernel):
    """Replace each pixel by the median of a window of a random odd size from ``blur_limit``.

    The size is uniform over the odd numbers from ``blur_limit[0]`` to ``blur_limit[1]``; a single number ``v``
    means ``(3, v)``. uint16 and float32 images take sizes 3 and 5 only, as OpenCV (which has no float64 median).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The window size range, odd sizes >= 3.

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of odd ints >= 3; when running, if an image is not
            2-D or 3-D, or a uint16 or float32 image meets a size above 5.
        TypeError: When running, if an image is not uint8, uint16 or float32.
    """

    dtypes = (np.uint8, np.uint16, np.float32)

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
        if data.dtype != np.uint8 and size > 5:
            raise ValueError(f"MedianBlur filters {data.dtype} images with sizes 3 and 5 only (as OpenCV), but drew "
                             f"{size} for {self.inputs}: lower blur_limit to (3, 5) or convert to uint8.")
        return median_blur(data, size)
