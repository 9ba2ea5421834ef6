"""Channel ops of albumentations' kind: ToGray, ToSepia (deterministic), ChannelShuffle, ChannelDropout and RGBShift
(random).

FastEstimator wraps albumentations (1.3), which does the color conversions with OpenCV; the numpy code here keeps
their formulas and dtype rules (see :mod:`fe_ray.op.numpyop.univariate._image`). Random parameters come from the
sample's generator with albumentations' distributions (exact across resumes and worker threads in a Pipeline; the
numbers differ from albumentations' Python ``random`` draws); several inputs of one op share them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_channels, clip_to, is_number, to_range
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

# OpenCV's RGB -> gray weights, and the fixed-point forms it uses for integer images: 14 fraction bits for uint8
# (and here other integers), 15 for uint16 (each set sums to 1 << bits).
_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_GRAY_FIXED = {14: np.array([4899, 9617, 1868], dtype=np.int64), 15: np.array([9798, 19235, 3735], dtype=np.int64)}

# The sepia matrix of albumentations' ToSepia: output channel i = SEPIA[i] . (R, G, B).
SEPIA = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]])


class _SampleShapeOp(UnivariateOp):
    """A deterministic op whose :meth:`apply` checks one sample's shape: a batch is transformed sample-wise."""

    def apply_batch(self, data: np.ndarray) -> np.ndarray:
        return np.stack([self.apply(sample, None) for sample in data]) if len(data) else data


class ToGray(_SampleShapeOp):
    """Convert RGB images to gray, kept as 3 equal channels: ``0.299 R + 0.587 G + 0.114 B``.

    Integer images use OpenCV's fixed-point weights (14 fraction bits, 15 for uint16) with rounding (so the result
    equals ``cv2.cvtColor``);
    float images the weights in their own precision. Images already gray (``(height, width)`` or one channel) pass
    unchanged with a warning, as in albumentations.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the gray images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: When running, if an image is neither gray nor ``(height, width, 3)``.
    """

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        if data.ndim == 2 or (data.ndim == 3 and data.shape[-1] == 1):
            warnings.warn(f"ToGray: {self.inputs} is already gray (shape {data.shape}); it is left unchanged.",
                          stacklevel=2)
            return data
        check_channels(data, 3, "ToGray", self.inputs)
        if np.issubdtype(data.dtype, np.integer):
            bits = 15 if data.dtype == np.uint16 else 14
            gray = ((data.astype(np.int64) @ _GRAY_FIXED[bits] + (1 << (bits - 1))) >> bits).astype(data.dtype)
        else:
            gray = data @ _GRAY_WEIGHTS.astype(data.dtype)
        return np.repeat(gray[..., None], 3, axis=-1)


class ToSepia(_SampleShapeOp):
    """Give RGB images a sepia tone: each output channel a fixed mix of R, G and B (:data:`SEPIA`).

    uint8 and uint16 results are rounded and saturated into the dtype's range; float results are clipped to [0, 1].
    (OpenCV's vectorised paths, which FastEstimator uses, work in 10-bit fixed point on most pixels of a uint8
    image and in single precision on uint16 ones, so a value may differ from OpenCV's by 1.)

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the sepia images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: When running, if an image is not ``(height, width, 3)``.
    """

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        check_channels(data, 3, "ToSepia", self.inputs)
        if data.dtype in (np.uint8, np.uint16):
            # cv2.transform rounds integer results (saturate_cast), where a float cast would truncate.
            mixed = data.astype(np.float64) @ SEPIA.T
            return np.clip(np.rint(mixed), 0, np.iinfo(data.dtype).max).astype(data.dtype)
        return clip_to(data.astype(np.float32) @ SEPIA.T.astype(np.float32), data.dtype)


class ChannelShuffle(UnivariateOp):
    """Reorder the channels of images by a random permutation (the same for every input of a sample).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the shuffled images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: When running, if an image is not ``(height, width, channels)`` or has another channel count
            than the first input.
    """

    is_random = True

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        check_channels(data, None, "ChannelShuffle", self.inputs)
        return get_rng(state).permutation(data.shape[-1])

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        check_channels(data, len(params), "ChannelShuffle", self.inputs)
        return data[..., params]


class ChannelDropout(UnivariateOp):
    """Fill a random number (in ``channel_drop_range``) of randomly chosen channels with ``fill_value``.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        channel_drop_range: ``(min, max)`` channels to drop, ``1 <= min <= max``.
        fill_value: The value of the dropped channels.

    Raises:
        ValueError: If ``channel_drop_range`` is not a pair of ints with ``1 <= min <= max``; when running, if an
            image has one channel, or no more than ``max`` channels (one must stay).
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 channel_drop_range: Sequence[int] = (1, 1), fill_value: int | float = 0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        low, high = to_range(channel_drop_range, "channel_drop_range", "ChannelDropout") \
            if not is_number(channel_drop_range) else (None, None)
        if low is None or not (low.is_integer() and high.is_integer() and 1 <= low <= high):
            raise ValueError(f"ChannelDropout channel_drop_range must be a pair of ints (min, max) with 1 <= min <= "
                             f"max, got {channel_drop_range!r}.")
        self.channel_drop_range = (int(low), int(high))
        self.fill_value = fill_value

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        low, high = self.channel_drop_range
        if data.ndim != 3 or data.shape[-1] == 1:
            raise ValueError(f"ChannelDropout needs images with several channels (height, width, channels); "
                             f"{self.inputs} has shape {data.shape}.")
        if high >= data.shape[-1]:
            raise ValueError(f"ChannelDropout may drop up to {high} channels, but {self.inputs} has only "
                             f"{data.shape[-1]}; at least one must stay: lower channel_drop_range.")
        rng = get_rng(state)
        count = int(rng.integers(low, high + 1))
        return rng.choice(data.shape[-1], size=count, replace=False)

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        out = data.copy()
        out[..., params] = self.fill_value
        return out


class RGBShift(UnivariateOp):
    """Add a random offset to each of the R, G and B channels, each drawn from its own limit.

    Offsets are in pixel units (for float images too, whose results are clipped to [0, 1]); uint8 images go
    through a lookup table truncated into [0, 255].

    Args:
        inputs: Key(s) of the RGB images.
        outputs: Key(s) to write the shifted images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        r_shift_limit: Range of the red offset: a number ``v`` means ``(-v, v)``, or a pair.
        g_shift_limit: Range of the green offset, likewise.
        b_shift_limit: Range of the blue offset, likewise.

    Raises:
        ValueError: If a limit is not a number or a pair; when running, if an image is not ``(height, width, 3)``.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 r_shift_limit: float | Sequence[float] = 20, g_shift_limit: float | Sequence[float] = 20,
                 b_shift_limit: float | Sequence[float] = 20) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.r_shift_limit = to_range(r_shift_limit, "r_shift_limit", "RGBShift")
        self.g_shift_limit = to_range(g_shift_limit, "g_shift_limit", "RGBShift")
        self.b_shift_limit = to_range(b_shift_limit, "b_shift_limit", "RGBShift")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        rng = get_rng(state)
        return np.array([rng.uniform(*limit) for limit in (self.r_shift_limit, self.g_shift_limit,
                                                            self.b_shift_limit)])

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        check_channels(data, 3, "RGBShift", self.inputs)
        if data.dtype == np.uint8:
            tables = np.arange(256, dtype=np.float32)[:, None] + params.astype(np.float32)  # (level, channel)
            tables = np.clip(tables, 0, 255).astype(np.uint8)
            return tables[data, np.arange(3)]
        return clip_to(data + params.astype(data.dtype), data.dtype)


# FastEstimator's ``univariate/color.py`` holds the Pillow ``Color`` enhancement, which fe_ray keeps with its
# siblings in ``enhance.py``: importable from here too, as FastEstimator's path reads.
from fe_ray.op.numpyop.univariate.enhance import Color  # noqa: E402, F401
