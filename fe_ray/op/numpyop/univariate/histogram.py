"""AutoContrast: stretch each channel's histogram to the full uint8 range with Pillow's arithmetic (deterministic).

FastEstimator implements it with Pillow's ``ImageOps.autocontrast``; the lookup tables here are Pillow's (see
:mod:`fe_ray.op.numpyop.univariate._pillow`), so the images are equal, without needing Pillow. RUA's Pillow Equalize
(:class:`fe_ray.op.numpyop.univariate.rua.Equalize`) shares the base class.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.univariate._image import check_dtype
from fe_ray.op.numpyop.univariate._pillow import autocontrast
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


class PillowImageOp(UnivariateOp):
    """A deterministic op on uint8 gray or RGB images (Pillow's ``ImageOps`` refuses RGBA), one image at a time.

    Subclasses implement :meth:`transform`; a batch is transformed sample by sample (each image's own histogram).
    ``set_rua_level`` does nothing: the op has no strength to scale.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)

    def set_rua_level(self, magnitude_coef: float) -> None:
        """Accept RUA's strength (``magnitude_coef`` in [0, 1]) and ignore it: the op has no parameter to scale."""

    def apply(self, data: np.ndarray, params: Any) -> np.ndarray:
        name = type(self).__name__
        check_dtype(data, (np.uint8,), name, self.inputs)
        if not (data.ndim == 2 or (data.ndim == 3 and data.shape[-1] in (1, 3))):
            raise ValueError(f"{name} needs a grayscale (height, width[, 1]) or RGB (height, width, 3) image, as "
                             f"Pillow's ImageOps does; {self.inputs} has shape {data.shape}.")
        return self.transform(data)

    def apply_batch(self, data: np.ndarray) -> np.ndarray:
        return np.stack([self.apply(sample, None) for sample in data]) if len(data) else data

    def transform(self, data: np.ndarray) -> np.ndarray:
        """Transform one checked image."""
        raise NotImplementedError


class AutoContrast(PillowImageOp):
    """Stretch each channel of uint8 images linearly so its darkest value becomes 0 and its brightest 255.

    A channel with a single value is left as is. Values go through Pillow's table ``int(v * 255 / (hi - lo) -
    lo * 255 / (hi - lo))``, as ``ImageOps.autocontrast`` (which FastEstimator uses) builds it. Deterministic, so
    RUA's ``set_rua_level`` leaves it unchanged.

    fe_ray also takes ``(height, width, 1)`` images, which Pillow (so FastEstimator) rejects.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the modified images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).

    Raises:
        ValueError: When running, if an image is not grayscale or RGB.
        TypeError: When running, if an image is not uint8.
    """

    def transform(self, data: np.ndarray) -> np.ndarray:
        return autocontrast(data)
