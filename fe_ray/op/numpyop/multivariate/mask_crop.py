"""CropNonEmptyMaskIfExists: cut a window that holds mask pixels, if the mask has any, out of an image and its masks.

Also the plumbing that lets an op choose its parameters from the mask's content (MaskDropout uses it too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.crop import Window, _Crop
from fe_ray.op.numpyop.randomness import get_rng

# The state key under which :func:`with_inputs` hands an op's inputs to its get_params.
INPUTS_KEY = "_multivariate_inputs"


def with_inputs(targets: Sequence[str], data: Any, state: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``state`` that also holds the op's inputs by target ("image", "mask", "masks").

    ``MultiVariateOp.get_params`` sees the spatial size only; ops whose parameters depend on the mask's content
    read it from there. A copy per call, so worker threads sharing the op never see each other's data, and the
    generator under ``state["rng"]`` is the same object, so draws continue the sample's stream.
    """
    items = list(data) if isinstance(data, (list, tuple)) else [data]
    return {**state, INPUTS_KEY: dict(zip(targets, items))}


def _check_ints(values: Any, name: str, op: str, minimum: int | None = None) -> list[int] | None:
    if values is None:
        return None
    if isinstance(values, (list, tuple)) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and
                                                 (minimum is None or v >= minimum) for v in values):
        return [int(v) for v in values]
    kind = "non-negative ints" if minimum == 0 else "ints"
    raise ValueError(f"{op} {name} must be None or a list of {kind}, got {values!r}.")


class CropNonEmptyMaskIfExists(_Crop):
    """Cut a ``height`` x ``width`` window holding at least one mask pixel if the mask has any, else a random one.

    A non-zero mask pixel (after ``ignore_values`` and ``ignore_channels``) is drawn uniformly, then the window is
    placed at a uniformly random offset that contains it, shifted back inside the image where it would stick out
    (which keeps the pixel inside, as the window fits the image). With ``masks_in`` the pixels of all the masks count;
    with both ``mask_in`` and ``masks_in`` only ``mask_in`` does, as in albumentations. An empty mask gives a
    uniformly placed window. Random: the draws come from the sample's generator (exact across resumes and worker
    threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Differences from FastEstimator 1.7: a missing ``mask_in``/``masks_in`` is refused when the op is built (not when
    it runs); masks are combined by "non-zero anywhere" (albumentations ORs their bits and sums channels, which fails
    on float masks).

    Args:
        height: The height of the crop.
        width: The width of the crop.
        ignore_values: Mask values that count as background besides 0 (e.g. ``[5]`` if 5 marks the background).
        ignore_channels: Channels of a ``(height, width, channels)`` mask that do not count (e.g. ``[0]`` for a
            background channel).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``height`` or ``width`` is not a positive int, ``ignore_values`` is not a list of ints,
            ``ignore_channels`` not a list of non-negative ints, or neither ``mask_in`` nor ``masks_in`` is given;
            when running, if the crop exceeds the input.
    """

    is_random = True

    def __init__(self, height: int, width: int, ignore_values: list[int] | None = None,
                 ignore_channels: list[int] | None = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, bbox_in: str | None = None, keypoints_in: str | None = None,
                 image_out: str | None = None, mask_out: str | None = None, masks_out: str | None = None,
                 bbox_out: str | None = None, keypoints_out: str | None = None, bbox_params: Any = None,
                 keypoint_params: Any = None) -> None:
        super().__init__(height, width, mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in,
                         masks_in=masks_in, bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out,
                         mask_out=mask_out, masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        if mask_in is None and masks_in is None:
            raise ValueError("CropNonEmptyMaskIfExists places its window by a mask's pixels, so it needs mask_in or "
                             "masks_in; for a window anywhere use RandomCrop.")
        self.ignore_values = _check_ints(ignore_values, "ignore_values", "CropNonEmptyMaskIfExists")
        self.ignore_channels = _check_ints(ignore_channels, "ignore_channels", "CropNonEmptyMaskIfExists", 0)

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return super().forward(data, with_inputs(self.targets, data, state))

    def _foreground(self, mask: np.ndarray) -> np.ndarray:
        """Where ``mask`` holds an object: non-zero, not an ignored value, in a channel that is not ignored."""
        if self.ignore_values is not None:
            mask = np.where(np.isin(mask, self.ignore_values), 0, mask)
        if mask.ndim == 2:
            return mask != 0
        channels = [c for c in range(mask.shape[2]) if c not in (self.ignore_channels or ())]
        return np.any(mask[..., channels] != 0, axis=-1)

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Window:
        self._check_fits(height, width)
        inputs = state[INPUTS_KEY]
        layers = [inputs["mask"]] if "mask" in inputs else list(inputs["masks"])
        foreground = np.zeros((height, width), dtype=bool)
        for layer in layers:
            foreground |= self._foreground(np.asarray(layer))
        rng = get_rng(state)
        rows, cols = np.nonzero(foreground)
        if rows.size == 0:
            return int(rng.integers(0, height - self.height + 1)), int(rng.integers(0, width - self.width + 1))
        pick = int(rng.integers(rows.size))
        left = int(cols[pick]) - int(rng.integers(0, self.width))
        top = int(rows[pick]) - int(rng.integers(0, self.height))
        return min(max(top, 0), height - self.height), min(max(left, 0), width - self.width)
