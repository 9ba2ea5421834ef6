"""ShearX, ShearY, TranslateX, TranslateY and RUA's Rotate: random affine warps with Pillow's arithmetic.

FastEstimator implements these with Pillow's ``Image.transform`` (bicubic, black fill; the shears then
``Image.resize`` back to the input size) and ``Image.rotate`` (nearest neighbour); the numpy code in
:mod:`fe_ray.op.numpyop.univariate._pillow` repeats that arithmetic, so a given factor gives Pillow's image without
needing Pillow. Each op draws one factor per sample (shared by all its inputs) from the sample's generator: in a
Pipeline the draws are exact across resumes and worker threads. Each has ``set_rua_level`` for :class:`RUA`.

Images are uint8 grayscale ``(height, width)`` or RGB ``(height, width, 3)``, or grayscale float32 / float64
(Pillow's ``F`` mode: warped in double precision, returned as float32, not clipped), int32 (mode ``I``) or bool (mode
``1``: always nearest neighbour); RUA's Rotate also takes uint16 (Pillow's bicubic warp misreads uint16 images, so
the others refuse them). fe_ray also takes ``(height, width, 1)``. Unlike FastEstimator, RGBA images are rejected:
Pillow warps them in premultiplied alpha, which is not repeated here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import Range, check_dtype, shrink_range, symmetric_range
from fe_ray.op.numpyop.univariate._pillow import resize_axis, rotate, transform
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


class _RandomWarp(UnivariateOp):
    """A factor drawn uniformly from ``self.<range_name>`` per sample, applied by :meth:`warp` to each image."""

    is_random = True
    range_name = "limit"
    # The dtypes Pillow warps correctly (its bicubic warp reads uint16 images byte by byte, so those are refused).
    dtypes: tuple[type, ...] = (np.uint8, np.int32, np.float32, np.float64, np.bool_)

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str], ds_id: None | str | Iterable[str],
                 limit: float | Sequence[float]) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        setattr(self, self.range_name, symmetric_range(limit, self.range_name, type(self).__name__))

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Narrow the factor's range around its middle to ``magnitude_coef`` (in [0, 1]) of its width, as RUA asks."""
        setattr(self, self.range_name, shrink_range(getattr(self, self.range_name), magnitude_coef))

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> float:
        low, high = getattr(self, self.range_name)
        return float(get_rng(state).uniform(low, high))

    def apply(self, data: np.ndarray, params: float) -> np.ndarray:
        name = type(self).__name__
        check_dtype(data, self.dtypes, name, self.inputs)
        if not (data.ndim == 2 or (data.ndim == 3 and data.shape[-1] in (1, 3))):
            raise ValueError(f"{name} needs a grayscale (height, width[, 1]) or RGB (height, width, 3) image; "
                             f"{self.inputs} has shape {data.shape} (RGBA is not supported: drop the alpha channel "
                             "first).")
        if data.dtype != np.uint8:
            # Pillow (which FastEstimator hands the array to) makes float and bool arrays one-band images only.
            if data.ndim == 3 and data.shape[-1] != 1:
                raise TypeError(f"{name} takes {data.dtype} images in grayscale only, but {self.inputs} has shape "
                                f"{data.shape}; convert an RGB image to uint8 first (e.g. (image * 255).astype("
                                "np.uint8) for floats in [0, 1]).")
            if data.dtype == np.float64:
                data = data.astype(np.float32)  # Pillow's F mode holds float32, as FastEstimator returns
        return self.warp(data, params)

    def warp(self, data: np.ndarray, factor: float) -> np.ndarray:
        """Transform one image by ``factor``."""
        raise NotImplementedError


class ShearX(_RandomWarp):
    """Shear images horizontally by a random coefficient ``s = uniform(shear_coef)``.

    Row ``y`` moves by ``-s * y`` pixels on a canvas ``round(|s| * width)`` wider (bicubic, black fill), which is
    then resized back to the input width (bicubic, antialiased), as FastEstimator does with Pillow.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        shear_coef: Range of ``s``: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``shear_coef`` is not a number or a pair; when running, if an image is not gray or RGB.
        TypeError: When running, if an image is not uint8, int32, float or bool (or is a non-uint8 RGB image).
    """

    range_name = "shear_coef"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 shear_coef: float | Sequence[float] = 0.3) -> None:
        self.shear_coef: Range
        super().__init__(inputs, outputs, mode, ds_id, shear_coef)

    def warp(self, data: np.ndarray, factor: float) -> np.ndarray:
        height, width = data.shape[:2]
        shift = round(abs(factor) * width)  # Python's round (half to even), as FastEstimator
        matrix = (1.0, factor, -shift if factor > 0 else 0.0, 0.0, 1.0, 0.0)
        return resize_axis(transform(data, (width + shift, height), matrix), width, axis=1)


class ShearY(_RandomWarp):
    """Shear images vertically by a random coefficient ``s = uniform(shear_coef)``.

    Column ``x`` moves by ``-s * x`` pixels on a canvas ``round(|s| * height)`` taller (bicubic, black fill), which
    is then resized back to the input height (bicubic, antialiased), as FastEstimator does with Pillow.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        shear_coef: Range of ``s``: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``shear_coef`` is not a number or a pair; when running, if an image is not gray or RGB.
        TypeError: When running, if an image is not uint8, int32, float or bool (or is a non-uint8 RGB image).
    """

    range_name = "shear_coef"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 shear_coef: float | Sequence[float] = 0.3) -> None:
        self.shear_coef: Range
        super().__init__(inputs, outputs, mode, ds_id, shear_coef)

    def warp(self, data: np.ndarray, factor: float) -> np.ndarray:
        height, width = data.shape[:2]
        shift = round(abs(factor) * height)
        matrix = (1.0, 0.0, 0.0, factor, 1.0, -shift if factor > 0 else 0.0)
        return resize_axis(transform(data, (width, height + shift), matrix), height, axis=0)


class TranslateX(_RandomWarp):
    """Shift images horizontally by a random fraction ``t = uniform(shift_limit)`` of their width.

    The content moves left by ``t * width`` pixels (right for negative ``t``), sampled bicubically; uncovered
    pixels are black, as FastEstimator's Pillow transform gives them.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        shift_limit: Range of ``t``: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``shift_limit`` is not a number or a pair; when running, if an image is not gray or RGB.
        TypeError: When running, if an image is not uint8, int32, float or bool (or is a non-uint8 RGB image).
    """

    range_name = "shift_limit"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 shift_limit: float | Sequence[float] = 0.2) -> None:
        self.shift_limit: Range
        super().__init__(inputs, outputs, mode, ds_id, shift_limit)

    def warp(self, data: np.ndarray, factor: float) -> np.ndarray:
        height, width = data.shape[:2]
        return transform(data, (width, height), (1.0, 0.0, factor * width, 0.0, 1.0, 0.0))


class TranslateY(_RandomWarp):
    """Shift images vertically by a random fraction ``t = uniform(shift_limit)`` of their height.

    The content moves up by ``t * height`` pixels (down for negative ``t``), sampled bicubically; uncovered pixels
    are black, as FastEstimator's Pillow transform gives them.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        shift_limit: Range of ``t``: a number ``v`` means ``(-v, v)``, or a pair ``(low, high)``.

    Raises:
        ValueError: If ``shift_limit`` is not a number or a pair; when running, if an image is not gray or RGB.
        TypeError: When running, if an image is not uint8, int32, float or bool (or is a non-uint8 RGB image).
    """

    range_name = "shift_limit"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 shift_limit: float | Sequence[float] = 0.2) -> None:
        self.shift_limit: Range
        super().__init__(inputs, outputs, mode, ds_id, shift_limit)

    def warp(self, data: np.ndarray, factor: float) -> np.ndarray:
        height, width = data.shape[:2]
        return transform(data, (width, height), (1.0, 0.0, 0.0, 0.0, 1.0, factor * height))


class Rotate(_RandomWarp):
    """Rotate images counter-clockwise about their centre by a random angle ``uniform(limit)`` in degrees.

    Nearest-neighbour sampling, same size, black corners, as Pillow's ``Image.rotate`` (which FastEstimator's
    ``fe.op.numpyop.univariate.rua.Rotate`` uses). This is RUA's Rotate; the multivariate
    :class:`fe_ray.op.numpyop.multivariate.Rotate` (albumentations') also moves masks and boxes.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        limit: Range of the angle: a number ``v`` means ``(-v, v)`` (FastEstimator's docstring says
            ``(0, v)``, but its code, followed here, uses ``(-v, v)``), or a pair ``(low, high)``.

    Raises:
        ValueError: If ``limit`` is not a number or a pair; when running, if an image is not gray or RGB.
        TypeError: When running, if an image is not uint8, uint16, int32, float or bool (or is a non-uint8 RGB
            image).
    """

    dtypes = (*_RandomWarp.dtypes, np.uint16)  # nearest neighbour copies uint16 values as they are

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 limit: float | Sequence[float] = 30) -> None:
        self.limit: Range
        super().__init__(inputs, outputs, mode, ds_id, limit)

    def warp(self, data: np.ndarray, factor: float) -> np.ndarray:
        return rotate(data, factor)
