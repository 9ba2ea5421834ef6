"""CoarseDropout: fill randomly placed rectangles of an image with a constant (a random op)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

Hole = tuple[int, int, int, int]  # (top, bottom, left, right), bottom/right exclusive


class CoarseDropout(UnivariateOp):
    """Fill a random number of random rectangles ("holes") of each image with ``fill_value``.

    Per sample: the number of holes is uniform in ``[min_holes, max_holes]``; each hole's height and width are
    uniform in ``[min_height, max_height]`` and ``[min_width, max_width]`` (an int is pixels, a float in (0, 1] a
    fraction of the image's side), and its position is uniform over the places where it fits. Several inputs get
    the same holes. Images are ``(height, width)`` or ``(height, width, channels)``.

    Random: in a Pipeline the draws come from the sample's generator (exact across resumes and worker threads, see
    :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the images with holes to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        max_holes: The largest number of holes.
        max_height: The largest hole height.
        max_width: The largest hole width.
        min_holes: The smallest number of holes; None means ``max_holes``.
        min_height: The smallest hole height; None means ``max_height``.
        min_width: The smallest hole width; None means ``max_width``.
        fill_value: The value of the holes' pixels: a number, or one per channel.

    Raises:
        ValueError: If a count or size is out of range or a minimum exceeds its maximum.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 max_holes: int = 8, max_height: int | float = 8, max_width: int | float = 8,
                 min_holes: int | None = None, min_height: int | float | None = None,
                 min_width: int | float | None = None,
                 fill_value: int | float | Sequence[int] | Sequence[float] = 0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        min_holes = max_holes if min_holes is None else min_holes
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in (min_holes, max_holes)) or \
                not 0 <= min_holes <= max_holes:
            raise ValueError(f"CoarseDropout needs ints 0 <= min_holes <= max_holes, got min_holes={min_holes!r}, "
                             f"max_holes={max_holes!r}.")
        self.min_holes, self.max_holes = int(min_holes), int(max_holes)
        self.heights = _size_range("height", min_height, max_height)
        self.widths = _size_range("width", min_width, max_width)
        self.fill_value = np.asarray(fill_value)
        if self.fill_value.ndim > 1:
            raise ValueError(f"CoarseDropout fill_value must be a number or one number per channel, got "
                             f"{fill_value!r}.")

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> list[Hole]:
        if data.ndim not in (2, 3):
            raise ValueError(f"CoarseDropout needs images of shape (height, width) or (height, width, channels); "
                             f"{self.inputs} has shape {data.shape}.")
        rng = get_rng(state)
        height, width = data.shape[:2]
        holes = []
        for _ in range(int(rng.integers(self.min_holes, self.max_holes + 1))):
            hole_h = _draw_size(rng, self.heights, height)
            hole_w = _draw_size(rng, self.widths, width)
            top = int(rng.integers(0, height - hole_h + 1))
            left = int(rng.integers(0, width - hole_w + 1))
            holes.append((top, top + hole_h, left, left + hole_w))
        return holes

    def apply(self, data: np.ndarray, params: list[Hole]) -> np.ndarray:
        out = data.copy()
        for top, bottom, left, right in params:
            out[top:bottom, left:right] = self.fill_value
        return out


def _size_range(name: str, low: int | float | None, high: int | float) -> tuple[int | float, int | float]:
    low = high if low is None else low
    for value in (low, high):
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        is_fraction = isinstance(value, (float, np.floating)) and 0.0 < value <= 1.0
        if not ((is_int and value >= 1) or is_fraction):
            raise ValueError(f"CoarseDropout min_{name}/max_{name} must be ints >= 1 (pixels) or floats in (0, 1] "
                             f"(fractions of the image's {name}), got {value!r}.")
    if isinstance(low, (float, np.floating)) != isinstance(high, (float, np.floating)):
        raise ValueError(f"CoarseDropout min_{name}={low!r} and max_{name}={high!r} mix pixels and fractions; give "
                         "both as ints or both as floats.")
    if low > high:
        raise ValueError(f"CoarseDropout min_{name}={low!r} exceeds max_{name}={high!r}.")
    return low, high


def _draw_size(rng: np.random.Generator, bounds: tuple[int | float, int | float], side: int) -> int:
    low, high = (int(b * side) if isinstance(b, (float, np.floating)) else int(b) for b in bounds)
    # A hole never exceeds the image (nor is it empty for a tiny fraction of a small image).
    low, high = max(1, min(low, side)), max(1, min(high, side))
    return int(rng.integers(low, high + 1))
