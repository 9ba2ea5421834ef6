"""MaskDropout: blank out randomly chosen objects of a mask, in the mask and in the image."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.mask_crop import INPUTS_KEY, with_inputs
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.randomness import get_rng


def label_objects(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """Number the objects of a 2-D ``mask``: 8-connected regions of one non-zero value (as ``skimage.measure.label``
    finds them, which albumentations uses).

    Returns:
        The labels (0 for background, objects from 1) and the number of objects.
    """
    from scipy import ndimage  # scipy comes with scikit-learn; imported here so the module loads without it

    labels = np.zeros(mask.shape, dtype=np.int64)
    count = 0
    eight_neighbours = np.ones((3, 3), dtype=bool)
    for value in np.unique(mask[mask != 0]):
        # Regions of different values are different objects even where they touch, so each value is labelled alone.
        regions, found = ndimage.label(mask == value, structure=eight_neighbours)
        labels[regions > 0] = regions[regions > 0] + count
        count += int(found)
    return labels, count


def _check_max_objects(max_objects: Any) -> tuple[int, int]:
    def count(value: Any) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0

    if count(max_objects):
        # A number n means between 1 and n objects (0 gives "0 or 1"), as albumentations reads it.
        return min(1, int(max_objects)), max(1, int(max_objects))
    if isinstance(max_objects, (list, tuple)) and len(max_objects) == 2 and all(count(v) for v in max_objects) and \
            max_objects[0] <= max_objects[1]:
        return int(max_objects[0]), int(max_objects[1])
    raise ValueError(f"MaskDropout max_objects must be a non-negative int n (for 1 to n objects) or a pair (low, high) "
                     f"of non-negative ints with low <= high, got {max_objects!r}.")


class MaskDropout(MultiVariateOp):
    """Pick some objects of the mask at random and fill their pixels in the image (``image_fill_value``) and in the
    mask and masks (``mask_fill_value``).

    The objects are the 8-connected regions of one non-zero value in ``mask_in``, which must have one channel
    (``(height, width)`` or ``(height, width, 1)``). Their number is drawn uniformly from ``max_objects`` (at most
    the number present), and that many distinct objects are chosen uniformly. ``masks_in`` are filled at the same
    pixels. Random: the draws come from the sample's generator (exact across resumes and worker threads, see
    :mod:`fe_ray.op.numpyop.randomness`).

    Differences from FastEstimator 1.7: ``image_fill_value="inpaint"`` (OpenCV's Navier-Stokes inpainting) is not
    available; ``mask_in`` is required when the op is built (FastEstimator fails when it runs).

    Args:
        max_objects: The most objects to drop: an int n for 1 to n, or a pair ``(low, high)``.
        image_fill_value: The value the image takes at the dropped objects' pixels.
        mask_fill_value: The value the mask(s) take there.
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`.

    Raises:
        ValueError: If ``mask_in`` is not given, ``max_objects`` is malformed, or a fill value is not a number
            ("inpaint" included); when running, if the mask has several channels.
    """

    is_random = True

    def __init__(self, max_objects: int | Sequence[int] = 1, image_fill_value: int | float | str = 0,
                 mask_fill_value: int | float = 0, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, image_out: str | None = None, mask_out: str | None = None,
                 masks_out: str | None = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         image_out=image_out, mask_out=mask_out, masks_out=masks_out)
        if mask_in is None:
            raise ValueError("MaskDropout finds the objects to drop in mask_in, so it needs mask_in (masks_in are "
                             "only filled alongside).")
        self.max_objects = _check_max_objects(max_objects)
        if isinstance(image_fill_value, str) and image_fill_value == "inpaint":
            raise ValueError("MaskDropout image_fill_value='inpaint' (OpenCV inpainting) is not available in fe_ray; "
                             "use a number such as 0.")
        for name, value in (("image_fill_value", image_fill_value), ("mask_fill_value", mask_fill_value)):
            if not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
                raise ValueError(f"MaskDropout {name} must be a number, got {value!r}.")
        self.image_fill_value: float = image_fill_value  # type: ignore[assignment]  # "inpaint" refused above
        self.mask_fill_value: float = mask_fill_value

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return super().forward(data, with_inputs(self.targets, data, state))

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> np.ndarray | None:
        mask = np.asarray(state[INPUTS_KEY]["mask"])
        if mask.ndim == 3:
            if mask.shape[2] != 1:
                raise ValueError(f"MaskDropout needs a one-channel mask {self.inputs[self.targets.index('mask')]!r} "
                                 f"to find objects in, got shape {mask.shape}.")
            mask = mask[..., 0]
        labels, count = label_objects(mask)
        if count == 0:
            return None
        rng = get_rng(state)
        drop = min(int(rng.integers(self.max_objects[0], self.max_objects[1] + 1)), count)
        if drop == 0:
            return None
        chosen = rng.choice(count, size=drop, replace=False) + 1
        return np.isin(labels, chosen)

    @staticmethod
    def _fill(data: np.ndarray, dropped: np.ndarray | None, value: float) -> np.ndarray:
        out = data.copy()
        if dropped is not None:
            out[dropped] = value  # a (height, width) selection fills every channel of those pixels
        return out

    def apply(self, image: np.ndarray, params: np.ndarray | None) -> np.ndarray:
        return self._fill(image, params, self.image_fill_value)

    def apply_to_mask(self, mask: np.ndarray, params: np.ndarray | None) -> np.ndarray:
        return self._fill(mask, params, self.mask_fill_value)
