"""Pillow's image arithmetic in numpy, for the ops FastEstimator implements with Pillow (RUA's family).

FastEstimator's AutoContrast, Equalize (RUA's), Color, Sharpness, ShearX/Y, TranslateX/Y and RUA's Rotate convert
each uint8 image to a Pillow image and back. The functions here repeat Pillow's arithmetic step for step (its
lookup tables, its 3x3 smoothing filter in single precision, its bicubic affine transform in double precision with
truncation, its fixed-point resampling, its nearest-neighbour affine transform in 16.16 fixed point), so that the
ops give Pillow's images without needing Pillow.

Images are uint8 ``(height, width)`` or ``(height, width, channels)``; every channel goes through the same
arithmetic, as Pillow treats the bands of an ``L`` or ``RGB`` image. The geometric functions also take the two other
gray images Pillow makes of numpy arrays and warps: float32 (Pillow's ``F`` mode, computed in double precision and
stored as float32, not clipped), int32 (mode ``I``: truncated after a warp, rounded half away from zero after a
resize, not clipped) and bool (mode ``1``, which Pillow always warps and resizes nearest neighbour).
"""

from __future__ import annotations

import math

import numpy as np

# Pillow's resampling keeps its filter coefficients as fixed-point ints with this many fraction bits (8-bit images).
_PRECISION_BITS = 32 - 8 - 2


def band_lut(image: np.ndarray, tables: list[np.ndarray]) -> np.ndarray:
    """Map each channel of ``image`` through its own 256-entry table (one table per channel, or one for 2-D)."""
    if image.ndim == 2:
        return tables[0][image]
    return np.stack([tables[c][image[..., c]] for c in range(image.shape[-1])], axis=-1)


def _histograms(image: np.ndarray) -> list[np.ndarray]:
    channels = [image] if image.ndim == 2 else [image[..., c] for c in range(image.shape[-1])]
    return [np.bincount(channel.reshape(-1), minlength=256).astype(np.int64) for channel in channels]


def autocontrast(image: np.ndarray) -> np.ndarray:
    """``ImageOps.autocontrast(image)``: stretch each channel so its darkest value becomes 0 and its brightest 255."""
    tables = []
    for hist in _histograms(image):
        present = np.flatnonzero(hist)
        levels = np.arange(256)
        if len(present) == 0 or present[-1] <= present[0]:
            tables.append(levels.astype(np.uint8))
            continue
        low, high = int(present[0]), int(present[-1])
        scale = 255.0 / (high - low)
        offset = -low * scale
        # Python float arithmetic then int() (truncation toward zero), as Pillow builds the table.
        table = np.array([int(level * scale + offset) for level in range(256)])
        tables.append(np.clip(table, 0, 255).astype(np.uint8))
    return band_lut(image, tables)


def equalize_table(hist: np.ndarray) -> np.ndarray:
    """Pillow's equalizing lookup table for one channel's 256-bin histogram (identity when it cannot equalize).

    Level i maps to ``(step // 2 + count of values below i) // step``, saturated at 255, with ``step = (count -
    count of the brightest present value) // 255``.
    """
    counts = hist[hist > 0]
    step = (int(counts.sum()) - int(counts[-1])) // 255 if len(counts) > 1 else 0
    if step == 0:
        return np.arange(256, dtype=np.uint8)
    below = np.concatenate([[0], np.cumsum(hist)[:-1]])
    return np.minimum((step // 2 + below) // step, 255).astype(np.uint8)


def equalize(image: np.ndarray) -> np.ndarray:
    """``ImageOps.equalize(image)``: flatten each channel's histogram with Pillow's integer step rule."""
    return band_lut(image, [equalize_table(hist) for hist in _histograms(image)])


def luminance(rgb: np.ndarray) -> np.ndarray:
    """Pillow's ``RGB -> L`` conversion of ``(..., 3)`` uint8 values, as int64."""
    values = rgb.astype(np.int64)
    return (values[..., 0] * 19595 + values[..., 1] * 38470 + values[..., 2] * 7471 + 0x8000) >> 16


def smooth(image: np.ndarray) -> np.ndarray:
    """``image.filter(ImageFilter.SMOOTH)``: a 3x3 kernel (centre 5, others 1, over 13) in float32, rounded.

    The outermost rows and columns keep their values, and images under 3x3 are returned unchanged, as Pillow does.
    """
    height, width = image.shape[:2]
    if height < 3 or width < 3:
        return image.copy()
    weights = (np.float32(1) / np.float32(13), np.float32(5) / np.float32(13))
    values = image.astype(np.float32)

    def row_sum(rows: np.ndarray, centre: bool) -> np.ndarray:
        middle_weight = weights[1] if centre else weights[0]
        # Pillow's left-to-right order of single-precision products and sums.
        return rows[:, :-2] * weights[0] + rows[:, 1:-1] * middle_weight + rows[:, 2:] * weights[0]

    total = np.float32(0) + row_sum(values[2:], False)
    total = total + row_sum(values[1:-1], True)
    total = total + row_sum(values[:-2], False)
    out = image.copy()
    inner = np.where(total <= 0, 0, np.where(total >= 255, 255, (total + np.float32(0.5)).astype(np.int64)))
    out[1:-1, 1:-1] = inner.astype(np.uint8)
    return out


def _cubic(v1: np.ndarray, v2: np.ndarray, v3: np.ndarray, v4: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Pillow's bicubic interpolation between ``v2`` and ``v3`` (a = -1 kernel), in double precision.

    The differences of the four values are taken in their own dtype (Pillow's macro adds float32 pixels in single
    precision, uint8 ones as exact ints) and only then widened to double.
    """
    p2 = (-v1 + v3).astype(np.float64)
    p3 = (2 * (v1 - v2) + v3 - v4).astype(np.float64)
    p4 = (-v1 + v2 - v3 + v4).astype(np.float64)
    return v2.astype(np.float64) + d * (p2 + d * (p3 + d * p4))


def affine_bicubic(image: np.ndarray, size: tuple[int, int], matrix: tuple[float, ...]) -> np.ndarray:
    """``Image.transform(size, AFFINE, matrix, resample=BICUBIC)`` with a black fill.

    The output pixel at column x, row y samples the input at ``(a x' + b y' + c, d x' + e y' + f)`` for pixel centres
    ``x' = x + 0.5``, ``y' = y + 0.5``; samples outside the input are black. uint8 values are clipped and truncated,
    int32 ones (Pillow's ``I`` mode) truncated, float32 ones (``F`` mode) stored as computed.

    Args:
        image: The uint8, int32 or float32 image.
        size: The output ``(width, height)``, Pillow's order.
        matrix: ``(a, b, c, d, e, f)``.
    """
    a, b, c, d, e, f = (float(v) for v in matrix)
    width, height = size
    in_height, in_width = image.shape[:2]
    xs = np.arange(width, dtype=np.float64)[None, :] + 0.5
    ys = np.arange(height, dtype=np.float64)[:, None] + 0.5
    x_in = a * xs + b * ys + c
    y_in = d * xs + e * ys + f
    inside = (x_in >= 0.0) & (x_in < in_width) & (y_in >= 0.0) & (y_in < in_height)
    x_in, y_in = x_in - 0.5, y_in - 0.5
    x0, y0 = np.floor(x_in), np.floor(y_in)
    dx, dy = x_in - x0, y_in - y0
    # Out-of-image neighbours repeat the edge pixel (Pillow's clipping of the 4x4 window).
    cols = [np.clip(x0.astype(np.int64) + k, 0, in_width - 1) for k in (-1, 0, 1, 2)]
    rows = [np.clip(y0.astype(np.int64) + k, 0, in_height - 1) for k in (-1, 0, 1, 2)]
    # Integer differences are exact (Pillow's C takes them as ints); float32 ones are taken in float32, as there.
    values = image if image.dtype == np.float32 else image.astype(np.int64)
    if image.ndim == 3:
        dx, dy, inside = dx[..., None], dy[..., None], inside[..., None]
    per_row = [_cubic(*(values[row, col] for col in cols), dx) for row in rows]
    result = _cubic(*per_row, dy)
    if image.dtype == np.uint8:
        result = np.clip(result, 0.0, 255.0)
    if image.dtype != np.float32:
        result = np.trunc(result)  # C's cast of the double to the pixel type
    return np.where(inside, result, 0).astype(image.dtype)


def affine_nearest(image: np.ndarray, matrix: tuple[float, ...], size: tuple[int, int] | None = None) -> np.ndarray:
    """``Image.transform(size, AFFINE, matrix)`` (nearest neighbour, black fill), as Pillow's 16.16 fixed point
    arithmetic computes it for a matrix that does not only scale (its other path).

    Args:
        image: The image (any dtype: nearest neighbour only copies values).
        matrix: ``(a, b, c, d, e, f)``, as for :func:`affine_bicubic`.
        size: The output ``(width, height)``; the input's size when None.
    """
    a, b, c, d, e, f = (float(v) for v in matrix)
    in_height, in_width = image.shape[:2]
    width, height = (in_width, in_height) if size is None else size
    if abs(width * a + height * b + c) >= 32768.0 or abs(width * d + height * e + f) >= 32768.0:
        raise ValueError(f"Image of shape {image.shape} is too large for the warp's fixed-point arithmetic.")

    def fix(value: float) -> int:
        return math.floor(value * 65536.0 + 0.5)

    xs = np.arange(width, dtype=np.int64)[None, :]
    ys = np.arange(height, dtype=np.int64)[:, None]
    x_fixed = fix(c + a * 0.5 + b * 0.5) + ys * fix(b) + xs * fix(a)
    y_fixed = fix(f + d * 0.5 + e * 0.5) + ys * fix(e) + xs * fix(d)
    x_in, y_in = x_fixed >> 16, y_fixed >> 16
    inside = (x_in >= 0) & (x_in < in_width) & (y_in >= 0) & (y_in < in_height)
    sampled = image[np.clip(y_in, 0, in_height - 1), np.clip(x_in, 0, in_width - 1)]
    mask = inside if image.ndim == 2 else inside[..., None]
    return np.where(mask, sampled, 0).astype(image.dtype)


def _scale_coords(offset: float, step: float, count: int) -> np.ndarray:
    """Pillow's nearest source index of each of ``count`` outputs of a pure scale: ``offset`` advanced by ``step``
    one addition at a time (so its rounding drift is kept), truncated toward zero, -1 when negative."""
    positions = np.empty(count, dtype=np.float64)
    value = offset
    for i in range(count):
        positions[i] = value
        value += step
    return np.where(positions < 0.0, -1, np.trunc(positions)).astype(np.int64)


def scale_nearest(image: np.ndarray, size: tuple[int, int], matrix: tuple[float, ...]) -> np.ndarray:
    """``Image.transform(size, AFFINE, matrix)`` (nearest neighbour, black fill) for a matrix that only scales and
    shifts (``b == d == 0``): Pillow's scaling path, which also serves its nearest-neighbour ``Image.resize``.

    Args:
        image: The image (any dtype).
        size: The output ``(width, height)``.
        matrix: ``(a, 0, c, 0, e, f)``.
    """
    a, _, c, _, e, f = (float(v) for v in matrix)
    width, height = size
    in_height, in_width = image.shape[:2]
    cols = _scale_coords(c + a * 0.5, a, width)
    rows = _scale_coords(f + e * 0.5, e, height)
    inside = ((rows >= 0) & (rows < in_height))[:, None] & ((cols >= 0) & (cols < in_width))[None, :]
    sampled = image[np.clip(rows, 0, in_height - 1)][:, np.clip(cols, 0, in_width - 1)]
    mask = inside if image.ndim == 2 else inside[..., None]
    return np.where(mask, sampled, 0).astype(image.dtype)


def transform(image: np.ndarray, size: tuple[int, int], matrix: tuple[float, ...]) -> np.ndarray:
    """``Image.fromarray(image).transform(size, AFFINE, matrix, resample=BICUBIC)`` as a numpy array.

    Pillow warps bool images (mode ``1``) nearest neighbour whatever is asked, by its scaling path when the matrix
    has no shear or rotation; other images bicubically.
    """
    if image.dtype != np.bool_:
        return affine_bicubic(image, size, matrix)
    if matrix[1] == 0 and matrix[3] == 0:
        return scale_nearest(image, size, matrix)
    return affine_nearest(image, matrix, size)


def _bicubic_weight(x: np.ndarray) -> np.ndarray:
    """Pillow's resampling kernel: the a = -0.5 cubic convolution, support 2."""
    x = np.abs(x)
    near = ((-0.5 + 2.0) * x - (-0.5 + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * -0.5
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def resize_axis(image: np.ndarray, out_size: int, axis: int) -> np.ndarray:
    """``Image.resize`` (bicubic) along one axis (0: rows, 1: columns), in Pillow's arithmetic.

    Pillow widens the kernel by the reduction factor when shrinking (antialiasing) and normalises each output's
    weights; for uint8 images it rounds them to 22 fraction bits and rounds the sums, for float32 and int32 ones
    (modes ``F`` and ``I``) it sums in double precision and stores float32, or rounds half away from zero. The
    other axis, whose size is kept, is not resampled. Bool images (mode ``1``) are resized nearest neighbour, as
    Pillow always resizes them.
    """
    in_size = image.shape[axis]
    if out_size == in_size:
        return image.copy()
    if image.dtype == np.bool_:
        height, width = image.shape[:2]
        size, step = ((out_size, height), in_size / out_size) if axis == 1 else ((width, out_size), in_size / out_size)
        matrix = (step, 0.0, 0.0, 0.0, 1.0, 0.0) if axis == 1 else (1.0, 0.0, 0.0, 0.0, step, 0.0)
        return scale_nearest(image, size, matrix)
    scale = in_size / out_size
    filter_scale = max(scale, 1.0)
    support = 2.0 * filter_scale
    ksize = int(math.ceil(support)) * 2 + 1
    weights = np.zeros((out_size, ksize), dtype=np.float64)
    starts = np.zeros(out_size, dtype=np.int64)
    for out in range(out_size):
        centre = (out + 0.5) * scale
        low = max(int(centre - support + 0.5), 0)  # int(): truncation toward zero, as C's cast
        high = min(int(centre + support + 0.5), in_size)
        taps = _bicubic_weight((np.arange(low, high) - centre + 0.5) * (1.0 / filter_scale))
        total = taps.sum()
        if total != 0.0:
            taps = taps / total
        weights[out, :high - low] = taps
        starts[out] = low
    fixed = image.dtype == np.uint8
    if fixed:
        scaled = weights * (1 << _PRECISION_BITS)
        weights = np.where(scaled < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5))
    work = np.int64 if fixed else np.float64
    moved = np.moveaxis(image, axis, 0).astype(work)
    padded = np.concatenate([moved, np.zeros((ksize,) + moved.shape[1:], dtype=work)])
    acc = np.full((out_size,) + moved.shape[1:], 1 << (_PRECISION_BITS - 1) if fixed else 0, dtype=work)
    for k in range(ksize):  # tap by tap, the order of Pillow's sums
        tap = weights[:, k].astype(work).reshape((out_size,) + (1,) * (moved.ndim - 1))
        acc += padded[starts + k] * tap
    if fixed:
        out_values = np.clip(acc >> _PRECISION_BITS, 0, 255)
    elif image.dtype == np.int32:
        out_values = np.trunc(acc + np.where(acc >= 0.0, 0.5, -0.5))  # Pillow's ROUND_UP: half away from zero
    else:
        out_values = acc
    return np.moveaxis(out_values.astype(image.dtype), 0, axis)


def rotate(image: np.ndarray, angle: float) -> np.ndarray:
    """``Image.rotate(angle)``: counter-clockwise by ``angle`` degrees about the centre, nearest neighbour, same size,
    black corners (with Pillow's exact shortcuts for multiples of 90 degrees)."""
    angle = angle % 360.0
    height, width = image.shape[:2]
    if angle == 0:
        return image.copy()
    if angle == 180:
        return image[::-1, ::-1].copy()
    if angle in (90, 270) and width == height:
        return np.rot90(image, 1 if angle == 90 else 3).copy()
    radians = -math.radians(angle)
    cos, sin = round(math.cos(radians), 15), round(math.sin(radians), 15)
    centre_x, centre_y = width / 2, height / 2
    # The inverse map (output pixel -> input position) Pillow builds, rotating about the image centre.
    offset_x = cos * -centre_x + sin * -centre_y + centre_x
    offset_y = -sin * -centre_x + cos * -centre_y + centre_y
    return affine_nearest(image, (cos, sin, offset_x, -sin, cos, offset_y))
