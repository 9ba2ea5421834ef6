"""PadIfNeeded: pad an image and its masks up to a minimum height and width, with OpenCV's border modes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.border import (
    BORDER_CONSTANT,
    BORDER_REFLECT_101,
    NUMPY_PAD_MODES,
    FillValue,
    check_border_mode,
    fill_array,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_size, translate_scale

Padding = tuple[int, int, int, int]  # (top, bottom, left, right)


def pad_array(data: np.ndarray, padding: Padding, border_mode: int, value: FillValue) -> np.ndarray:
    """Pad the first two axes of ``data`` by ``padding`` with OpenCV ``border_mode`` semantics.

    A constant border takes ``value`` (None: 0), which may hold one number per channel.
    """
    top, bottom, left, right = padding
    if border_mode != BORDER_CONSTANT:
        widths = [(top, bottom), (left, right)] + [(0, 0)] * (data.ndim - 2)
        return np.pad(data, widths, mode=NUMPY_PAD_MODES[border_mode])  # type: ignore[call-overload]
    # Built by hand rather than with np.pad, whose constant_values cannot differ per channel.
    height, width = data.shape[:2]
    out = np.empty((height + top + bottom, width + left + right, *data.shape[2:]), dtype=data.dtype)
    out[...] = fill_array(value, data.dtype)
    out[top:top + height, left:left + width] = data
    return out


class PadIfNeeded(MultiVariateOp):
    """Pad the image and masks to at least ``min_height`` x ``min_width``, evenly on both sides.

    A side short by ``d`` pixels gets ``d // 2`` before and the rest after (top/bottom, left/right); a side already
    long enough is left alone.

    Args:
        min_height: The smallest height of the result.
        min_width: The smallest width of the result.
        border_mode: How to fill the border, an OpenCV flag: 0 ``cv2.BORDER_CONSTANT`` (``value`` / ``mask_value``),
            1 ``BORDER_REPLICATE`` (repeat the edge pixel), 2 ``BORDER_REFLECT`` (mirror, edge included), 3
            ``BORDER_WRAP`` (tile) or 4 ``BORDER_REFLECT_101`` (mirror around the edge pixel; the default).
        value: The image's fill for a constant border (None: 0); a number or one per channel.
        mask_value: The masks' fill for a constant border (None: 0).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If a minimum size is not a positive int or ``border_mode`` is not a known flag.
    """

    def __init__(self, min_height: int = 1024, min_width: int = 1024, border_mode: int = BORDER_REFLECT_101,
                 value: FillValue = None, mask_value: FillValue = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        self.min_height = check_size(min_height, "min_height", "PadIfNeeded")
        self.min_width = check_size(min_width, "min_width", "PadIfNeeded")
        self.border_mode = check_border_mode(border_mode, "PadIfNeeded")
        self.value, self.mask_value = value, mask_value

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Padding:
        short_h, short_w = max(0, self.min_height - height), max(0, self.min_width - width)
        return short_h // 2, short_h - short_h // 2, short_w // 2, short_w - short_w // 2

    def apply(self, image: np.ndarray, params: Padding) -> np.ndarray:
        return pad_array(image, params, self.border_mode, self.value)

    def apply_to_mask(self, mask: np.ndarray, params: Padding) -> np.ndarray:
        return pad_array(mask, params, self.border_mode, self.mask_value)

    def box_map(self, params: Padding, height: int, width: int) -> np.ndarray:
        return translate_scale(tx=params[2], ty=params[0])  # boxes keep their pixels; the border holds no copies
