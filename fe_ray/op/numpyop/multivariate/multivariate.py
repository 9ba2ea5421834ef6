"""The base of spatial ops that move an image, its masks, bounding boxes and keypoints together (FastEstimator's
``image_in`` / ``mask_in`` / ``bbox_in`` / ``keypoints_in`` API)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.targets import (
    BBOX_OPS,
    KEYPOINT_OPS,
    Box,
    BoxParams,
    PointParams,
    boxes_from_normalized,
    boxes_to_normalized,
    filter_boxes,
    filter_points,
    move_boxes,
    move_points,
    parse_bbox_params,
    parse_keypoint_params,
    points_from_internal,
    points_to_internal,
)
from fe_ray.op.numpyop.numpyop import NumpyOp

# The kinds of data FastEstimator's multivariate ops take, in the order their keys become the op's inputs.
TARGETS = ("image", "mask", "masks")
# The keypoint formats of albumentations' KeypointParams (x, y, a: angle, s: scale), which FastEstimator's ops take.
def translate_scale(sx: float = 1.0, sy: float = 1.0, tx: float = 0.0, ty: float = 0.0) -> np.ndarray:
    """The pixel map ``x' = sx * x + tx``, ``y' = sy * y + ty`` as a 2x3 matrix for :meth:`MultiVariateOp.box_map`."""
    return np.array([[sx, 0.0, tx], [0.0, sy, ty]])


def check_size(size: Any, name: str, op: str) -> int:
    """Return the size argument ``name`` of ``op`` as an int, or raise ValueError unless it is a positive int."""
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
        raise ValueError(f"{op} {name} must be a positive int, got {size!r}.")
    return int(size)


def check_range(limit: Any, name: str, op: str, bias: float = 0.0) -> tuple[float, float]:
    """Return the range argument ``name`` of ``op`` as ``(low, high)`` floats, offset by ``bias``.

    As in albumentations, a number ``a`` means ``(-a, a)`` and a pair ``(low, high)`` is taken as is; ``bias`` is then
    added to both ends (1 turns a scale limit ``0.1`` into the factors ``(0.9, 1.1)``).

    Raises:
        ValueError: Unless ``limit`` is a number or a pair of numbers (in either order).
    """
    def number(value: Any) -> bool:
        return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)

    bounds: tuple[float, float] | None = None
    if number(limit):
        bounds = -float(limit), float(limit)
    elif isinstance(limit, (list, tuple)) and len(limit) == 2 and all(number(v) for v in limit):
        # Either order, as albumentations' to_tuple (which FastEstimator's ops go through) sorts the pair.
        bounds = float(min(limit)), float(max(limit))
    if bounds is None:
        raise ValueError(f"{op} {name} must be a number a (for the range [-a, a]) or a pair of numbers (the range's "
                         f"ends), got {limit!r}.")
    return bounds[0] + bias, bounds[1] + bias


class MultiVariateOp(NumpyOp):
    """A spatial transform applied with the same parameters to an image, a mask, a list of masks and bounding boxes.

    Images are ``(height, width)`` or ``(height, width, channels)``; a mask is ``(height, width)`` or ``(height,
    width, channels)``; ``masks`` is a sequence of such masks (a list, or an array with the masks on axis 0). The
    transform acts on the first two axes. Random subclasses draw their parameters once per sample in
    :meth:`get_params`, so image and masks stay aligned. As in FastEstimator, ``forward`` takes and returns a list
    in the order image, mask, masks, boxes, keypoints (those given); a direct call with one bare array returns one
    array.

    Bounding boxes (``bbox_in``, with ``bbox_params`` and an ``image_in``) are moved by the ops whose pixels move by
    an axis-aligned map (see ``BBOX_OPS``), as FastEstimator's albumentations ops do: each box is ``[4 coordinates,
    label, ...]`` in the ``bbox_params`` format, its extra columns stay with it, boxes are clipped to the output and
    those failing ``bbox_params``' ``min_area`` / ``min_visibility`` / ``min_width`` / ``min_height`` are dropped. The
    boxes come back as a list of tuples (coordinates as floats, extra columns unchanged). Keypoints
    (``keypoints_in`` with ``keypoint_params``) move the same way in the ops of ``KEYPOINT_OPS``, in pixel-index
    coordinates as albumentations takes them; their angles turn with flips and quarter turns and their scales grow
    with resizes; with ``remove_invisible`` (the default) those leaving the image are dropped.

    Subclasses implement :meth:`apply` (and :meth:`apply_to_mask` when masks need other settings, e.g. another fill
    value) and, if random, set ``is_random = True`` and override :meth:`get_params`; those that move boxes override
    :meth:`box_map`.

    Args:
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        image_in: Key of the image.
        mask_in: Key of a mask, transformed like the image.
        masks_in: Key of a sequence of masks, each transformed like the image.
        bbox_in: Key of the bounding boxes (a sequence of ``[4 coordinates, label, ...]``); needs ``image_in`` and
            ``bbox_params``, and an op listed in ``BBOX_OPS``.
        keypoints_in: Key of the keypoints (a sequence of ``[x, y, ...]`` in the ``keypoint_params`` format, extra
            values kept); needs ``image_in`` and ``keypoint_params``, and an op listed in ``KEYPOINT_OPS``.
        image_out: Key to write the image to (default ``image_in``).
        mask_out: Key to write the mask to (default ``mask_in``).
        masks_out: Key to write the masks to (default ``masks_in``).
        bbox_out: Key to write the boxes to (default ``bbox_in``).
        keypoints_out: Key to write the keypoints to (default ``keypoints_in``).
        bbox_params: The boxes' format: ``"pascal_voc"``, ``"coco"``, ``"albumentations"`` or ``"yolo"``, or a dict
            / albumentations ``BboxParams`` with that ``format`` and optionally ``min_area``, ``min_visibility``,
            ``min_width``, ``min_height`` (``label_fields`` is not supported, as in FastEstimator).
        keypoint_params: The keypoints' format (one of ``KEYPOINT_FORMATS``: ``"xy"``, ``"yx"``, ``"xya"``,
            ``"xys"``, ``"xyas"``, ``"xysa"``), or a dict / albumentations ``KeypointParams`` with that ``format`` and
            optionally ``remove_invisible`` and ``angle_in_degrees`` (no ``label_fields``, as in FastEstimator).

    Raises:
        ValueError: If no input key is given, or bounding boxes / keypoints are given to an op that does not move
            them, without ``image_in`` or without ``bbox_params`` / ``keypoint_params``.
    """

    def __init__(self, mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None,
                 extra_in: Iterable[str] = ()) -> None:
        name = type(self).__name__
        self.keypoint_params: PointParams | None = None
        if keypoints_in is not None or keypoints_out is not None or keypoint_params is not None:
            # Subclasses of the supported ops inherit the support.
            if type(self).box_map is MultiVariateOp.box_map or not self.moves_keypoints:
                raise ValueError(f"{name} got keypoints_in={keypoints_in!r} / keypoints_out={keypoints_out!r} / "
                                 f"keypoint_params={keypoint_params!r}, but fe_ray moves keypoints only in "
                                 f"{', '.join(KEYPOINT_OPS)}. Transform them with a custom NumpyOp, or use one of "
                                 "those ops.")
            if keypoints_in is None or keypoint_params is None or image_in is None:
                raise ValueError(f"{name} moves keypoints given keypoints_in, keypoint_params and image_in (the "
                                 f"image sets the keypoints' frame, as in FastEstimator), got keypoints_in="
                                 f"{keypoints_in!r}, keypoint_params={keypoint_params!r}, image_in={image_in!r}.")
            self.keypoint_params = parse_keypoint_params(keypoint_params, name)
        self.bbox_params: BoxParams | None = None
        if bbox_in is not None or bbox_out is not None or bbox_params is not None:
            if type(self).box_map is MultiVariateOp.box_map:
                raise ValueError(f"{name} got bbox_in={bbox_in!r} / bbox_out={bbox_out!r} / bbox_params="
                                 f"{bbox_params!r}, but fe_ray moves bounding boxes only in {', '.join(BBOX_OPS)}. "
                                 "Transform the boxes with a custom NumpyOp, or use one of those ops.")
            if bbox_in is None or bbox_params is None or image_in is None:
                raise ValueError(f"{name} moves bounding boxes given bbox_in, bbox_params and image_in (the image "
                                 f"sets the boxes' frame, as in FastEstimator), got bbox_in={bbox_in!r}, "
                                 f"bbox_params={bbox_params!r}, image_in={image_in!r}.")
            self.bbox_params = parse_bbox_params(bbox_params, name)
        keys_in = (image_in, mask_in, masks_in)
        if all(key is None for key in keys_in):
            raise ValueError(f"{name} needs at least one of image_in, mask_in or masks_in (the key(s) to transform).")
        keys_out = (image_out or image_in, mask_out or mask_in, masks_out or masks_in)
        self.targets = [target for target, key in zip(TARGETS, keys_in) if key is not None]
        inputs = [key for key in keys_in if key is not None]
        outputs = [key for key in keys_out if key is not None]
        if self.bbox_params is not None:
            inputs.append(bbox_in)
            outputs.append(bbox_out or bbox_in)
        if self.keypoint_params is not None:
            inputs.append(keypoints_in)
            outputs.append(keypoints_out or keypoints_in)
        inputs.extend(extra_in)
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)

    moves_keypoints = True  # for the ops defining box_map; False where albumentations takes no keypoints

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Any:
        """The parameters of one sample's transform (random ones drawn from ``get_rng(state)``)."""
        return None

    def get_box_params(self, height: int, width: int, state: dict[str, Any], boxes: list[Box] | None,
                       extras: list[Any]) -> Any:
        """The parameters of one sample's transform for ops that look at the boxes (normalized corners, None without
        ``bbox_in``) or at extra inputs; :meth:`get_params` by default."""
        return self.get_params(height, width, state)

    def apply(self, image: np.ndarray, params: Any) -> np.ndarray:
        """Transform an image with the sample's ``params``."""
        raise NotImplementedError

    def apply_to_mask(self, mask: np.ndarray, params: Any) -> np.ndarray:
        """Transform a mask with the sample's ``params``; like the image by default."""
        return self.apply(mask, params)

    def box_map(self, params: Any, height: int, width: int) -> np.ndarray:
        """The 2x3 matrix taking a point ``(x, y, 1)`` of the ``height`` x ``width`` input (pixel units, origin at the
        top-left corner) to the output, for the ops in ``BBOX_OPS``."""
        raise NotImplementedError(f"{type(self).__name__} does not move bounding boxes.")

    def keypoint_map(self, params: Any, height: int, width: int) -> np.ndarray:
        """Like :meth:`box_map` for keypoints, whose coordinates albumentations takes as pixel indices (a flip
        sends ``x`` to ``width - 1 - x``); :meth:`box_map` by default, right for crops, pads and resizes."""
        return self.box_map(params, height, width)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        # The Pipeline hands a list (one value per input key); a direct call with a bare array gets one back.
        single = not isinstance(data, (list, tuple))
        items = [data] if single else list(data)
        count = len(self.targets)
        arrays = [self._checked(target, value) for target, value in zip(self.targets, items[:count])]
        height, width = self._spatial_size(arrays)
        boxes = points = None
        if self.bbox_params is not None:
            boxes = boxes_to_normalized(items[count], self.bbox_params.format, height, width, type(self).__name__)
            count += 1
        if self.keypoint_params is not None:
            points = points_to_internal(items[count], self.keypoint_params, height, width, type(self).__name__)
            count += 1
        params = self.get_box_params(height, width, state, boxes, items[count:])
        results: list[Any] = []
        for target, value in zip(self.targets, arrays):
            if target == "image":
                results.append(self.apply(value, params))
            elif target == "mask":
                results.append(self.apply_to_mask(value, params))
            else:
                masks = [self.apply_to_mask(np.asarray(mask), params) for mask in value]
                results.append(np.stack(masks) if isinstance(value, np.ndarray) else masks)
        if boxes is not None and self.bbox_params is not None:
            out_h, out_w = results[0].shape[:2]  # the image's: bbox_in needs image_in
            moved = move_boxes(boxes, self.box_map(params, height, width), (height, width), (out_h, out_w))
            kept = filter_boxes(moved, self.bbox_params, out_h, out_w)
            results.append(boxes_from_normalized(kept, self.bbox_params.format, out_h, out_w))
        if points is not None and self.keypoint_params is not None:
            out_h, out_w = results[0].shape[:2]
            moved_points = move_points(points, self.keypoint_map(params, height, width))
            results.append(points_from_internal(filter_points(moved_points, self.keypoint_params, out_h, out_w),
                                                self.keypoint_params))
        return results[0] if single and len(results) == 1 else results

    def _checked(self, target: str, value: Any) -> Any:
        shapes = [np.shape(mask) for mask in value] if target == "masks" else [np.shape(value)]
        for shape in shapes:
            if len(shape) not in (2, 3):
                key = self.inputs[self.targets.index(target)]
                raise ValueError(f"{type(self).__name__} needs {target} {key!r} of shape (height, width) or (height, "
                                 f"width, channels){' for each mask' if target == 'masks' else ''}, got {shape}.")
        return value if target == "masks" and not isinstance(value, np.ndarray) else np.asarray(value)

    def _spatial_size(self, arrays: list[Any]) -> tuple[int, int]:
        sizes = {}
        for key, target, value in zip(self.inputs, self.targets, arrays):
            for mask in (value if target == "masks" else [value]):
                sizes.setdefault(tuple(np.shape(mask)[:2]), key)
        if len(sizes) != 1:
            raise ValueError(f"{type(self).__name__} transforms its inputs together, so they must share height and "
                             f"width; got {', '.join(f'{key!r}: {size}' for size, key in sizes.items())}.")
        height, width = next(iter(sizes))
        return int(height), int(width)
