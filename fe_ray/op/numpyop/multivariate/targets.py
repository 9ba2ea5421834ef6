"""Bounding boxes and keypoints for the multivariate ops: FastEstimator's (albumentations') ``bbox_params`` /
``keypoint_params``, their formats, and how boxes and points move with an op's pixel map and are filtered after it.

Boxes are kept as albumentations keeps them internally (normalized corners, extra columns after), points as
``(x, y, angle in radians, scale, *extra)`` in pixels; :class:`~fe_ray.op.numpyop.multivariate.multivariate.
MultiVariateOp` converts on the way in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

KEYPOINT_FORMATS = ("xy", "yx", "xya", "xys", "xyas", "xysa")
# The box formats of albumentations' BboxParams, which FastEstimator's ops take.
BBOX_FORMATS = ("pascal_voc", "coco", "albumentations", "yolo")
# The ops that move bounding boxes (exactly, by an axis-aligned map: those defining box_map); the others refuse them.
BBOX_OPS = ("BBoxSafeRandomCrop", "CenterCrop", "Crop", "CropNonEmptyMaskIfExists", "Flip", "HorizontalFlip",
            "LongestMaxSize", "PadIfNeeded", "RandomCrop", "RandomCropNearBBox", "RandomResizedCrop", "RandomRotate90",
            "RandomScale", "RandomSizedBBoxSafeCrop", "RandomSizedCrop", "Resize", "SmallestMaxSize", "Transpose",
            "VerticalFlip")
# The ops that move keypoints (as in albumentations, the box-safe crops do not take keypoints).
KEYPOINT_OPS = tuple(op for op in BBOX_OPS if op not in ("BBoxSafeRandomCrop", "RandomSizedBBoxSafeCrop"))

Box = tuple[Any, ...]  # (x_min, y_min, x_max, y_max, *extra columns) in albumentations' normalized corners


@dataclass(frozen=True)
class BoxParams:
    """How an op reads, filters and writes bounding boxes (the parts of albumentations' ``BboxParams`` fe_ray uses).

    Attributes:
        format: ``"pascal_voc"`` (pixel corners), ``"coco"`` (pixel corner, width, height), ``"albumentations"``
            (corners as fractions of the image size) or ``"yolo"`` (centre, width, height as fractions).
        min_area: Boxes whose visible area (pixels, after the transform) is below this are dropped.
        min_visibility: Boxes keeping less than this fraction of their transformed area inside the image are dropped.
        min_width: Boxes whose visible width (pixels) is below this are dropped.
        min_height: Boxes whose visible height (pixels) is below this are dropped.
    """

    format: str
    min_area: float = 0.0
    min_visibility: float = 0.0
    min_width: float = 0.0
    min_height: float = 0.0


def parse_bbox_params(value: Any, op: str) -> BoxParams:
    """Read FastEstimator's ``bbox_params``: a format name, a dict of ``BboxParams`` arguments, or an object with
    ``BboxParams``' attributes (such as an albumentations ``BboxParams``).

    Raises:
        ValueError: If the format is unknown, ``label_fields`` is given, or a threshold is not a number.
    """
    names = ("format", "label_fields", "min_area", "min_visibility", "min_width", "min_height",
             "check_each_transform")
    # FastEstimator hands albumentations only the op's keys, so named label fields can never reach it there.
    fields = _param_fields(value, names, "bbox_params", "BboxParams", BBOX_FORMATS, op,
                           "put each box's labels in its extra columns, e.g. [x_min, y_min, x_max, y_max, label]; "
                           "they are kept with the box.")
    thresholds = {}
    for name in ("min_area", "min_visibility", "min_width", "min_height"):
        number = fields.get(name, 0.0)
        if not isinstance(number, (int, float, np.number)) or isinstance(number, bool):
            raise ValueError(f"{op} bbox_params {name} must be a number, got {number!r}.")
        thresholds[name] = float(number)
    return BoxParams(format=fields["format"], **thresholds)


def _check_box(box: Box, source: Any) -> None:
    """Raise ValueError unless a normalized box lies in the image and is not empty (albumentations' check)."""
    for name, value in zip(("x_min", "y_min", "x_max", "y_max"), box[:4]):
        if not 0 <= value <= 1 and not np.isclose(value, 0) and not np.isclose(value, 1):
            raise ValueError(f"Bounding box {source!r} has {name} outside the image (as a fraction of its size: "
                             f"{value}); boxes must lie within the image.")
    if box[2] <= box[0] or box[3] <= box[1]:
        raise ValueError(f"Bounding box {source!r} is empty: its x_max must exceed x_min and y_max exceed y_min.")


def boxes_to_normalized(boxes: Any, fmt: str, height: int, width: int, op: str) -> list[Box]:
    """Turn boxes of format ``fmt`` on a ``height`` x ``width`` image into normalized corners (extra columns kept).

    Raises:
        ValueError: If a box has fewer than 5 columns (FastEstimator needs the label columns), lies outside the image
            or is empty.
    """
    result = []
    for box in boxes:
        values = tuple(box)
        if len(values) < 5:
            raise ValueError(f"{op} needs each bounding box as [4 coordinates, label, ...] (as FastEstimator, which "
                             f"takes no label_fields), got {box!r}; add the label as a fifth column.")
        a, b, c, d = (float(v) for v in values[:4])
        if fmt == "yolo":
            if any(not 0 < v <= 1 for v in (a, b, c, d)):
                raise ValueError(f"{op} got the yolo box {box!r}; yolo coordinates must lie in (0, 1].")
            corners = (a - c / 2, b - d / 2, a - c / 2 + c, b - d / 2 + d)
        elif fmt == "coco":
            corners = (a / width, b / height, (a + c) / width, (b + d) / height)
        elif fmt == "pascal_voc":
            corners = (a / width, b / height, c / width, d / height)
        else:
            corners = (a, b, c, d)
        _check_box(corners, box)
        result.append(corners + values[4:])
    return result


def boxes_from_normalized(boxes: list[Box], fmt: str, height: int, width: int) -> list[Box]:
    """Turn normalized corners (with extra columns) into boxes of format ``fmt`` on a ``height`` x ``width`` image."""
    result = []
    for box in boxes:
        x0, y0, x1, y1 = box[:4]
        if fmt == "yolo":
            coords = ((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0)
        elif fmt == "albumentations":
            coords = (x0, y0, x1, y1)
        else:
            x0, x1, y0, y1 = x0 * width, x1 * width, y0 * height, y1 * height
            coords = (x0, y0, x1 - x0, y1 - y0) if fmt == "coco" else (x0, y0, x1, y1)
        result.append(tuple(float(v) for v in coords) + tuple(box[4:]))
    return result


def move_boxes(boxes: list[Box], matrix: np.ndarray, in_size: tuple[int, int], out_size: tuple[int, int]) -> list[Box]:
    """Map normalized boxes through the axis-aligned pixel map ``matrix`` (2x3, ``[x', y'] = M @ [x, y, 1]``) from an
    ``in_size`` (height, width) image to an ``out_size`` one; flips and turns reorder the corners."""
    (in_h, in_w), (out_h, out_w) = in_size, out_size
    result = []
    for box in boxes:
        corners = np.array([[box[0] * in_w, box[2] * in_w], [box[1] * in_h, box[3] * in_h], [1.0, 1.0]])
        (xa, xb), (ya, yb) = matrix @ corners
        result.append((min(xa, xb) / out_w, min(ya, yb) / out_h, max(xa, xb) / out_w, max(ya, yb) / out_h) +
                      tuple(box[4:]))
    return result


def filter_boxes(boxes: list[Box], params: BoxParams, height: int, width: int) -> list[Box]:
    """Clip normalized boxes to the image and drop those failing ``params``' thresholds (albumentations' rules:
    visibility is the clipped area over the transformed box's area; boxes with no visible area always go)."""
    result = []
    for box in boxes:
        area = (box[2] - box[0]) * width * (box[3] - box[1]) * height
        clipped = tuple(float(np.clip(v, 0.0, 1.0)) for v in box[:4])
        box_w, box_h = (clipped[2] - clipped[0]) * width, (clipped[3] - clipped[1]) * height
        visible = box_w * box_h
        if visible != 0 and visible >= params.min_area and visible / area >= params.min_visibility and \
                box_w >= params.min_width and box_h >= params.min_height:
            result.append(clipped + tuple(box[4:]))
    return result


@dataclass(frozen=True)
class PointParams:
    """How an op reads, filters and writes keypoints (albumentations' ``KeypointParams`` without label fields).

    Attributes:
        format: The order of a keypoint's values: ``x``, ``y`` and optionally ``a`` (angle) and ``s`` (scale), one of
            ``KEYPOINT_FORMATS``; extra values after them are kept with the keypoint.
        remove_invisible: Whether keypoints outside the output are dropped (and those outside the input refused).
        angle_in_degrees: Whether angles are in degrees (else radians).
    """

    format: str
    remove_invisible: bool = True
    angle_in_degrees: bool = True


Point = tuple[Any, ...]  # (x, y, angle in radians in [0, 2 pi), scale, *extra values)


def parse_keypoint_params(value: Any, op: str) -> PointParams:
    """Read FastEstimator's ``keypoint_params``: a format name, a dict of ``KeypointParams`` arguments, or an object
    with ``KeypointParams``' attributes (such as an albumentations ``KeypointParams``).

    Raises:
        ValueError: If the format is unknown, ``label_fields`` is given, or a flag is not a bool.
    """
    names = ("format", "label_fields", "remove_invisible", "angle_in_degrees", "check_each_transform")
    fields = _param_fields(value, names, "keypoint_params", "KeypointParams", KEYPOINT_FORMATS, op,
                           "put each keypoint's labels after its coordinates, e.g. [x, y, label]; they are kept with "
                           "the keypoint.")
    flags = {}
    for name in ("remove_invisible", "angle_in_degrees"):
        flag = fields.get(name, True)
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"{op} keypoint_params {name} must be a bool, got {flag!r}.")
        flags[name] = bool(flag)
    return PointParams(format=fields["format"], **flags)


def _check_point(point: Point, height: int, width: int, source: Any, op: str) -> None:
    if not 0 <= point[0] < width or not 0 <= point[1] < height:
        raise ValueError(f"{op} got the keypoint {source!r} outside the {height}x{width} image (x must lie in [0, "
                         f"{width}), y in [0, {height})); drop it first, or set remove_invisible=False in "
                         "keypoint_params.")


def points_to_internal(points: Any, params: PointParams, height: int, width: int, op: str) -> list[Point]:
    """Turn keypoints of ``params.format`` into ``(x, y, angle in radians in [0, 2 pi), scale, *extra)``.

    Raises:
        ValueError: If a keypoint has too few values, or (with ``remove_invisible``) lies outside the image.
    """
    fmt, result = params.format, []
    for point in points:
        values = tuple(point)
        if len(values) < len(fmt):
            raise ValueError(f"{op} needs each keypoint as {list(fmt)} (keypoint_params format {fmt!r}) followed by "
                             f"any extra values, got {point!r}.")
        named = dict(zip(fmt, values))
        angle = float(named.get("a", 0.0))
        angle = (math.radians(angle) if params.angle_in_degrees else angle) % (2 * math.pi)
        internal = (named["x"], named["y"], angle, named.get("s", 0.0)) + values[len(fmt):]
        if params.remove_invisible:
            _check_point(internal, height, width, point, op)
        result.append(internal)
    return result


def points_from_internal(points: list[Point], params: PointParams) -> list[Point]:
    """Turn ``(x, y, angle, scale, *extra)`` keypoints into ``params.format`` (angles in [0, 360) or [0, 2 pi))."""
    result = []
    for point in points:
        angle = point[2] % (2 * math.pi)
        named = {"x": float(point[0]), "y": float(point[1]),
                 "a": math.degrees(angle) if params.angle_in_degrees else angle, "s": float(point[3])}
        result.append(tuple(named[name] for name in params.format) + tuple(point[4:]))
    return result


def move_points(points: list[Point], matrix: np.ndarray) -> list[Point]:
    """Map keypoints through the axis-aligned map ``matrix`` (2x3, pixel-index coordinates). Angles turn with the
    map's flips and quarter turns (its signed axis permutation) and ignore its stretch; scales grow by the larger
    stretch, as albumentations does."""
    linear = matrix[:, :2]
    turn = np.sign(linear)
    stretch = float(np.abs(linear).sum(axis=1).max())
    result = []
    for point in points:
        x, y = matrix @ np.array([float(point[0]), float(point[1]), 1.0])
        dx, dy = turn @ np.array([math.cos(point[2]), math.sin(point[2])])
        result.append((float(x), float(y), math.atan2(dy, dx) % (2 * math.pi), point[3] * stretch) +
                      tuple(point[4:]))
    return result


def filter_points(points: list[Point], params: PointParams, height: int, width: int) -> list[Point]:
    """Drop keypoints outside a ``height`` x ``width`` output when ``params.remove_invisible``."""
    if not params.remove_invisible:
        return points
    return [point for point in points if 0 <= point[0] < width and 0 <= point[1] < height]


def _param_fields(value: Any, names: tuple[str, ...], arg: str, cls: str, formats: tuple[str, ...], op: str,
                  labels_fix: str) -> dict[str, Any]:
    """The fields of a ``bbox_params`` / ``keypoint_params`` value: a format name, a dict of albumentations'
    arguments, or an object with them as attributes (albumentations' ``BboxParams`` / ``KeypointParams``).

    Raises:
        ValueError: If ``value`` is none of those, has unknown keys or an unknown format, or names label fields.
    """
    if isinstance(value, str):
        fields: dict[str, Any] = {"format": value}
    elif isinstance(value, dict):
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"{op} {arg} has unknown keys {unknown}; the keys are {list(names)}.")
        fields = dict(value)
    elif hasattr(value, "format"):
        fields = {name: getattr(value, name) for name in names if hasattr(value, name)}
    else:
        raise ValueError(f"{op} {arg} must be a format name {list(formats)}, a dict of {cls} arguments or a {cls}, "
                         f"got {value!r}.")
    if fields.get("format") not in formats:
        raise ValueError(f"{op} {arg} format must be one of {list(formats)}, got {fields.get('format')!r}.")
    if fields.get("label_fields"):
        raise ValueError(f"{op} {arg} label_fields={fields['label_fields']!r} is not supported (as in FastEstimator, "
                         f"which cannot pass the fields): {labels_fix}")
    return fields
