"""MotionBlur: average each pixel along a random line segment (a random normalised line kernel), as albumentations
(1.3) does.

FastEstimator wraps albumentations' MotionBlur: per sample a kernel size is drawn from the odd sizes of
``blur_limit``, a segment between two random points of the ``size x size`` kernel is drawn with OpenCV's 8-connected
line (``cv2.line``, thickness 1), the kernel is normalised to sum 1 and applied with ``cv2.filter2D`` (correlation,
anchor at the kernel centre, borders mirrored without repeating the edge pixel). The numpy code here repeats those
steps.

The kernel is drawn from the sample's generator (exact across resumes and worker threads in a Pipeline; the numbers
differ from albumentations' Python ``random`` draws); several inputs of one op get the same kernel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, to_range
from fe_ray.op.numpyop.univariate.blur import FILTER_DTYPES, filter2d
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


def line_points(start: tuple[int, int], end: tuple[int, int]) -> list[tuple[int, int]]:
    """The ``(x, y)`` pixels ``cv2.line`` sets between two points (8-connected, thickness 1), from the left one.

    OpenCV's line iterator walks the longer axis one pixel a step (x when the extents tie) and steps the other axis
    when its error term goes negative, starting from ``dx - 2 dy``.
    """
    (x1, y1), (x2, y2) = (start, end) if start[0] <= end[0] else (end, start)
    dx, dy = x2 - x1, abs(y2 - y1)
    y_step = 1 if y2 >= y1 else -1
    x_major = dx >= dy
    major, minor = (dx, dy) if x_major else (dy, dx)
    err = major - 2 * minor
    x, y = x1, y1
    points = []
    for _ in range(major + 1):
        points.append((x, y))
        step_minor = err < 0
        err += -2 * minor + (2 * major if step_minor else 0)
        if x_major:
            x, y = x + 1, y + (y_step if step_minor else 0)
        else:
            x, y = x + (1 if step_minor else 0), y + y_step
    return points


def motion_kernel(size: int, start: tuple[int, int], end: tuple[int, int]) -> np.ndarray:
    """A ``size x size`` float32 kernel: the line from ``start`` to ``end`` (``(x, y)`` points), summing to 1."""
    kernel = np.zeros((size, size), dtype=np.float32)
    for x, y in line_points(start, end):
        kernel[y, x] = 1
    return kernel / np.float32(kernel.sum())


class MotionBlur(UnivariateOp):
    """Blur images along a random line: a random normalised line kernel of a random size from ``blur_limit``.

    The size is uniform over ``blur_limit[0], blur_limit[0] + 2, ...`` up to ``blur_limit[1]``; a single number
    ``v`` means ``(3, v)``. The line joins two random points of the kernel (two distinct rows when both points
    share a column), possibly off the kernel's centre (albumentations' ``allow_shifted=True``, which FastEstimator
    keeps). uint8 and uint16 results are rounded to the nearest level; float32 and float64 results are not clipped.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the blurred images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blur_limit: The kernel size range, ``low >= 3`` and ``high`` odd (as albumentations requires).

    Raises:
        ValueError: If ``blur_limit`` is not an int or a pair of ints with ``3 <= low <= high`` and an odd ``high``
            (albumentations fails only when it draws a size below 3); when running, if an image is not 2-D or 3-D.
        TypeError: When running, if an image is not uint8, uint16, float32 or float64.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blur_limit: int | Sequence[int] = 7) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        low, high = to_range(blur_limit, "blur_limit", "MotionBlur", low=3)
        if not (low.is_integer() and high.is_integer() and 3 <= low <= high and high % 2 == 1):
            raise ValueError(f"MotionBlur blur_limit must be an int or a pair (low, high) of ints with 3 <= low <= "
                             f"high and high odd, e.g. 7 or (3, 7); got {blur_limit!r}.")
        self.blur_limit = (int(low), int(high))

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        rng = get_rng(state)
        sizes = np.arange(self.blur_limit[0], self.blur_limit[1] + 1, 2)
        size = int(sizes[rng.integers(len(sizes))])
        x1, x2 = (int(v) for v in rng.integers(0, size, 2))
        if x1 == x2:
            y1, y2 = (int(v) for v in rng.choice(size, 2, replace=False))  # a vertical segment, never a dot
        else:
            y1, y2 = (int(v) for v in rng.integers(0, size, 2))
        return motion_kernel(size, (x1, y1), (x2, y2))

    def apply(self, data: np.ndarray, params: np.ndarray) -> np.ndarray:
        check_dtype(data, FILTER_DTYPES, "MotionBlur", self.inputs)
        if data.ndim not in (2, 3):
            raise ValueError(f"MotionBlur needs (height, width[, channels]) images; {self.inputs} has shape "
                             f"{data.shape}.")
        return filter2d(data, params)
