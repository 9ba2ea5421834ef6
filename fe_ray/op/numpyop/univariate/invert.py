"""InvertImg and FromFloat: deterministic pixel-value maps, as albumentations (1.4) applies them.

FastEstimator 1.7 wraps albumentations' InvertImg (``max - image``, the maximum of the image's dtype) and FromFloat
(``image * max_value`` cast to a target dtype, truncating, unclipped). Both are element-wise, so they also run on a
whole batch at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.univariate.normalize import MAX_VALUES_BY_DTYPE
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


def _known_dtypes() -> str:
    return ", ".join(str(dtype) for dtype in MAX_VALUES_BY_DTYPE)


class InvertImg(UnivariateOp):
    """Invert images: ``max - image``, the maximum being the dtype's (255 for uint8, 65535 for uint16, 4294967295
    for uint32, 1.0 for float32).

    FastEstimator's docstring speaks of uint8 images only (``255 - image``); the albumentations version it wraps
    inverts the other dtypes by their maximum, as here.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the inverted images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        TypeError: When running, if an image's dtype is not uint8, uint16, uint32 or float32.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        if data.dtype not in MAX_VALUES_BY_DTYPE:
            raise TypeError(f"InvertImg inverts images of dtype {_known_dtypes()} (by the dtype's maximum), but "
                            f"{self.inputs} has dtype {data.dtype}; convert it first (e.g. astype(np.float32) for "
                            "values in [0, 1]).")
        return (data.dtype.type(MAX_VALUES_BY_DTYPE[data.dtype]) - data).astype(data.dtype)


class FromFloat(UnivariateOp):
    """Scale float images in [0, 1] up to integers: ``(image * max_value).astype(dtype)``, ToFloat's inverse.

    The product is truncated by the cast and not clipped (as in albumentations), so values outside [0, 1] wrap
    around in the integer dtype.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the scaled images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        max_value: The multiplier; None takes the maximum of ``dtype`` (uint8: 255, uint16: 65535, uint32:
            4294967295, float32: 1).
        dtype: The dtype of the results (anything ``np.dtype`` accepts).

    Raises:
        TypeError: If ``dtype`` is not a numpy dtype.
        ValueError: If ``max_value`` is None and ``dtype`` has no known maximum (albumentations raises that when
            running; fe_ray at construction), or ``max_value`` is not a number.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 max_value: float | None = None, dtype: str | np.dtype[Any] = "uint16") -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        try:
            self.dtype = np.dtype(dtype)
        except TypeError as error:
            raise TypeError(f"FromFloat dtype must be a numpy dtype such as 'uint8' or 'uint16', got {dtype!r}.") \
                from error
        if max_value is None:
            if self.dtype not in MAX_VALUES_BY_DTYPE:
                raise ValueError(f"FromFloat cannot infer the maximum of dtype {self.dtype}; it knows "
                                 f"{_known_dtypes()}. Pass max_value=... explicitly.")
        elif isinstance(max_value, bool) or not isinstance(max_value, (int, float, np.integer, np.floating)):
            raise ValueError(f"FromFloat max_value must be a number or None, got {max_value!r}.")
        self.max_value = max_value

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        max_value = MAX_VALUES_BY_DTYPE[self.dtype] if self.max_value is None else self.max_value
        return (data * max_value).astype(self.dtype)
