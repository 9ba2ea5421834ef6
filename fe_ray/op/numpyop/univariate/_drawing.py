"""Drawing primitives and OpenCV-style pixel arithmetic for the weather ops (:mod:`.weather`), in plain numpy.

albumentations (1.3) draws its weather effects with OpenCV: ``cv2.line``, ``cv2.circle``, ``cv2.fillPoly``,
``cv2.addWeighted``, ``cv2.blur`` and the 8-bit RGB <-> HLS conversions. The rasterisers here are simplified
stand-ins (no anti-aliasing; OpenCV's own 8-connected Bresenham walks, circle polygons and scan-line fills may set a
few edge pixels differently):

- a thin line visits ``max(|dx|, |dy|) + 1`` points along the segment, each rounded to the nearest pixel; a thick
  one sets every pixel within ``thickness / 2`` of the segment (round caps, as OpenCV's thick lines have);
- a filled circle sets the pixels whose centre lies within ``radius`` of the circle's centre;
- a filled polygon sets the pixels inside it by the even-odd rule, plus its outline.

The pixel arithmetic follows OpenCV's: ``addWeighted`` as a float32 fused multiply-add rounded half to even, the
8-bit HLS conversions with hue in [0, 180) and rounding of every component, ``blur`` with its anchor (even kernel
sizes reach one pixel further back than forward) and mirrored borders.
"""

from __future__ import annotations

import numpy as np

Box = tuple[slice, slice, np.ndarray]
"""A bounding box of the image (row slice, column slice) and the boolean mask of the shape inside it."""


def _clip(points_rows: np.ndarray, points_cols: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    keep = (points_rows >= 0) & (points_rows < shape[0]) & (points_cols >= 0) & (points_cols < shape[1])
    return points_rows[keep], points_cols[keep]


def line_pixels(shape: tuple[int, ...], start: tuple[int, int], end: tuple[int, int],
                thickness: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The (rows, columns) inside ``shape`` of a line from ``start`` to ``end``, points given as ``(x, y)``."""
    (x0, y0), (x1, y1) = start, end
    if thickness <= 1:
        steps = max(abs(x1 - x0), abs(y1 - y0))
        t = np.arange(steps + 1) / max(steps, 1)
        cols = np.floor(x0 + t * (x1 - x0) + 0.5).astype(np.int64)
        rows = np.floor(y0 + t * (y1 - y0) + 0.5).astype(np.int64)
        return _clip(rows, cols, shape)
    half = thickness / 2
    low_x, high_x = int(np.floor(min(x0, x1) - half)), int(np.ceil(max(x0, x1) + half))
    low_y, high_y = int(np.floor(min(y0, y1) - half)), int(np.ceil(max(y0, y1) + half))
    rows, cols = np.mgrid[low_y:high_y + 1, low_x:high_x + 1]
    dx, dy = x1 - x0, y1 - y0
    length2 = dx * dx + dy * dy
    # Distance from each pixel centre to the nearest point of the segment.
    t = np.clip(((cols - x0) * dx + (rows - y0) * dy) / length2, 0, 1) if length2 else np.zeros(rows.shape)
    inside = (cols - x0 - t * dx) ** 2 + (rows - y0 - t * dy) ** 2 <= half * half
    return _clip(rows[inside], cols[inside], shape)


def disk(shape: tuple[int, ...], centre: tuple[int, int], radius: int) -> Box | None:
    """The filled circle of ``radius`` around ``centre`` (``(x, y)``) within ``shape``; None if none of it shows."""
    cx, cy = centre
    row_lo, row_hi = max(cy - radius, 0), min(cy + radius + 1, shape[0])
    col_lo, col_hi = max(cx - radius, 0), min(cx + radius + 1, shape[1])
    if row_lo >= row_hi or col_lo >= col_hi:
        return None
    rows = np.arange(row_lo, row_hi)[:, None] - cy
    cols = np.arange(col_lo, col_hi)[None, :] - cx
    return slice(row_lo, row_hi), slice(col_lo, col_hi), rows * rows + cols * cols <= radius * radius


def polygon_mask(shape: tuple[int, ...], vertices: np.ndarray) -> np.ndarray:
    """A boolean ``shape[:2]`` mask of the polygon with ``vertices`` (an ``(n, 2)`` array of ``(x, y)``)."""
    rows, cols = np.mgrid[0:shape[0], 0:shape[1]]
    inside = np.zeros(shape[:2], dtype=bool)
    points = np.asarray(vertices, dtype=np.float64)
    for (x0, y0), (x1, y1) in zip(points, np.roll(points, -1, axis=0)):
        # Even-odd rule: flip the pixels whose rightward ray crosses this edge (half-open in y, so a vertex on the
        # ray counts once).
        if y0 == y1:
            continue
        spans = (rows >= min(y0, y1)) & (rows < max(y0, y1))
        crossing_x = x0 + (rows - y0) * (x1 - x0) / (y1 - y0)
        inside ^= spans & (cols < crossing_x)
    for start, end in zip(vertices, np.roll(vertices, -1, axis=0)):
        edge_rows, edge_cols = line_pixels(shape, (int(start[0]), int(start[1])), (int(end[0]), int(end[1])))
        inside[edge_rows, edge_cols] = True
    return inside


def add_weighted(first: np.ndarray, alpha: float, second: np.ndarray, beta: float) -> np.ndarray:
    """``cv2.addWeighted(first, alpha, second, beta, 0)`` of uint8 or uint16 arrays (of one dtype, kept).

    OpenCV's vector code (its AVX2 build, what x86 machines run) computes ``fma(first, alpha, second * beta)`` in
    float32 with float32 weights: one rounding for the product and sum, not two as ``first * alpha + second * beta``
    would give (which differs by a level on ~1% of pixels); then it rounds half to even and saturates. The product of
    an integer below 2**16 and a float32 weight is exact in double, so the sum is formed there and rounded once.
    """
    second_term = (second.astype(np.float32) * np.float32(beta)).astype(np.float64)
    total = (first.astype(np.float64) * float(np.float32(alpha)) + second_term).astype(np.float32)
    top = np.iinfo(first.dtype).max
    return np.clip(np.rint(total), 0, top).astype(first.dtype)


def blend_disk(image: np.ndarray, centre: tuple[int, int], radius: int, colour: np.ndarray | float,
               alpha: float) -> None:
    """Blend a filled circle of ``colour`` into uint8 ``image`` in place, as ``cv2.circle`` on a copy and then
    ``cv2.addWeighted(copy, alpha, image, 1 - alpha)`` do (pixels outside the circle stay as they are)."""
    box = disk(image.shape, centre, radius)
    if box is None:
        return
    rows, cols, mask = box
    region = image[rows, cols]
    painted = np.broadcast_to(np.asarray(colour, dtype=np.uint8), region.shape)
    region[mask] = add_weighted(painted, alpha, region, 1 - alpha)[mask]


# OpenCV's HLS -> RGB sector table: which of (max, min, falling, rising) each of R, G, B takes per 60-degree sector.
_SECTORS = np.array([[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2]])


def rgb_to_hls(image: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_RGB2HLS)`` of a uint8 RGB image: hue in [0, 180], lightness and saturation
    in [0, 255], each rounded half to even."""
    rgb = image.astype(np.float32) * np.float32(1 / 255)  # OpenCV multiplies by 1/255 rather than dividing
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    high, low = rgb.max(axis=-1), rgb.min(axis=-1)
    diff, total = high - low, high + low
    lightness = total * np.float32(0.5)
    chroma = diff > np.finfo(np.float32).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        saturation = np.where(lightness < 0.5, diff / total, diff / (2 - total))
        scale = np.float32(60) / diff
        hue = np.where(high == red, (green - blue) * scale,
                       np.where(high == green, (blue - red) * scale + 120, (red - green) * scale + 240))
    hue = np.where(hue < 0, hue + 360, hue)
    hue, saturation = np.where(chroma, hue, 0), np.where(chroma, saturation, 0)
    channels = (hue * np.float32(0.5), lightness * 255, saturation * 255)
    return np.stack([np.clip(np.rint(c), 0, 255) for c in channels], axis=-1).astype(np.uint8)


def hls_to_rgb(image: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_HLS2RGB)`` of a uint8 HLS image (hue in [0, 180]), rounded half to even."""
    hls = image.astype(np.float32)
    lightness, saturation = hls[..., 1] * np.float32(1 / 255), hls[..., 2] * np.float32(1 / 255)
    high = np.where(lightness <= 0.5, lightness * (1 + saturation), lightness + saturation - lightness * saturation)
    low = 2 * lightness - high
    sector_pos = np.mod(hls[..., 0] * np.float32(6.0 / 180), 6)
    sector = np.minimum(np.floor(sector_pos).astype(np.int64), 5)
    frac = sector_pos - sector
    table = np.stack([high, low, low + (high - low) * (1 - frac), low + (high - low) * frac], axis=-1)
    rgb = np.take_along_axis(table, _SECTORS[sector], axis=-1)
    rgb = np.where((saturation == 0)[..., None], lightness[..., None], rgb)
    return np.clip(np.rint(rgb * 255), 0, 255).astype(np.uint8)
