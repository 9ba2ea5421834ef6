"""Brightness, Contrast, Color and Sharpness: random enhancement factors with Pillow's ``ImageEnhance`` arithmetic.

FastEstimator implements these four with Pillow (``ImageEnhance.Brightness`` / ``Contrast`` / ``Color`` /
``Sharpness``), not albumentations. All blend the image with a "degenerate" image by a factor ``f``: Pillow
computes, per uint8 value, ``degenerate + f * (image - degenerate)`` in single precision and truncates it into
[0, 255]. The numpy code here repeats that arithmetic (see :mod:`fe_ray.op.numpyop.univariate._pillow` for the
degenerate images), so the results equal Pillow's, without needing Pillow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, shrink_range, symmetric_range
from fe_ray.op.numpyop.univariate._pillow import luminance, smooth
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


def blend_uint8(degenerate: np.ndarray | float, image: np.ndarray, factor: float) -> np.ndarray:
    """Pillow's ``Image.blend(degenerate, image, factor)`` on uint8 values: float32 arithmetic, truncated, clipped."""
    low = np.asarray(degenerate, dtype=np.int32)
    mixed = low.astype(np.float32) + np.float32(factor) * (image.astype(np.int32) - low).astype(np.float32)
    return np.clip(mixed, 0, 255).astype(np.uint8)


class _Enhance(UnivariateOp):
    """A random factor ``1 + uniform(limit)`` per sample, applied to uint8 images with Pillow's blend."""

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 limit: float | Sequence[float] = 0.54) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.limit = symmetric_range(limit, "limit", type(self).__name__)

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Narrow ``limit`` around its middle to ``magnitude_coef`` (in [0, 1]) of its width, as RUA asks."""
        self.limit = shrink_range(self.limit, magnitude_coef)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        return 1.0 + float(get_rng(state).uniform(self.limit[0], self.limit[1]))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        check_dtype(data, (np.uint8,), type(self).__name__, self.inputs)
        if not (data.ndim == 2 or (data.ndim == 3 and data.shape[-1] in (1, 3, 4))):
            raise ValueError(f"{type(self).__name__} needs a grayscale (height, width[, 1]), RGB or RGBA image; "
                             f"{self.inputs} has shape {data.shape}.")
        degenerate = self.degenerate(data)
        if data.ndim == 3 and data.shape[-1] == 4:
            # Pillow keeps the alpha channel: the degenerate image carries the image's own alpha.
            degenerate = np.broadcast_to(degenerate, data.shape).copy()
            degenerate[..., 3] = data[..., 3]
        return blend_uint8(degenerate, data, params)

    def degenerate(self, data: np.ndarray) -> np.ndarray | float:
        """The image that factor 0 gives."""
        raise NotImplementedError


class Brightness(_Enhance):
    """Scale the brightness of uint8 images by a random factor ``1 + uniform(limit)``.

    Factor 0 gives a black image, 1 the original; values are truncated into [0, 255] as Pillow's
    ``ImageEnhance.Brightness`` (which FastEstimator uses) does. Several inputs get the same factor.

    Random: in a Pipeline the factor is drawn from the sample's generator (exact across resumes and worker threads).
    fe_ray also takes ``(height, width, 1)`` images, which Pillow (so FastEstimator) rejects.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        limit: Range of the factor's offset from 1: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``limit`` is not a number or a pair; when running, if an image is not grayscale, RGB or
            RGBA.
        TypeError: When running, if an image is not uint8.
    """

    def degenerate(self, data: np.ndarray) -> np.ndarray | float:
        return 0.0


class Contrast(_Enhance):
    """Scale the contrast of uint8 images by a random factor ``1 + uniform(limit)`` around their mean gray level.

    Every value moves toward (factor < 1) or away from (factor > 1) the image's mean luminance, rounded to an
    integer; luminance is Pillow's ``L`` conversion, ``(19595 R + 38470 G + 7471 B + 32768) >> 16``. Factor 0
    gives a uniform gray image, 1 the original, as Pillow's ``ImageEnhance.Contrast`` (which FastEstimator uses).
    Several inputs get the same factor, each around its own mean.

    Random: in a Pipeline the factor is drawn from the sample's generator (exact across resumes and worker threads).
    fe_ray also takes ``(height, width, 1)`` images, which Pillow (so FastEstimator) rejects.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        limit: Range of the factor's offset from 1: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``limit`` is not a number or a pair; when running, if an image is not grayscale, RGB or
            RGBA.
        TypeError: When running, if an image is not uint8.
    """

    def degenerate(self, data: np.ndarray) -> np.ndarray | float:
        gray = data.astype(np.int64) if data.ndim == 2 or data.shape[-1] == 1 else luminance(data[..., :3])
        # Pillow rounds the mean half up to an integer gray level.
        return float(int(gray.sum() / gray.size + 0.5))


class Color(_Enhance):
    """Scale the color saturation of uint8 images by a random factor ``1 + uniform(limit)``.

    Every pixel moves toward (factor < 1) or away from (factor > 1) its own gray level, Pillow's ``L`` conversion
    ``(19595 R + 38470 G + 7471 B + 32768) >> 16``; factor 0 gives a gray image, 1 the original, as Pillow's
    ``ImageEnhance.Color`` (which FastEstimator uses). Grayscale images are returned unchanged. Several inputs get
    the same factor.

    Random: in a Pipeline the factor is drawn from the sample's generator (exact across resumes and worker threads).
    fe_ray also takes ``(height, width, 1)`` images, which Pillow (so FastEstimator) rejects.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        limit: Range of the factor's offset from 1: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``limit`` is not a number or a pair; when running, if an image is not grayscale, RGB or
            RGBA.
        TypeError: When running, if an image is not uint8.
    """

    def degenerate(self, data: np.ndarray) -> np.ndarray | float:
        if data.ndim == 2 or data.shape[-1] == 1:
            return data
        return np.repeat(luminance(data[..., :3])[..., None], data.shape[-1], axis=-1)


class Sharpness(_Enhance):
    """Sharpen or blur uint8 images by a random factor ``1 + uniform(limit)``.

    The image is blended with its smoothed version (Pillow's ``ImageFilter.SMOOTH``: a 3x3 kernel with centre 5
    and others 1, over 13; the outermost pixels are kept): factor 0 gives the smoothed image, 1 the original, 2 a
    sharpened one, as Pillow's ``ImageEnhance.Sharpness`` (which FastEstimator uses). Several inputs get the same
    factor.

    Random: in a Pipeline the factor is drawn from the sample's generator (exact across resumes and worker threads).
    fe_ray also takes ``(height, width, 1)`` images, which Pillow (so FastEstimator) rejects.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        limit: Range of the factor's offset from 1: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``limit`` is not a number or a pair; when running, if an image is not grayscale, RGB or
            RGBA.
        TypeError: When running, if an image is not uint8.
    """

    def degenerate(self, data: np.ndarray) -> np.ndarray | float:
        return smooth(data)
