"""Argument conversion of fe_ray's image displays: images, masks, boxes, keypoints and texts given as numpy arrays
or torch / TensorFlow tensors become numpy values, and images are brought to uint8 RGB by FastEstimator's value-range
rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fe_ray.util.base import to_list
from fe_ray.util.img_data.figure import _colormap
from fe_ray.util.tensors import to_number


def _split_labels(value: Any) -> tuple[Any, list[str]]:
    """``value`` or ``(value, label(s))`` -> (value, labels)."""
    if isinstance(value, tuple) and len(value) == 2 and (
            isinstance(value[1], str) or (isinstance(value[1], (list, tuple)) and value[1]
                                          and all(isinstance(label, str) for label in value[1]))):
        return value[0], [str(label) for label in to_list(value[1])]
    return value, []


def _framework(value: Any) -> str:
    from fe_ray.backend import get_framework

    return get_framework(value)


def _to_array(value: Any, name: str) -> np.ndarray:
    if isinstance(value, str):
        raise TypeError(f"ImageDisplay {name} must be an array or tensor, got str {value!r}.")
    try:
        array = to_number(value)
    except Exception as err:  # noqa: BLE001 - reported with the argument's name below
        raise TypeError(f"ImageDisplay {name} must be a numpy array or a torch / TensorFlow tensor, got "
                        f"{type(value).__name__}.") from err
    if not isinstance(array, np.ndarray):
        raise TypeError(f"ImageDisplay {name} must be an array or tensor, got {type(value).__name__} {value!r}.")
    return array


def _prepare_image(image: Any) -> np.ndarray:
    shape = tuple(getattr(image, "shape", np.shape(image)))
    if len(shape) not in (2, 3):
        raise ValueError(f"ImageDisplay image must have 2 (H, W) or 3 (H, W, C; C, H, W for torch) dimensions, got "
                         f"shape {shape}.")
    is_torch = _framework(image) == "torch"
    array = _to_array(image, "image")
    if array.ndim == 3 and is_torch and array.shape[0] in (1, 3) and array.shape[2] > 3:
        array = np.moveaxis(array, 0, -1)  # torch images are channel-first (FastEstimator's rule)
    if array.ndim == 3:
        if array.shape[2] not in (1, 3):
            raise ValueError(f"ImageDisplay image must have 1 or 3 channels, got shape {tuple(array.shape)} (torch "
                             "images may be channel-first).")
        if array.shape[2] == 1:
            array = array[..., 0]
    if array.dtype.kind not in "biuf":
        raise TypeError(f"ImageDisplay image must hold numbers, got dtype {array.dtype}.")
    return array


def image_to_rgb(image: np.ndarray, color_map: str = "gray") -> np.ndarray:
    """An (H, W) or (H, W, 3) image as uint8 RGB by FastEstimator's range rules: integers are pixel values, floats in
    [0, 1], [-0.5, 0.5] or [-1, 1] are scaled from that range, any other floats per channel from min to max. Grey
    images are coloured with ``color_map``."""
    if image.dtype.kind in "iu":
        out = np.clip(image, 0, 255).astype(np.uint8)
    else:
        im = np.nan_to_num(image.astype(np.float64))
        low, high = float(im.min()), float(im.max())
        if 0 <= low <= high <= 1:
            im = im * 255
        elif -0.5 <= low < 0 < high <= 0.5:
            im = (im + 0.5) * 255
        elif -1 <= low < 0 < high <= 1:
            im = (im + 1) * 127.5
        else:  # e.g. after a Normalize op
            axes = tuple(range(im.ndim - 1)) if im.ndim == 3 else None
            low_c, high_c = im.min(axis=axes), im.max(axis=axes)
            im = (im - low_c) / np.where(high_c > low_c, high_c - low_c, 1.0) * 255
        out = np.clip(np.rint(im), 0, 255).astype(np.uint8)
    if out.ndim == 2:
        out = np.rint(_colormap(color_map)(out / 255.0)[..., :3] * 255).astype(np.uint8)
    return out


def _text(text: Any) -> str:
    if isinstance(text, bytes):
        return text.decode("utf8")
    if isinstance(text, str):
        return text
    array = _to_array(text, "text")
    if array.ndim > 1 or (array.ndim == 1 and array.size != 1):
        raise ValueError(f"ImageDisplay text must be one value (a string or a 0-d / 1-element tensor), got shape "
                         f"{tuple(array.shape)}.")
    value = array.reshape(-1)[0].item() if array.ndim else array.item()
    return value.decode("utf8") if isinstance(value, bytes) else f"{value}"


def _prepare_masks(masks: Any, image: np.ndarray | None, mask_threshold: float | None) -> tuple[list, list[str]]:
    masks, labels = _split_labels(masks)
    if masks is None:
        return [], []
    is_torch = _framework(masks) == "torch"
    array = _to_array(masks, "masks")
    if array.ndim not in (2, 3):
        raise ValueError(f"ImageDisplay masks must be 2-D (H, W), or 3-D with the masks on the last axis (first for "
                         f"torch), got shape {tuple(array.shape)}.")
    if (array.ndim == 3 and is_torch and image is not None and array.shape[1:] == image.shape[:2]
            and array.shape[:2] != image.shape[:2]):
        array = np.moveaxis(array, 0, -1)  # channel-first torch masks, recognised by the image's size
    if array.ndim == 2:
        array = array[..., None]
    if image is not None and array.shape[:2] != image.shape[:2]:
        raise ValueError(f"ImageDisplay masks of height x width {tuple(array.shape[:2])} do not match the image's "
                         f"{tuple(image.shape[:2])}.")
    array = np.moveaxis(array.astype(np.float64), -1, 0)
    if mask_threshold is not None:
        array = np.where(array > mask_threshold, 1.0, 0.0)
    if np.unique(array).size > 2:
        # Several probability maps: overlaying each would cover the image; FastEstimator keeps their maximum.
        if labels:
            raise ValueError(f"ImageDisplay mask labels {labels} need binary masks, but the masks hold continuous "
                             "values; pass mask_threshold to binarise them, or drop the labels.")
        array = array.max(axis=0, keepdims=True)
    if labels and len(labels) != len(array):
        raise ValueError(f"ImageDisplay got {len(labels)} mask labels {labels} for {len(array)} masks; give one label "
                         "per mask.")
    return list(array), labels or [""] * len(array)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) or (hasattr(value, "shape") and len(value.shape) == 0)


def _prepare_bboxes(bboxes: Any) -> list[list[Sequence[Any]]]:
    if isinstance(bboxes, (tuple, list)) and bboxes and _is_number(bboxes[0]):
        bboxes = [bboxes]  # one box given as (x0, y0, width, height[, label])
    sets = []
    for bbox in to_list(bboxes):
        if hasattr(bbox, "shape"):
            array = _to_array(bbox, "bboxes")
            if array.ndim not in (1, 2) or array.shape[-1] not in (4, 5):
                raise ValueError(f"ImageDisplay bounding box tensors must have shape (4,), (5,), (N, 4) or (N, 5): "
                                 f"(x0, y0, width, height[, label]), got shape {tuple(array.shape)}.")
            sets.append(list(array.reshape(-1, array.shape[-1])))
        elif isinstance(bbox, (tuple, list)):
            if len(bbox) not in (4, 5):
                raise ValueError(f"ImageDisplay bounding boxes need 4 or 5 elements (x0, y0, width, height[, label]), "
                                 f"got {bbox!r}.")
            sets.append([bbox])
        else:
            raise TypeError(f"ImageDisplay bboxes must be tensors or (x0, y0, width, height[, label]) sequences, got "
                            f"{type(bbox).__name__} {bbox!r}.")
    return sets


def _prepare_keypoints(keypoints: Any) -> tuple[np.ndarray | list, list[str]]:
    keypoints, labels = _split_labels(keypoints)
    if keypoints is None:
        return [], []
    array = _to_array(keypoints, "keypoints")
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"ImageDisplay keypoints must have shape (2,) or (N, 2) of (x, y), got shape "
                         f"{tuple(np.shape(keypoints))}.")
    if labels and len(labels) != len(array):
        raise ValueError(f"ImageDisplay got {len(labels)} keypoint labels {labels} for {len(array)} keypoints; give "
                         "one label per keypoint.")
    return array, labels or [""] * len(array)


def _valid_point(x: Any, y: Any) -> bool:
    try:
        x, y = float(x), float(y)
    except (TypeError, ValueError):  # None: not detected
        return False
    return bool(np.isfinite(x) and np.isfinite(y) and x >= 0 and y >= 0)

