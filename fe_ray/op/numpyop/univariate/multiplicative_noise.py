"""MultiplicativeNoise: multiply images by random factors (one, one per channel, or one per pixel), as
albumentations (1.4) does.

FastEstimator 1.7 wraps albumentations' MultiplicativeNoise. Its uint8 path multiplies a float32 lookup table (or,
per pixel, the float32 image) and truncates into [0, 255]; other dtypes are multiplied, clipped to the dtype's range
([0, 1] for float32) and cast back. The factors are drawn from the sample's generator (exact across resumes and
worker threads in a Pipeline; the numbers differ from albumentations' draws); several inputs of one op share them
(so they need the first input's shape when ``elementwise`` is set).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import clip_to, is_number, to_range
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


def _is_gray(image: np.ndarray) -> bool:
    return image.ndim == 2 or (image.ndim == 3 and image.shape[-1] == 1)


class MultiplicativeNoise(UnivariateOp):
    """Multiply images by random factors from ``multiplier`` (uniform, drawn per sample).

    Without ``per_channel`` or ``elementwise`` one factor scales the whole image; ``per_channel`` draws one per
    channel, ``elementwise`` one per pixel (and per channel with ``per_channel``, else shared by the channels).
    A fixed ``multiplier`` (a number, or a pair of equal numbers) scales by that number. Results are clipped to the
    dtype's range and truncated.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the noisy images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        multiplier: The factor: a number, or a range ``(low, high)``.
        per_channel: Draw a factor per channel.
        elementwise: Draw a factor per pixel.

    Raises:
        ValueError: If ``multiplier`` is not a number or a pair ``low <= high``; when running with ``elementwise``,
            if an input's shape differs from the first input's.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 multiplier: float | tuple[float, float] = (0.9, 1.1), per_channel: bool = False,
                 elementwise: bool = False) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        low = multiplier if is_number(multiplier) else None
        self.multiplier = to_range(multiplier, "multiplier", "MultiplicativeNoise", low=low)  # type: ignore[arg-type]
        if self.multiplier[0] > self.multiplier[1]:
            raise ValueError(f"MultiplicativeNoise multiplier must be a number or a pair (low, high) with low <= high, "
                             f"got {multiplier!r}.")
        self.per_channel = bool(per_channel)
        self.elementwise = bool(elementwise)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        low, high = self.multiplier
        if low == high:
            return np.array([low])
        channels = 1 if (not self.per_channel or _is_gray(data)) else data.shape[-1]
        shape: Sequence[int] = (*data.shape[:2], channels) if self.elementwise else (channels,)
        factors = get_rng(state).uniform(low, high, shape)
        if data.ndim == 2:
            factors = np.squeeze(factors)  # a (h, w) image takes (h, w) factors, or one
        return factors

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        if params.ndim > 1 and params.shape[:2] != data.shape[:2]:
            raise ValueError(f"MultiplicativeNoise with elementwise=True multiplies every input by the same factors, "
                             f"so they need one height and width; {self.inputs} have {params.shape[:2]} (first) and "
                             f"{data.shape[:2]}.")
        if data.dtype == np.uint8 and params.ndim <= 1:
            # One factor, or one per channel: a table of the 256 levels stored in float32 (albumentations scales
            # its float32 table in place), then truncated into [0, 255].
            levels = np.arange(256, dtype=np.float32)
            if params.size == 1 or _is_gray(data):
                return clip_to((levels * params.reshape(-1)[0]).astype(np.float32), np.uint8)[data]
            tables = clip_to((levels[:, None] * params[None, :]).astype(np.float32), np.uint8)  # (256, channels)
            return np.take_along_axis(tables, data.reshape(-1, data.shape[-1]).astype(np.intp), axis=0).reshape(
                data.shape)
        if data.dtype == np.uint8:
            return clip_to(data.astype(np.float32) * params, np.uint8)
        return clip_to(data * params, data.dtype)
