"""Helpers shared by the xai traces: argument checks, label texts for display columns, and CAM heat maps (resized
to the image, scaled to [0, 1] and coloured with the 'jet' colour map) in numpy."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_framework, to_number


def invert_mapping(label_mapping: Mapping[str, Any] | None, trace: str) -> dict[Any, str] | None:
    """FastEstimator's ``{class_string: model_output_value}`` turned into ``{model_output_value: class_string}``.

    Raises:
        ValueError: If ``label_mapping`` is not a mapping or one of its values cannot be a dict key.
    """
    if label_mapping is None:
        return None
    if not isinstance(label_mapping, Mapping):
        raise ValueError(f"{trace} label_mapping must be a dict {{class_string: model_output_value}} or None, got "
                         f"{type(label_mapping).__name__}.")
    unhashable = [name for name, value in label_mapping.items() if not isinstance(value, Hashable)]
    if unhashable:
        raise ValueError(f"{trace} label_mapping values must be hashable class values (e.g. ints), but those of "
                         f"{unhashable} are not.")
    return {value: name for name, value in label_mapping.items()}


def as_numpy(value: Any) -> np.ndarray:
    """A detached numpy copy of a tensor / array (a checkpoint or a display must not share the batch's memory)."""
    return np.array(to_number(value))


def is_channel_first(value: Any) -> bool:
    """Whether ``value`` lays images out channel-first (torch tensors do)."""
    return get_framework(value) == "torch"


def channel_last(images: np.ndarray, channel_first: bool) -> np.ndarray:
    """A batch of images (N, C, H, W) as (N, H, W, C) when ``channel_first``; other layouts are kept."""
    return np.moveaxis(images, 1, -1) if channel_first and images.ndim == 4 else images


def label_texts(values: Any, label_mapping: Mapping[Any, str] | None) -> np.ndarray:
    """One display text per sample: class indices (one-hot or score rows become their argmax), named by the
    inverted ``label_mapping`` when given (a value missing from it is shown as is)."""
    array = as_numpy(values)
    if array.ndim > 1 and array.shape[-1] > 1:
        array = np.argmax(array, axis=-1)
    array = array.reshape(len(array), -1)[:, 0] if array.ndim else array.reshape(1)
    if not label_mapping:
        return array
    return np.array([label_mapping.get(value.item(), str(value.item())) for value in array])


def _area_weights(size_in: int, size_out: int) -> np.ndarray:
    """(size_out, size_in) weights averaging the input cells each output cell covers (OpenCV's INTER_AREA for a
    reduction)."""
    edges = np.arange(size_out + 1) * (size_in / size_out)
    starts, ends = edges[:-1, None], edges[1:, None]
    cells = np.arange(size_in)[None]
    overlap = np.clip(np.minimum(ends, cells + 1) - np.maximum(starts, cells), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def resize_area(maps: np.ndarray, height: int, width: int) -> np.ndarray:
    """Shrink the last two axes of ``maps`` to ``height`` x ``width`` by area averaging."""
    rows = _area_weights(maps.shape[-2], height)
    cols = _area_weights(maps.shape[-1], width)
    return np.einsum("hi,...ij,wj->...hw", rows, maps.astype(np.float64), cols)


def fit_map(mask: np.ndarray, height: int, width: int) -> np.ndarray:
    """A 2-D CAM ``mask`` resized bilinearly to ``height`` x ``width`` (``cv2.resize``'s pixel mapping), shifted to
    start at 0 and divided by its maximum: values in [0, 1] (a flat mask becomes all 0)."""
    from fe_ray.op.numpyop.multivariate.interpolation import INTER_LINEAR, resize_array

    scaled = resize_array(np.asarray(mask, dtype=np.float64), height, width, INTER_LINEAR)
    scaled = scaled - scaled.min()
    peak = scaled.max()
    return scaled / peak if peak > 0 else scaled


def colour(maps: np.ndarray) -> np.ndarray:
    """Maps with values in [0, 1] as RGB heat maps (a trailing axis of 3, values in [0, 1]): quantised to 256
    levels and coloured with matplotlib's 'jet' map (dark blue for 0, dark red for 1), as FastEstimator does with
    OpenCV's JET map."""
    from fe_ray.util.img_data.figure import _colormap

    levels = np.uint8(255 * np.clip(maps, 0.0, 1.0))
    return np.asarray(_colormap("jet")(levels)[..., :3], dtype=np.float32)
