"""Resize, LongestMaxSize, SmallestMaxSize and RandomScale: change the size of an image and its masks together."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.interpolation import (
    INTER_LINEAR,
    INTER_NEAREST,
    check_interpolation,
    resize_array,
)
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_range, check_size, translate_scale
from fe_ray.op.numpyop.randomness import get_rng

Size = tuple[Any, ...]  # (height, width) of the output, then the nominal scale factor where the op has one


class _Rescale(MultiVariateOp):
    """Resize to the ``(height, width)`` that :meth:`get_params` picks; the image with ``interpolation``, masks with
    nearest neighbour (so labels stay labels), as albumentations does."""

    def __init__(self, interpolation: int, mode: None | str | Iterable[str], ds_id: None | str | Iterable[str],
                 image_in: str | None, mask_in: str | None, masks_in: str | None, bbox_in: str | None,
                 keypoints_in: str | None, image_out: str | None, mask_out: str | None, masks_out: str | None,
                 bbox_out: str | None, keypoints_out: str | None, bbox_params: Any, keypoint_params: Any) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        self.interpolation = check_interpolation(interpolation, type(self).__name__)

    def apply(self, image: np.ndarray, params: Size) -> np.ndarray:
        return resize_array(image, params[0], params[1], self.interpolation)

    def apply_to_mask(self, mask: np.ndarray, params: Size) -> np.ndarray:
        return resize_array(mask, params[0], params[1], INTER_NEAREST)

    def box_map(self, params: Size, height: int, width: int) -> np.ndarray:
        return translate_scale(sx=params[1] / width, sy=params[0] / height)

    def keypoint_map(self, params: tuple[Any, ...], height: int, width: int) -> np.ndarray:
        # albumentations scales keypoints by the nominal factor (params[2]) where the op has one, not by the rounded
        # output size.
        if len(params) > 2:
            return translate_scale(sx=params[2], sy=params[2])
        return self.box_map(params, height, width)


class Resize(_Rescale):
    """Resize the image and masks to ``height`` x ``width`` (the aspect ratio may change).

    Follows ``cv2.resize``: linear interpolation aligns pixel centres and repeats edge pixels; nearest neighbour copies
    input pixel ``floor(i * in / out)``. Masks are always resized with nearest neighbour.

    Args:
        height: The height of the output.
        width: The width of the output.
        interpolation: The image's interpolation, an OpenCV flag: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR``
            (the default). OpenCV's cubic, area and Lanczos modes are not available in fe_ray.
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``height`` or ``width`` is not a positive int, or ``interpolation`` is not 0 or 1.
    """

    def __init__(self, height: int, width: int, interpolation: int = INTER_LINEAR,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(interpolation, mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out,
                         mask_out, masks_out, bbox_out, keypoints_out, bbox_params, keypoint_params)
        self.height = check_size(height, "height", "Resize")
        self.width = check_size(width, "width", "Resize")

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Size:
        return self.height, self.width


def _scaled_size(height: int, width: int, scale: float) -> tuple[int, int, float]:
    # Python's round (half to even) as albumentations uses; a side that would vanish keeps one pixel (cv2 would fail).
    # The factor rides along for the keypoints.
    return max(1, round(height * scale)), max(1, round(width * scale)), scale


class _SideRescale(_Rescale):
    """Resize keeping the aspect ratio so that one side (the one :attr:`pick` chooses) becomes ``max_size``."""

    pick: Any = max  # the side that becomes max_size: max (the longer) or min (the shorter)

    def __init__(self, max_size: int | Sequence[int] = 1024, interpolation: int = INTER_LINEAR,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(interpolation, mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out,
                         mask_out, masks_out, bbox_out, keypoints_out, bbox_params, keypoint_params)
        name = type(self).__name__
        if isinstance(max_size, (list, tuple)):
            # albumentations (under FastEstimator's op) draws one of the sizes for each sample.
            if not max_size:
                raise ValueError(f"{name} max_size must be a positive int or a non-empty list of them, got [].")
            self.max_size: int | list[int] = [check_size(size, "max_size", name) for size in max_size]
        else:
            self.max_size = check_size(max_size, "max_size", name)
        self.is_random = isinstance(self.max_size, list)  # type: ignore[misc]

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> tuple[int, int, float]:
        size = self.max_size
        if isinstance(size, list):
            size = size[int(get_rng(state).integers(len(size)))]
        return _scaled_size(height, width, size / type(self).pick(height, width))


class LongestMaxSize(_SideRescale):
    """Resize the image and masks, keeping the aspect ratio, so that the longer side becomes ``max_size``.

    The shorter side becomes ``round(side * max_size / longer side)`` (Python's rounding; at least 1 pixel, where
    OpenCV would fail). Masks are resized with nearest neighbour.

    Args:
        max_size: The length of the longer side of the output, or a list of lengths to draw one from for each sample
            (the op is then random: see :mod:`fe_ray.op.numpyop.randomness`).
        interpolation: The image's interpolation: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR`` (the default).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``max_size`` is not a positive int or a non-empty list of them, or ``interpolation`` is not 0
            or 1.
    """

    pick = max


class SmallestMaxSize(_SideRescale):
    """Resize the image and masks, keeping the aspect ratio, so that the shorter side becomes ``max_size``.

    The longer side becomes ``round(side * max_size / shorter side)`` (Python's rounding). Masks are resized with
    nearest neighbour.

    Args:
        max_size: The length of the shorter side of the output, or a list of lengths to draw one from for each
            sample (the op is then random: see :mod:`fe_ray.op.numpyop.randomness`).
        interpolation: The image's interpolation: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR`` (the default).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``max_size`` is not a positive int or a non-empty list of them, or ``interpolation`` is not 0
            or 1.
    """

    pick = min


class RandomScale(_Rescale):
    """Resize the image and masks by a factor drawn uniformly from ``scale_limit`` (the output size changes).

    A factor ``s`` gives ``int(height * s)`` x ``int(width * s)`` pixels (truncated, as albumentations does). Masks
    are resized with nearest neighbour. Random: in a Pipeline the factor comes from the sample's generator (exact
    across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        scale_limit: The factor range around 1: a number ``a`` for ``[1 - a, 1 + a]``, or a pair ``(low, high)`` for
            ``[1 + low, 1 + high]`` (albumentations adds 1 to both ends of a pair too). The factors must be positive.
        interpolation: The image's interpolation: 0 ``cv2.INTER_NEAREST`` or 1 ``cv2.INTER_LINEAR`` (the default).
        mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out, mask_out, masks_out, bbox_out,
            keypoints_out, bbox_params, keypoint_params: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (boxes and keypoints move with the
            image).

    Raises:
        ValueError: If ``scale_limit`` is not a number or an ordered pair giving positive factors, or
            ``interpolation`` is not 0 or 1; when running, if a factor would shrink a side to 0 pixels.
    """

    is_random = True

    def __init__(self, scale_limit: float | Sequence[float] = 0.1, interpolation: int = INTER_LINEAR,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(interpolation, mode, ds_id, image_in, mask_in, masks_in, bbox_in, keypoints_in, image_out,
                         mask_out, masks_out, bbox_out, keypoints_out, bbox_params, keypoint_params)
        self.scale_limit = check_positive_factors(scale_limit, "scale_limit", "RandomScale")

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> tuple[int, int, float]:
        scale = float(get_rng(state).uniform(*self.scale_limit))
        size = int(height * scale), int(width * scale)
        if min(size) < 1:
            raise ValueError(f"RandomScale drew the factor {scale:.4g}, which shrinks the {height}x{width} input "
                             f"{self.inputs} to {size[0]}x{size[1]} pixels; raise the lower end of scale_limit "
                             f"(now {self.scale_limit[0] - 1:.4g}).")
        return size[0], size[1], scale  # the factor rides along for the keypoints


def check_positive_factors(scale_limit: Any, name: str, op: str) -> tuple[float, float]:
    """The scale factors ``1 + scale_limit`` (see :func:`check_range`), or ValueError unless both are positive."""
    low, high = check_range(scale_limit, name, op, bias=1.0)
    if low <= 0:
        raise ValueError(f"{op} {name}={scale_limit!r} gives scale factors [{low:.4g}, {high:.4g}], but they must be "
                         "positive: a number a must be below 1, a pair (low, high) must have low > -1.")
    return low, high
