"""Non-rigid warps of an image and its masks: ElasticTransform, GridDistortion and OpticalDistortion (random ops).

Each op draws one source-coordinate map per sample and samples the image (nearest or bilinear) and the masks
(nearest, so labels stay labels) at it with an OpenCV border, through the shared ``warp``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.border import BORDER_REFLECT_101, FillValue, check_border_mode
from fe_ray.op.numpyop.multivariate.interpolation import (
    INTER_LINEAR,
    INTER_NEAREST,
    Coords,
    check_interpolation,
    sample,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_range, check_size
from fe_ray.op.numpyop.randomness import get_rng

_APPROX_KERNEL = 17  # albumentations' approximate mode blurs with a fixed 17x17 kernel


def _check_number(value: Any, name: str, op: str, minimum: float | None = None) -> float:
    if not isinstance(value, (int, float, np.number)) or isinstance(value, bool) or \
            (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum:g}"
        raise ValueError(f"{op} {name} must be a number{bound}, got {value!r}.")
    return float(value)


def gaussian_blur_17(field: np.ndarray, sigma: float) -> np.ndarray:
    """``cv2.GaussianBlur(field, (17, 17), sigma)``: a separable 17-tap Gaussian with a reflect-101 border.

    A ``sigma`` of 0 takes the width OpenCV derives from the kernel size.
    """
    if sigma <= 0:
        sigma = 0.3 * ((_APPROX_KERNEL - 1) * 0.5 - 1) + 0.8
    half = _APPROX_KERNEL // 2
    taps = np.exp(-np.arange(-half, half + 1) ** 2 / (2.0 * sigma ** 2))
    taps /= taps.sum()
    padded = np.pad(field, half, mode="reflect")  # numpy's "reflect" is OpenCV's BORDER_REFLECT_101
    rows = sum(tap * padded[k:k + field.shape[0]] for k, tap in enumerate(taps))
    return sum(tap * rows[:, k:k + field.shape[1]] for k, tap in enumerate(taps))


class _Warp(MultiVariateOp):
    """The shared part of the distortions: a drawn map, the image interpolated, masks nearest, one border."""

    is_random = True

    def __init__(self, interpolation: int, border_mode: int, value: FillValue, mask_value: FillValue,
                 **keys: Any) -> None:
        super().__init__(**keys)
        name = type(self).__name__
        self.interpolation = check_interpolation(interpolation, name)
        self.border_mode = check_border_mode(border_mode, name)
        self.value, self.mask_value = value, mask_value

    def apply(self, image: np.ndarray, params: Coords) -> np.ndarray:
        return sample(image, params, self.interpolation, self.border_mode, self.value)

    def apply_to_mask(self, mask: np.ndarray, params: Coords) -> np.ndarray:
        return sample(mask, params, INTER_NEAREST, self.border_mode, self.mask_value)


class ElasticTransform(_Warp):
    """Warp the image and masks with a random affine map followed by a smooth random displacement field.

    Per sample, as albumentations (which FastEstimator 1.7 wraps): three anchor points about the centre move by
    amounts drawn from ``[-alpha_affine, alpha_affine]``, defining an affine map; then two fields of uniform noise in
    ``[-1, 1)`` (one when ``same_dxdy``) are smoothed by a Gaussian of width ``sigma`` and scaled by ``alpha`` to
    give each output pixel's displacement. ``approximate`` smooths with OpenCV's fixed 17x17 kernel instead of the
    full Gaussian (scipy's ``gaussian_filter``, reflect border). Masks are sampled with nearest neighbour. Random: all
    draws come from the sample's generator (see :mod:`fe_ray.op.numpyop.randomness`).

    Differences from albumentations: the affine map and the displacement are composed and sampled once, where
    albumentations resamples twice (an affine warp, then a remap), so bilinear results are a little sharper; images
    smaller than 3 pixels on a side get no affine part (albumentations' anchor points coincide there). OpenCV's
    cubic, area and Lanczos interpolations are not available.

    Args:
        alpha: The scale of the displacement field, in pixels.
        sigma: The width of the Gaussian smoothing the field (larger: smoother, more like a translation).
        alpha_affine: The range ``[-alpha_affine, alpha_affine]`` of the anchor-point moves, in pixels.
        interpolation: The image's interpolation, an OpenCV flag: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR``.
        border_mode: How to fill pixels mapped from outside, an OpenCV flag (0 ``BORDER_CONSTANT``, 1
            ``BORDER_REPLICATE``, 2 ``BORDER_REFLECT``, 3 ``BORDER_WRAP``, 4 ``BORDER_REFLECT_101``, the default).
        value: The image's fill for a constant border (None: 0); a number or one per channel.
        mask_value: The masks' fill for a constant border (None: 0).
        approximate: Whether to smooth with a fixed 17x17 kernel (faster on large images).
        same_dxdy: Whether the x and y displacements share one field (faster).
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`.

    Raises:
        ValueError: If ``alpha`` is not a number, ``sigma`` or ``alpha_affine`` is not a number >= 0, or
            ``interpolation`` / ``border_mode`` is not a supported flag.
    """

    def __init__(self, alpha: float = 34.0, sigma: float = 4.0, alpha_affine: float = 50.0,
                 interpolation: int = INTER_LINEAR, border_mode: int = BORDER_REFLECT_101, value: FillValue = None,
                 mask_value: FillValue = None, approximate: bool = False, same_dxdy: bool = False,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 image_out: str | None = None, mask_out: str | None = None, masks_out: str | None = None) -> None:
        super().__init__(interpolation, border_mode, value, mask_value, mode=mode, ds_id=ds_id, image_in=image_in,
                         mask_in=mask_in, masks_in=masks_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out)
        self.alpha = _check_number(alpha, "alpha", "ElasticTransform")
        self.sigma = _check_number(sigma, "sigma", "ElasticTransform", minimum=0.0)
        self.alpha_affine = _check_number(alpha_affine, "alpha_affine", "ElasticTransform", minimum=0.0)
        self.approximate, self.same_dxdy = bool(approximate), bool(same_dxdy)

    def _field(self, rng: np.random.Generator, height: int, width: int) -> np.ndarray:
        noise = rng.random((height, width)) * 2.0 - 1.0
        if self.approximate:
            return gaussian_blur_17(noise, self.sigma) * self.alpha
        from scipy.ndimage import gaussian_filter  # lazily: only this op needs scipy
        return gaussian_filter(noise, self.sigma) * self.alpha

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords:
        rng = get_rng(state)
        # albumentations' anchors: a square about (height // 2, width // 2) that OpenCV reads as (x, y) points.
        centre = np.array([height // 2, width // 2], dtype=np.float64)
        half = min(height, width) // 3
        anchors = np.array([centre + half, [centre[0] + half, centre[1] - half], centre - half])
        moved = anchors + rng.uniform(-self.alpha_affine, self.alpha_affine, size=anchors.shape)
        dx = self._field(rng, height, width)
        dy = dx if self.same_dxdy else self._field(rng, height, width)
        rows, cols = np.mgrid[0:height, 0:width].astype(np.float64)
        x, y = cols + dx, rows + dy  # where the displacement samples the affinely warped image
        if half > 0:
            # The inverse of the affine map (moved anchors back to the originals) takes those points to the input.
            ones = np.ones((3, 1))
            inverse = np.linalg.lstsq(np.hstack([moved, ones]), anchors, rcond=None)[0].T
            x, y = (inverse[0, 0] * x + inverse[0, 1] * y + inverse[0, 2],
                    inverse[1, 0] * x + inverse[1, 1] * y + inverse[1, 2])
        return y, x


class GridDistortion(_Warp):
    """Stretch and squeeze the image and masks cell by cell along a ``num_steps`` x ``num_steps`` grid.

    The width is cut into ``num_steps`` cells of ``width // num_steps`` pixels; per sample each cell draws a stretch
    ``1 + d`` with ``d`` from ``distort_limit`` (the ``num_steps + 1`` x factors, then the y ones, as albumentations
    draws them; the last factor is unused, as there), and neighbouring output pixels in that cell read input pixels
    that far apart. The ``width % num_steps`` leftover pixels, if any, read evenly from where the cells end up to
    the image edge. Rows work alike. Masks are sampled with nearest neighbour. Random:
    the draws come from the sample's generator (see :mod:`fe_ray.op.numpyop.randomness`).

    Differences from albumentations 1.3/1.4 (which FastEstimator 1.7 wraps): albumentations spaces a cell's samples
    from its start to its end inclusive, so even a zero distortion stretches every cell by a pixel; fe_ray excludes
    the end, so ``distort_limit=0`` returns the input. The leftover pixels always run to the image edge
    (albumentations leaves pixels past ``(num_steps + 1) * (width // num_steps)`` reading column 0). So a side
    shorter than ``num_steps`` (no whole cell) is kept as it is, where albumentations makes every pixel of it read
    the first column (or row). OpenCV's cubic, area and Lanczos interpolations are not available.

    Args:
        num_steps: The number of grid cells along each side.
        distort_limit: The range of ``d``: a number ``a`` for ``[-a, a]``, or ``(low, high)``.
        interpolation: The image's interpolation, an OpenCV flag: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR``.
        border_mode: How to fill pixels mapped from outside, an OpenCV flag (0 to 4; 4 ``BORDER_REFLECT_101`` is the
            default).
        value: The image's fill for a constant border (None: 0); a number or one per channel.
        mask_value: The masks' fill for a constant border (None: 0).
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`.

    Raises:
        ValueError: If ``num_steps`` is not a positive int, ``distort_limit`` is not a number or an ordered pair,
            or ``interpolation`` / ``border_mode`` is not a supported flag.
    """

    def __init__(self, num_steps: int = 5, distort_limit: float | Sequence[float] = 0.3,
                 interpolation: int = INTER_LINEAR, border_mode: int = BORDER_REFLECT_101, value: FillValue = None,
                 mask_value: FillValue = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, image_out: str | None = None, mask_out: str | None = None,
                 masks_out: str | None = None) -> None:
        super().__init__(interpolation, border_mode, value, mask_value, mode=mode, ds_id=ds_id, image_in=image_in,
                         mask_in=mask_in, masks_in=masks_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out)
        self.num_steps = check_size(num_steps, "num_steps", "GridDistortion")
        self.distort_limit = check_range(distort_limit, "distort_limit", "GridDistortion")

    def _axis(self, size: int, steps: np.ndarray) -> np.ndarray:
        """The source position of every pixel along an axis of ``size`` given the cells' stretch ``steps``."""
        cell = size // self.num_steps
        sources = np.empty(size)
        start = 0.0
        for index in range(self.num_steps):
            # Each output pixel of a cell advances ``step`` input pixels; the cell's end is the next cell's start.
            sources[index * cell:(index + 1) * cell] = start + np.arange(cell) * steps[index]
            start += cell * steps[index]
        rest = size - self.num_steps * cell
        if rest:  # the leftover pixels run evenly from where the cells end to the image edge, as in albumentations
            sources[size - rest:] = start + np.arange(rest) * ((size - start) / rest)
        return sources

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords:
        rng = get_rng(state)
        steps_x = 1.0 + rng.uniform(*self.distort_limit, size=self.num_steps + 1)
        steps_y = 1.0 + rng.uniform(*self.distort_limit, size=self.num_steps + 1)
        cols, rows = np.meshgrid(self._axis(width, steps_x), self._axis(height, steps_y))
        return rows, cols


class OpticalDistortion(_Warp):
    """Barrel or pincushion distortion of the image and masks, as a camera lens with radial distortion ``k``.

    Per sample it draws ``k`` from ``distort_limit`` and integer shifts ``dx`` and ``dy`` of the distortion centre
    (``round`` of draws from ``shift_limit``, in pixels, as albumentations does), then maps every output pixel
    through OpenCV's radial model with coefficients ``k1 = k2 = k``: with ``(x, y)`` the pixel's offset from the
    centre divided by ``(width, height)`` and ``r2 = x**2 + y**2``, it reads the input at the centre plus ``(dx,
    dy)`` plus ``(x, y) * (1 + k * r2 + k * r2**2)`` scaled back. Masks are sampled with nearest neighbour. Random:
    the draws come from the sample's generator (see :mod:`fe_ray.op.numpyop.randomness`).

    Difference from albumentations (which FastEstimator 1.7 wraps): its camera puts the distorted image's centre at
    ``(width / 2, height / 2)`` but the output's at ``((width - 1) / 2, (height - 1) / 2)``, so every result moves
    by half a pixel even with ``k = 0``; fe_ray uses the pixel-grid centre for both, so zero limits return the
    input. OpenCV's cubic, area and Lanczos interpolations are not available.

    Args:
        distort_limit: The range of ``k``: a number ``a`` for ``[-a, a]``, or ``(low, high)``.
        shift_limit: The range of the centre's shift in pixels (rounded): a number ``a`` for ``[-a, a]``, or
            ``(low, high)``.
        interpolation: The image's interpolation, an OpenCV flag: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR``.
        border_mode: How to fill pixels mapped from outside, an OpenCV flag (0 to 4; 4 ``BORDER_REFLECT_101`` is the
            default).
        value: The image's fill for a constant border (None: 0); a number or one per channel.
        mask_value: The masks' fill for a constant border (None: 0).
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`.

    Raises:
        ValueError: If a limit is not a number or an ordered pair, or ``interpolation`` / ``border_mode`` is not a
            supported flag.
    """

    def __init__(self, distort_limit: float | Sequence[float] = 0.05, shift_limit: float | Sequence[float] = 0.05,
                 interpolation: int = INTER_LINEAR, border_mode: int = BORDER_REFLECT_101, value: FillValue = None,
                 mask_value: FillValue = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, image_out: str | None = None, mask_out: str | None = None,
                 masks_out: str | None = None) -> None:
        super().__init__(interpolation, border_mode, value, mask_value, mode=mode, ds_id=ds_id, image_in=image_in,
                         mask_in=mask_in, masks_in=masks_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out)
        self.distort_limit = check_range(distort_limit, "distort_limit", "OpticalDistortion")
        self.shift_limit = check_range(shift_limit, "shift_limit", "OpticalDistortion")

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords:
        rng = get_rng(state)
        k = float(rng.uniform(*self.distort_limit))
        dx, dy = (round(float(rng.uniform(*self.shift_limit))) for _ in range(2))
        centre_x, centre_y = (width - 1) / 2.0, (height - 1) / 2.0
        rows, cols = np.mgrid[0:height, 0:width].astype(np.float64)
        x, y = (cols - centre_x) / width, (rows - centre_y) / height
        r2 = x * x + y * y
        radial = 1.0 + k * r2 + k * r2 * r2
        return height * y * radial + centre_y + dy, width * x * radial + centre_x + dx
