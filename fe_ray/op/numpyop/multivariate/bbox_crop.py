"""BBoxSafeRandomCrop, RandomSizedBBoxSafeCrop and RandomCropNearBBox: crops placed by bounding boxes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.interpolation import INTER_LINEAR
from fe_ray.op.numpyop.multivariate.multivariate import Box, MultiVariateOp, translate_scale
from fe_ray.op.numpyop.multivariate.resized_crop import _ResizedCrop
from fe_ray.op.numpyop.randomness import get_rng

Window = tuple[int, int, int, int]  # (top, left, height, width) of the crop


def _check_fraction(value: Any, name: str, op: str) -> float:
    if not isinstance(value, (int, float, np.number)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{op} {name} must be a number in [0, 1], got {value!r}.")
    return float(value)


def safe_window(height: int, width: int, boxes: list[Box] | None, erosion_rate: float,
                rng: np.random.Generator) -> Window:
    """A random window of a ``height`` x ``width`` image holding the union of the (normalized) boxes, each shrunk by
    ``erosion_rate`` first (albumentations' BBoxSafeRandomCrop recipe: the window reaches from a random point between
    the image's top-left corner and the union's to a random point between the union's bottom-right corner and the
    image's). Without boxes, a random window of the image's aspect ratio and at least ``1 - erosion_rate`` of its
    height."""
    if not boxes:
        eroded = int(height * (1.0 - erosion_rate))
        crop_h = height if eroded >= height else int(rng.integers(eroded, height + 1))
        crop_w = int(crop_h * width / height)
        h_start, w_start = float(rng.random()), float(rng.random())
    else:
        x0, y0, x1, y1 = 1.0, 1.0, 0.0, 0.0
        for box in boxes:
            box_w, box_h = box[2] - box[0], box[3] - box[1]
            x0, y0 = min(x0, box[0] + erosion_rate * box_w), min(y0, box[1] + erosion_rate * box_h)
            x1, y1 = max(x1, box[2] - erosion_rate * box_w), max(y1, box[3] - erosion_rate * box_h)
        # The same four draws in the same order as albumentations, so its recipe can be checked draw for draw.
        left_f, top_f = x0 * float(rng.random()), y0 * float(rng.random())
        right_f, bottom_f = x1 + (1 - x1) * float(rng.random()), y1 + (1 - y1) * float(rng.random())
        span_w, span_h = right_f - left_f, bottom_f - top_f
        crop_h = height if span_h >= 1.0 else max(1, int(height * span_h))  # at least a pixel, where alb would fail
        crop_w = width if span_w >= 1.0 else max(1, int(width * span_w))
        h_start = float(np.clip(0.0 if span_h >= 1.0 else top_f / (1.0 - span_h), 0.0, 1.0))
        w_start = float(np.clip(0.0 if span_w >= 1.0 else left_f / (1.0 - span_w), 0.0, 1.0))
    # albumentations maps a start fraction s to the offset int((free + 1) * s), s in [0, 1].
    top = min(int((height - crop_h + 1) * h_start), height - crop_h)
    left = min(int((width - crop_w + 1) * w_start), width - crop_w)
    return top, left, crop_h, crop_w


class BBoxSafeRandomCrop(MultiVariateOp):
    """Crop a random window of the image (and masks) that keeps every bounding box whole.

    The window spans the union of the boxes (each shrunk by ``erosion_rate`` first, so boxes may be cut by up to that
    fraction) and reaches a random way towards each image edge. Without boxes it is a random window of the image's
    aspect ratio, at least ``1 - erosion_rate`` of its height. Random: in a Pipeline the draws come from the sample's
    generator (see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        erosion_rate: How much each box may shrink before the union is taken, in [0, 1].
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, image_out, mask_out, masks_out, bbox_out, bbox_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (keypoints are not supported, as in
            albumentations).

    Raises:
        ValueError: If ``erosion_rate`` is not in [0, 1], or ``bbox_in`` / ``bbox_params`` / ``image_in`` is missing.
    """

    is_random = True
    moves_keypoints = False  # as in albumentations

    def __init__(self, erosion_rate: float = 0.0, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, bbox_in: str | None = None, keypoints_in: str | None = None,
                 image_out: str | None = None, mask_out: str | None = None, masks_out: str | None = None,
                 bbox_out: str | None = None, keypoints_out: str | None = None, bbox_params: Any = None,
                 keypoint_params: Any = None) -> None:
        self.erosion_rate = _check_fraction(erosion_rate, "erosion_rate", type(self).__name__)
        _require_boxes(type(self).__name__, bbox_in, bbox_params)
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)

    def get_box_params(self, height: int, width: int, state: dict[str, Any], boxes: list[Box] | None,
                       extras: list[Any]) -> Window:
        return safe_window(height, width, boxes, self.erosion_rate, get_rng(state))

    def apply(self, image: np.ndarray, params: Window) -> np.ndarray:
        top, left, crop_h, crop_w = params
        return image[top:top + crop_h, left:left + crop_w].copy()

    def box_map(self, params: Window, height: int, width: int) -> np.ndarray:
        return translate_scale(tx=-params[1], ty=-params[0])


class RandomSizedBBoxSafeCrop(_ResizedCrop):
    """Crop a random window that keeps every bounding box whole (as :class:`BBoxSafeRandomCrop`), then resize it to
    ``height`` x ``width`` (masks with nearest neighbour).

    Args:
        height: The height of the output.
        width: The width of the output.
        erosion_rate: How much each box may shrink before the union is taken, in [0, 1].
        interpolation: The image's interpolation: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR`` (the default).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, image_out, mask_out, masks_out, bbox_out, bbox_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`.

    Raises:
        ValueError: If ``height`` / ``width`` is not a positive int, ``erosion_rate`` is not in [0, 1],
            ``interpolation`` is not 0 or 1, or ``bbox_in`` / ``bbox_params`` / ``image_in`` is missing.
    """

    moves_keypoints = False  # FastEstimator's op takes no keypoints

    def __init__(self, height: int, width: int, erosion_rate: float = 0.0, interpolation: int = INTER_LINEAR,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, image_out: str | None = None, mask_out: str | None = None,
                 masks_out: str | None = None, bbox_out: str | None = None, bbox_params: Any = None) -> None:
        self.erosion_rate = _check_fraction(erosion_rate, "erosion_rate", type(self).__name__)
        _require_boxes(type(self).__name__, bbox_in, bbox_params)
        super().__init__(height, width, interpolation, mode, ds_id, image_in, mask_in, masks_in, bbox_in, None,
                         image_out, mask_out, masks_out, bbox_out, None, bbox_params, None)

    def get_box_params(self, height: int, width: int, state: dict[str, Any], boxes: list[Box] | None,
                       extras: list[Any]) -> Window:
        return safe_window(height, width, boxes, self.erosion_rate, get_rng(state))


class RandomCropNearBBox(MultiVariateOp):
    """Crop around a given box (``cropping_bbox_in``, pixel corners ``[x_min, y_min, x_max, y_max]``) whose edges
    each move by a random whole number of pixels, up to ``max_part_shift`` of the box's height (top, bottom) or width
    (left, right); the window is then clipped to the image.

    Random: in a Pipeline the shifts come from the sample's generator (see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        cropping_bbox_in: The key of the box to crop around, in pixels (the first four values are used).
        max_part_shift: The largest shift as a fraction of the box's size: a number for both axes, or a pair
            ``(height fraction, width fraction)``; in [0, 1].
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image; the window clipped to the image, boxes and keypoints keep their pixels).

    Raises:
        ValueError: If ``max_part_shift`` is not a fraction or a pair of them; when running, if the cropping box is
            not four numbers or the window misses the image.
    """

    is_random = True

    def __init__(self, cropping_bbox_in: str, max_part_shift: float | Sequence[float] = 0.3,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        name = type(self).__name__
        if not isinstance(cropping_bbox_in, str):
            raise ValueError(f"{name} cropping_bbox_in must be a key (str), got {cropping_bbox_in!r}.")
        shifts = list(max_part_shift) if isinstance(max_part_shift, (list, tuple)) else [max_part_shift] * 2
        if len(shifts) != 2:
            raise ValueError(f"{name} max_part_shift must be a number or a pair (height, width), got "
                             f"{max_part_shift!r}.")
        self.max_part_shift = tuple(_check_fraction(v, "max_part_shift", name) for v in shifts)
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params, extra_in=[cropping_bbox_in])

    def get_box_params(self, height: int, width: int, state: dict[str, Any], boxes: list[Box] | None,
                       extras: list[Any]) -> Window:
        name = type(self).__name__
        corners = np.asarray(extras[0], dtype=float).ravel()[:4] if np.size(extras[0]) >= 4 else None
        if corners is None or not np.all(np.isfinite(corners)):
            raise ValueError(f"{name} needs the cropping box {self.inputs[-1]!r} as [x_min, y_min, x_max, y_max] "
                             f"in pixels, got {extras[0]!r}.")
        x0, y0, x1, y1 = (float(v) for v in corners)
        # Python's round (half to even), as albumentations rounds the largest shifts.
        shift_h, shift_w = round((y1 - y0) * self.max_part_shift[0]), round((x1 - x0) * self.max_part_shift[1])
        rng = get_rng(state)
        x0 -= int(rng.integers(-shift_w, shift_w + 1))
        x1 += int(rng.integers(-shift_w, shift_w + 1))
        y0 -= int(rng.integers(-shift_h, shift_h + 1))
        y1 += int(rng.integers(-shift_h, shift_h + 1))
        # Whole pixels clipped to the image; boxes move by the same whole-pixel window the image is cut to.
        left, top = int(max(0.0, x0)), int(max(0.0, y0))
        right, bottom = int(min(x1, width)), int(min(y1, height))
        if right <= left or bottom <= top:
            raise ValueError(f"{name} cropped x [{left}, {right}), y [{top}, {bottom}) around {extras[0]!r}, which "
                             f"misses the {height}x{width} input {self.inputs[0]!r}; the cropping box must overlap "
                             "the image.")
        return top, left, bottom - top, right - left

    def apply(self, image: np.ndarray, params: Window) -> np.ndarray:
        top, left, crop_h, crop_w = params
        return image[top:top + crop_h, left:left + crop_w].copy()

    def box_map(self, params: Window, height: int, width: int) -> np.ndarray:
        return translate_scale(tx=-params[1], ty=-params[0])


def _require_boxes(op: str, bbox_in: str | None, bbox_params: Any) -> None:
    if bbox_in is None or bbox_params is None:
        raise ValueError(f"{op} places its crop by the bounding boxes, so it needs bbox_in and bbox_params (with "
                         f"image_in), got bbox_in={bbox_in!r}, bbox_params={bbox_params!r}.")

