"""OpenCV's border modes (``cv2.BORDER_*`` flags, which FastEstimator programs pass) implemented with numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, BORDER_WRAP, BORDER_REFLECT_101 = 0, 1, 2, 3, 4
BORDER_NAMES = {BORDER_CONSTANT: "BORDER_CONSTANT", BORDER_REPLICATE: "BORDER_REPLICATE",
                BORDER_REFLECT: "BORDER_REFLECT", BORDER_WRAP: "BORDER_WRAP", BORDER_REFLECT_101: "BORDER_REFLECT_101"}
# np.pad's name for each mode: edge = aaa|abc, symmetric = cba|abc|cba, reflect = dcb|abcd|cba.
NUMPY_PAD_MODES = {BORDER_CONSTANT: "constant", BORDER_REPLICATE: "edge", BORDER_REFLECT: "symmetric",
                   BORDER_WRAP: "wrap", BORDER_REFLECT_101: "reflect"}

#: The fill of a constant border: None (0), a number, or one number per channel.
FillValue = None | int | float | Sequence[int] | Sequence[float]


def check_border_mode(border_mode: Any, op: str) -> int:
    """Return ``border_mode`` as an int flag, or raise ValueError listing the valid ones."""
    if isinstance(border_mode, (int, np.integer)) and not isinstance(border_mode, bool) and \
            int(border_mode) in BORDER_NAMES:
        return int(border_mode)
    choices = ", ".join(f"{flag} (cv2.{name})" for flag, name in BORDER_NAMES.items())
    raise ValueError(f"{op} border_mode must be one of {choices}; got {border_mode!r}.")


def fill_array(value: FillValue, dtype: Any) -> np.ndarray:
    """The fill ``value`` of a constant border (None: 0) as an array of ``dtype``, broadcastable over channels."""
    return np.asarray(0 if value is None else value).astype(dtype)


def border_index(index: np.ndarray, size: int, border_mode: int) -> tuple[np.ndarray, np.ndarray]:
    """Map integer coordinates along an axis of ``size`` into it, as OpenCV extrapolates a border.

    Returns:
        The in-range indices, and a mask of the coordinates that were already inside (for a constant border the
        others take the fill value; the index returned for them is only a safe placeholder).
    """
    inside = (index >= 0) & (index < size)
    if border_mode in (BORDER_CONSTANT, BORDER_REPLICATE):
        return np.clip(index, 0, size - 1), inside
    if border_mode == BORDER_WRAP:
        return index % size, inside
    if border_mode == BORDER_REFLECT:
        period = 2 * size
        folded = index % period
        return np.where(folded >= size, period - 1 - folded, folded), inside
    if size == 1:  # reflecting around the edge pixel of a 1-pixel axis only ever finds that pixel
        return np.zeros_like(index), inside
    period = 2 * size - 2
    folded = index % period
    return np.where(folded >= size, period - folded, folded), inside
