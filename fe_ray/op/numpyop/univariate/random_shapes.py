"""RandomShapes: blend a few random rectangles, circles, triangles and ellipses into images, as FastEstimator 1.7
does with ``skimage.draw.random_shapes``.

FastEstimator draws a white (255) canvas of the image's size with ``random_shapes(max_shapes, max_size,
intensity_range, allow_overlap=True)`` (one colour per shape and channel), draws one opacity ``alpha`` and, where the
canvas is below 255, replaces the image by ``shape * alpha + image * (1 - alpha)`` (shape values divided by 255 for
float images), truncated to the image's dtype. The shape generator here follows scikit-image's rules (number of
shapes, start points, sizes, radii, rotations, colours; later shapes over earlier ones) with its own numpy
rasterisers: convex polygons include their edges, disks and ellipses hold the pixels strictly inside, as
scikit-image's do; a boundary pixel may still differ from scikit-image's scan. scikit-image is not needed.

Randomness comes from the sample's generator (exact across resumes and worker threads in a Pipeline; FastEstimator
draws from fresh, unseeded generators). As in FastEstimator, each input gets its own shapes and opacity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import is_number
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

_MIN_SIZE = 2  # scikit-image's default smallest shape dimension
_TRIALS = 100  # scikit-image's attempts to place each shape

IntensityRange = tuple[int, int]


def _convex_polygon(shape: tuple[int, int], rows: Sequence[float], cols: Sequence[float]) -> np.ndarray:
    """A boolean mask of the pixels (centres) inside or on the convex polygon with these vertices."""
    grid_r, grid_c = np.mgrid[0:shape[0], 0:shape[1]]
    count = len(rows)
    signs = []
    for k in range(count):
        r0, c0, r1, c1 = rows[k], cols[k], rows[(k + 1) % count], cols[(k + 1) % count]
        signs.append((r1 - r0) * (grid_c - c0) - (c1 - c0) * (grid_r - r0))
    cross = np.stack(signs)
    # Inside (or on an edge) when every edge sees the point on the same side; degenerate polygons fill nothing
    # beyond their edges.
    return np.all(cross >= 0, axis=0) | np.all(cross <= 0, axis=0)


def _ellipse(shape: tuple[int, int], centre: tuple[float, float], radii: tuple[float, float],
             rotation: float) -> np.ndarray:
    """A boolean mask of the pixels strictly inside the ellipse (scikit-image's ``draw.ellipse`` rule)."""
    grid_r, grid_c = np.ogrid[0:shape[0], 0:shape[1]]
    rotation %= np.pi
    sin, cos = np.sin(rotation), np.cos(rotation)
    dr, dc = grid_r - centre[0], grid_c - centre[1]
    distances = ((dr * cos + dc * sin) / radii[0]) ** 2 + ((dr * sin - dc * cos) / radii[1]) ** 2
    return distances < 1


def _shape_mask(kind: int, point: tuple[int, int], shape: tuple[int, int], sizes: tuple[int, int],
                rng: np.random.Generator) -> np.ndarray | None:
    """One shape's mask at ``point`` (row, column) with scikit-image's size rules; None when it does not fit."""
    min_size, max_size = sizes
    row, col = point
    height, width = shape
    if kind == 0:  # rectangle, its top left corner at the point
        free_w = min(width - col, max_size) - min_size
        free_h = min(height - row, max_size) - min_size
        rows = min_size + int(rng.integers(max(1, free_h))) - 1
        cols = min_size + int(rng.integers(max(1, free_w))) - 1
        mask = np.zeros(shape, dtype=bool)
        mask[row:row + rows + 1, col:col + cols + 1] = True
        return mask
    if kind == 1:  # circle around the point
        min_radius, max_radius = min_size // 2.0, max_size // 2.0
        free = min(col, width - col, row, height - row, max_radius) - min_radius
        if free < 0:
            return None
        radius = int(min_radius + int(rng.integers(max(1, free))))
        return _ellipse(shape, (row, col), (radius, radius), 0.0)
    if kind == 2:  # upward equilateral triangle, its bottom left corner at the point
        free = min(width - col, row, max_size) - min_size
        side = min_size + int(rng.integers(max(1, free))) - 1
        tip = int(np.ceil(np.sqrt(3 / 4.0) * side))
        return _convex_polygon(shape, [row, row - tip, row], [col, col + side // 2, col + side])
    min_radius, max_radius = min_size / 2.0, max_size / 2.0  # rotated ellipse around the point
    free = min(col, width - col, row, height - row, max_radius)
    if free < min_radius:
        return None
    r_radius = float(rng.uniform(min_radius, free + 1))
    c_radius = float(rng.uniform(min_radius, free + 1))
    rotation = float(rng.uniform(-np.pi, np.pi))
    return _ellipse(shape, (row, col), (r_radius, c_radius), rotation)


def random_shapes(shape: tuple[int, int], channels: int, max_shapes: int, max_size: int | None,
                  intensity_range: Sequence[IntensityRange], rng: np.random.Generator) -> np.ndarray:
    """A uint8 ``(height, width, channels)`` canvas of 255 with 1 to ``max_shapes`` random shapes drawn on it.

    ``intensity_range`` holds one ``(low, high)`` pair for every channel, or a single pair for all of them.
    """
    height, width = shape
    canvas = np.full((height, width, channels), 255, dtype=np.uint8)
    if max_shapes < 1 or min(height, width) < _MIN_SIZE:
        return canvas  # nothing fits (FastEstimator fails here; RUA's level 0 asks for no shapes)
    sizes = (_MIN_SIZE, max_size or max(height, width))
    count = int(rng.integers(1, max_shapes + 1))
    ranges = list(intensity_range) * channels if len(intensity_range) == 1 else list(intensity_range)
    colors = np.stack([rng.integers(low, high + 1, size=count) for low, high in ranges], axis=-1)
    for index in range(count):
        kind = int(rng.integers(4))
        if kind != 0 and sizes[1] < _MIN_SIZE:
            continue  # RUA shrank max_size to 1: only rectangles fit (scikit-image raises for the other kinds)
        for _ in range(_TRIALS):
            point = (int(rng.integers(max(1, height - _MIN_SIZE))), int(rng.integers(max(1, width - _MIN_SIZE))))
            mask = _shape_mask(kind, point, shape, sizes, rng)
            if mask is not None:
                canvas[mask] = colors[index]
                break
    return canvas


def _parse_intensity(intensity_range: Any) -> list[IntensityRange]:
    pairs = [intensity_range] if len(intensity_range) == 2 and all(is_number(v) for v in intensity_range) else \
        list(intensity_range)
    parsed = []
    for pair in pairs:
        if not (isinstance(pair, Sequence) and len(pair) == 2 and all(is_number(v) and float(v).is_integer()
                                                                       for v in pair)):
            raise ValueError(f"RandomShapes intensity_range must be a pair (low, high) of ints, or one pair per "
                             f"channel, got {intensity_range!r}.")
        low, high = int(pair[0]), int(pair[1])
        if not 0 <= low <= high <= 254:
            raise ValueError(f"RandomShapes intensity_range must lie in [0, 254] with low <= high (255 marks the "
                             f"background), got {intensity_range!r}.")
        parsed.append((low, high))
    return parsed


class RandomShapes(UnivariateOp):
    """Blend up to ``max_shapes`` random shapes (rectangles, circles, triangles, ellipses) into images.

    Per input, 1 to ``max_shapes`` shapes of random kinds, sizes (2 to ``max_size`` pixels, the image's larger side
    when None), places and colours (integers of ``intensity_range`` per channel, in uint8 units) are drawn, and one
    opacity ``alpha = uniform(transparency_range)``; shape pixels become ``colour * alpha + image * (1 - alpha)``
    (colours divided by 255 for float images), truncated to the image's dtype. ``set_rua_level(m)`` scales
    ``max_shapes`` and ``max_size`` by ``m`` (rounding up) and the opacity range's width by ``m``, as in
    FastEstimator.

    Unlike FastEstimator (which needs ``(height, width, channels)``), 2-D images are accepted too.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        max_shapes: The largest number of shapes per image.
        max_size: The largest shape dimension in pixels (None: the image's larger side).
        intensity_range: The shape colours' range ``(low, high)`` within [0, 254], or one such pair per channel.
        transparency_range: The opacity's range within [0, 1] (0 invisible, 1 opaque).

    Raises:
        ValueError: If ``max_shapes`` is not an int >= 1, ``max_size`` not None or an int >= 2, or a range is not a
            pair inside its bounds (FastEstimator raises AssertionError for the ranges); when running, if an image
            is not 2-D or 3-D, or per-channel intensity pairs do not match its channels.
    """

    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 max_shapes: int = 3, max_size: int | None = None, intensity_range: tuple[int, int] = (0, 254),
                 transparency_range: tuple[float, float] = (0.1, 0.9)) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if isinstance(max_shapes, bool) or not isinstance(max_shapes, (int, np.integer)) or max_shapes < 1:
            raise ValueError(f"RandomShapes max_shapes must be an int >= 1, got {max_shapes!r}.")
        if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, (int, np.integer))
                                     or max_size < _MIN_SIZE):
            raise ValueError(f"RandomShapes max_size must be None (the image's larger side) or an int >= 2, got "
                             f"{max_size!r}.")
        self.max_shapes = int(max_shapes)
        self.max_size = None if max_size is None else int(max_size)
        self.intensity_range = _parse_intensity(intensity_range)
        if not (isinstance(transparency_range, Sequence) and len(transparency_range) == 2
                and all(is_number(v) for v in transparency_range)
                and 0 <= transparency_range[0] <= transparency_range[1] <= 1):
            raise ValueError(f"RandomShapes transparency_range must be a pair (low, high) with 0 <= low <= high <= 1, "
                             f"got {transparency_range!r}.")
        self.transparency_range = (float(transparency_range[0]), float(transparency_range[1]))

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Scale the number and size of shapes and the opacity range's width by RUA's ``magnitude_coef`` (in
        [0, 1]), keeping the lowest opacity."""
        self.max_shapes = math.ceil(magnitude_coef * self.max_shapes)
        self.max_size = None if self.max_size is None else math.ceil(magnitude_coef * self.max_size)
        low, high = self.transparency_range
        self.transparency_range = (low, low + (high - low) * magnitude_coef)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> np.random.Generator:
        return get_rng(state)  # every input draws its own shapes from the sample's generator, in input order

    def apply(self, data: np.ndarray, params: np.random.Generator) -> np.ndarray:
        if data.ndim not in (2, 3):
            raise ValueError(f"RandomShapes needs (height, width[, channels]) images; {self.inputs} has shape "
                             f"{data.shape}.")
        channels = data.shape[2] if data.ndim == 3 else 1
        if len(self.intensity_range) not in (1, channels):
            raise ValueError(f"RandomShapes has {len(self.intensity_range)} intensity pairs but an image of "
                             f"{self.inputs} has {channels} channels; pass one pair, or one per channel.")
        canvas = random_shapes(data.shape[:2], channels, self.max_shapes, self.max_size, self.intensity_range,
                               params)
        alpha = float(params.uniform(*self.transparency_range))
        if data.ndim == 2:
            canvas = canvas[..., 0]
        shapes = canvas / 255.0 if np.issubdtype(data.dtype, np.floating) else canvas.astype(np.float64)
        blend = shapes * alpha + data * (1.0 - alpha)
        return np.where(canvas < 255, blend, data).astype(data.dtype)
