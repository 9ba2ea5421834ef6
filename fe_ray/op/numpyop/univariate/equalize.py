"""Equalize: flatten the histogram of uint8 images, albumentations' way (OpenCV's or Pillow's formula; deterministic).

FastEstimator's ``fe.op.numpyop.univariate.Equalize`` wraps albumentations' (1.3) Equalize: ``eq_mode='cv'`` is
``cv2.equalizeHist`` (level ``i`` maps to ``round(255 * (count of values <= i - count of the darkest) / (count -
count of the darkest))`` in single precision), ``'pil'`` is Pillow's rule; per channel (``by_channels``), or on the
luma of OpenCV's fixed-point YCrCb conversion and back. The numpy code repeats that arithmetic, so the images equal
albumentations'. RUA's Pillow Equalize is :class:`fe_ray.op.numpyop.univariate.rua.Equalize`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.univariate._image import check_dtype
from fe_ray.op.numpyop.univariate._pillow import equalize_table
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

# OpenCV's 14-bit fixed-point RGB <-> YCrCb coefficients for uint8 images.
_TO_Y = (4899, 9617, 1868)
_CR, _CB = 11682, 9241
_R_CR, _G_CB, _G_CR, _B_CB = 22987, -5636, -11698, 29049


def _descale(value: np.ndarray) -> np.ndarray:
    return (value + (1 << 13)) >> 14


def cv_table(hist: np.ndarray, single: bool = True) -> np.ndarray:
    """``cv2.equalizeHist``'s lookup table for one channel's 256-bin histogram.

    ``single``: OpenCV's single-precision scale; albumentations' own masked version (``single=False``) scales in
    double precision.
    """
    present = np.flatnonzero(hist)
    first = int(present[0]) if len(present) else 255
    total = int(hist.sum())
    if hist[first] == total:
        return np.full(256, first, dtype=np.uint8)  # one value (or none): the whole image becomes it
    dtype = np.float32 if single else np.float64
    scale = dtype(255.0) / dtype(total - hist[first])
    above_first = (np.cumsum(hist)[first + 1:] - hist[first]).astype(dtype) * scale
    table = np.zeros(256, dtype=np.uint8)
    table[first + 1:] = np.clip(np.rint(above_first), 0, 255).astype(np.uint8)  # rint: OpenCV's half to even
    return table


def _equalize_channel(channel: np.ndarray, mask: np.ndarray | None, eq_mode: str) -> np.ndarray:
    values = channel if mask is None else channel[mask.astype(bool)]
    hist = np.bincount(values.reshape(-1), minlength=256).astype(np.int64)
    return (cv_table(hist, mask is None) if eq_mode == "cv" else equalize_table(hist))[channel]


def _to_ycrcb(image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    red, green, blue = (image[..., c].astype(np.int64) for c in range(3))
    luma = _descale(red * _TO_Y[0] + green * _TO_Y[1] + blue * _TO_Y[2])
    cr = np.clip(_descale((red - luma) * _CR + (128 << 14)), 0, 255)
    cb = np.clip(_descale((blue - luma) * _CB + (128 << 14)), 0, 255)
    return luma, cr, cb


def _to_rgb(luma: np.ndarray, cr: np.ndarray, cb: np.ndarray) -> np.ndarray:
    red = luma + _descale((cr - 128) * _R_CR)
    green = luma + _descale((cb - 128) * _G_CB + (cr - 128) * _G_CR)
    blue = luma + _descale((cb - 128) * _B_CB)
    return np.clip(np.stack([red, green, blue], axis=-1), 0, 255).astype(np.uint8)


class Equalize(UnivariateOp):
    """Equalize the histogram of uint8 images (albumentations' Equalize).

    Gray images are equalized directly; RGB images per channel (``by_channels``) or through their luma (YCrCb,
    OpenCV's fixed-point conversion there and back). ``mask`` restricts the histogram to the selected pixels.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the equalized images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        eq_mode: ``'cv'`` (OpenCV's formula) or ``'pil'`` (Pillow's).
        by_channels: Equalize R, G and B separately (True) or the luma only.
        mask: None, a mask array (``(height, width)``, or ``(height, width, 3)`` per channel with
            ``by_channels``), or a function of ``image`` returning one.
        mask_params: Accepted for FastEstimator compatibility; must be empty (a FastEstimator op only sees the
            image, so the mask function can only take ``image``).

    Raises:
        ValueError: If ``eq_mode`` is not 'cv' or 'pil', or ``mask_params`` is not empty; when running, if an image
            is neither gray nor RGB, or the mask does not fit it.
        TypeError: When running, if an image is not uint8.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 eq_mode: str = "cv", by_channels: bool = True,
                 mask: None | np.ndarray | Callable[..., np.ndarray] = None, mask_params: Sequence[str] = ()) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if eq_mode not in ("cv", "pil"):
            raise ValueError(f"Equalize eq_mode must be 'cv' or 'pil', got {eq_mode!r}.")
        if mask_params:
            raise ValueError(f"Equalize mask_params {list(mask_params)!r} cannot be served: the op sees only the "
                             "image, so a mask function may take only `image`; pass mask_params=().")
        self.eq_mode, self.by_channels, self.mask, self.mask_params = eq_mode, bool(by_channels), mask, mask_params

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        check_dtype(data, (np.uint8,), "Equalize", self.inputs)
        gray = data.ndim == 2 or (data.ndim == 3 and data.shape[-1] == 1)
        if not gray and not (data.ndim == 3 and data.shape[-1] == 3):
            raise ValueError(f"Equalize needs a grayscale or RGB image; {self.inputs} has shape {data.shape}.")
        mask = self.mask(image=data) if callable(self.mask) else self.mask
        if mask is not None:
            mask = np.asarray(mask)
            per_channel = mask.ndim == 3 and mask.shape[-1] == 3
            if mask.shape[:2] != data.shape[:2] or (per_channel and (gray or not self.by_channels)):
                raise ValueError(f"Equalize mask of shape {mask.shape} does not fit {self.inputs} of shape "
                                 f"{data.shape}: it needs (height, width), or (height, width, 3) for an RGB image "
                                 "equalized by channels.")
            if mask.ndim == 3 and not per_channel:
                mask = mask[..., 0]
        if gray:
            return _equalize_channel(data, None if mask is None else mask.reshape(data.shape), self.eq_mode)
        if not self.by_channels:
            luma, cr, cb = _to_ycrcb(data)
            luma = _equalize_channel(luma.astype(np.uint8), mask, self.eq_mode).astype(np.int64)
            return _to_rgb(luma, cr, cb)
        masks = [None if mask is None else (mask[..., c] if mask.ndim == 3 else mask) for c in range(3)]
        return np.stack([_equalize_channel(data[..., c], masks[c], self.eq_mode) for c in range(3)], axis=-1)

    def apply_batch(self, data: np.ndarray) -> np.ndarray:
        # Each image has its own histogram.
        return np.stack([self.apply(sample, None) for sample in data]) if len(data) else data
