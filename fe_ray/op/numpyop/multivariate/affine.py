"""Affine: a random affine map (scale, translation, rotation, shear) of an image and its masks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.border import BORDER_CONSTANT, BORDER_REPLICATE
from fe_ray.op.numpyop.multivariate.interpolation import INTER_LINEAR, INTER_NEAREST, Coords, sample
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.randomness import get_rng

# FastEstimator passes {'constant': 0, 'reflect': 1} to albumentations as an OpenCV border flag, and flag 1 is
# cv2.BORDER_REPLICATE: its 'reflect' repeats the edge pixel. fe_ray keeps that behaviour.
_BORDERS = {"constant": BORDER_CONSTANT, "reflect": BORDER_REPLICATE}
_INTERPOLATIONS = {"nearest_neighbor": INTER_NEAREST, "bilinear": INTER_LINEAR}
_ROTATE_METHODS = ("largest_box", "ellipse")

Number = int | float
Range = None | Number | tuple[Number, Number] | list[Number]


def affine_sources(matrix: np.ndarray, height: int, width: int) -> Coords:
    """Where each pixel of a ``height`` x ``width`` output samples the input under the forward 3x3 ``matrix``.

    ``matrix`` maps input ``(x, y, 1)`` (x right, y down) to output coordinates, as ``cv2.warpAffine``'s ``M``; the
    sources are its inverse applied to the output grid.
    """
    inverse = np.linalg.inv(matrix)
    rows, cols = np.mgrid[0:height, 0:width].astype(np.float64)
    src_x = inverse[0, 0] * cols + inverse[0, 1] * rows + inverse[0, 2]
    src_y = inverse[1, 0] * cols + inverse[1, 1] * rows + inverse[1, 2]
    return src_y, src_x


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def _fixed_or_range(value: Any, name: str, default: float) -> tuple[float, float]:
    """An albumentations-style range: None -> ``default``, a number -> that value always, a pair -> uniform."""
    if value is None:
        return default, default
    if _number(value):
        return float(value), float(value)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) for v in value):
        return float(min(value)), float(max(value))  # either order: a uniform draw between the two, as in FE
    raise ValueError(f"Affine {name} must be None, a number (used as is) or a pair of numbers to draw between, got "
                     f"{value!r}.")


def _affine(scale: tuple[float, float] = (1.0, 1.0), rotation: float = 0.0, shear: float = 0.0,
            translation: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """The 3x3 matrix that scales, shears x by ``shear``, rotates and translates, as scikit-image 0.21's
    ``AffineTransform`` (which FastEstimator 1.7 pins) builds it; angles in radians."""
    cos, sin, tan = np.cos(rotation), np.sin(rotation), np.tan(shear)
    return np.array([[scale[0] * cos, -scale[1] * (tan * cos + sin), translation[0]],
                     [scale[0] * sin, -scale[1] * (tan * sin - cos), translation[1]],
                     [0.0, 0.0, 1.0]])


class Affine(MultiVariateOp):
    """Scale, translate, rotate and shear the image and masks with one random affine map per sample.

    Each of ``rotate``, ``scale``, ``shear`` and ``translate`` is a number (used as is, every time) or a pair ``(low,
    high)`` to draw from uniformly; as in FastEstimator 1.7 (albumentations' ``Affine``), x and y draw their scale,
    shear and translation independently. Per sample the draws are, in order: translation x and y, shear x and y, scale
    x and y (y then takes x's value if ``keep_ratio``), and the angle. The map pivots about the pixel-grid centre
    ``((width - 1) / 2, (height - 1) / 2)``, so positive angles turn counter-clockwise and a quarter turn of a square
    image moves whole pixels; positive translations move the content right and down. If all four are None (the
    defaults), albumentations' default random map applies: scale (0.9, 1.1), translation (-0.1, 0.1) of the size,
    rotation (-15, 15) degrees and shear (-10, 10) degrees. Random: the draws come from the sample's generator (exact
    across resumes and worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Differences from FastEstimator 1.7: ``interpolation`` and ``mask_interpolation`` accept 'nearest_neighbor' and
    'bilinear' only ('bicubic', 'biquartic' and 'biquintic' raise ValueError); bounding boxes and keypoints are not
    supported, so ``rotate_method`` (a bounding-box option) is checked but has no effect; dictionaries for
    per-axis ranges are not accepted. Like FastEstimator, ``border_handling='reflect'`` repeats the edge pixel (it is
    OpenCV's flag 1, ``BORDER_REPLICATE``), and a ``fill_value_mask`` of None or 0 means ``fill_value``.

    Args:
        rotate: The angle in degrees (counter-clockwise), or a range to draw it from.
        scale: The zoom factor (1 keeps the size), or a range to draw it from; factors must be positive.
        shear: The shear angle in degrees for x and y, or a range to draw each from.
        translate: The shift for x and y: ints (or a pair of ints) are pixels, floats are fractions of the width and
            height.
        border_handling: How to fill uncovered pixels: 'constant' (with ``fill_value``) or 'reflect' (repeat the
            edge pixel, see above).
        fill_value: The image's fill for 'constant'.
        fill_value_mask: The masks' fill for 'constant' (None or 0: ``fill_value``).
        interpolation: The image's interpolation: 'nearest_neighbor' or 'bilinear'.
        mask_interpolation: The masks' interpolation: 'nearest_neighbor' (keeps labels) or 'bilinear'.
        fit_output: Whether to resize the output to hold the whole transformed image (the translation then has no
            effect).
        keep_ratio: Whether y's scale takes x's draw, keeping the aspect ratio.
        rotate_method: 'largest_box' or 'ellipse'; only matters for bounding boxes, which fe_ray does not support.
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (bounding boxes and keypoints are
            not supported).

    Raises:
        ValueError: If a range is not None, a number or an ordered pair, a scale is not positive, pixel
            translations are not ints, or ``border_handling``, an interpolation or ``rotate_method`` is not one of
            the listed choices.
    """

    is_random = True

    def __init__(self, rotate: Range = None, scale: Range = None, shear: Range = None, translate: Range = None,
                 border_handling: str = "constant", fill_value: Number = 0, fill_value_mask: None | Number = None,
                 interpolation: str = "bilinear", mask_interpolation: str = "nearest_neighbor",
                 fit_output: bool = False, keep_ratio: bool = False, rotate_method: str = "largest_box",
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 image_in: str | None = None, mask_in: str | None = None, masks_in: str | None = None,
                 bbox_in: str | None = None, keypoints_in: str | None = None, image_out: str | None = None,
                 mask_out: str | None = None, masks_out: str | None = None, bbox_out: str | None = None,
                 keypoints_out: str | None = None, bbox_params: Any = None, keypoint_params: Any = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         bbox_in=bbox_in, keypoints_in=keypoints_in, image_out=image_out, mask_out=mask_out,
                         masks_out=masks_out, bbox_out=bbox_out, keypoints_out=keypoints_out,
                         bbox_params=bbox_params, keypoint_params=keypoint_params)
        if all(value is None for value in (rotate, scale, shear, translate)):
            rotate, scale, shear, translate = (-15, 15), (0.9, 1.1), (-10, 10), (-0.1, 0.1)
        self.rotate = _fixed_or_range(rotate, "rotate", 0.0)
        self.scale = _fixed_or_range(scale, "scale", 1.0)
        if self.scale[0] <= 0:
            raise ValueError(f"Affine scale must be positive (1 keeps the size), got {scale!r}.")
        self.shear = _fixed_or_range(shear, "shear", 0.0)
        # As FastEstimator decides: an int, or a pair starting with an int, is in pixels; anything else a fraction.
        self.translate_px = isinstance(translate, (int, np.integer)) and not isinstance(translate, bool) or \
            isinstance(translate, (list, tuple)) and len(translate) > 0 and isinstance(translate[0], (int, np.integer))
        self.translate = _fixed_or_range(translate, "translate", 0.0)
        if self.translate_px and not all(float(v).is_integer() for v in self.translate):
            raise ValueError(f"Affine translate in pixels (given as ints) must be all ints, got {translate!r}; use "
                             "floats for fractions of the image size.")
        if border_handling not in _BORDERS:
            raise ValueError(f"Affine border_handling must be one of {list(_BORDERS)}, got {border_handling!r}.")
        self.border_mode = _BORDERS[border_handling]
        self.fill_value = fill_value
        self.fill_value_mask = fill_value_mask if fill_value_mask else fill_value
        self.interpolation = self._interpolation(interpolation, "interpolation")
        self.mask_interpolation = self._interpolation(mask_interpolation, "mask_interpolation")
        if rotate_method not in _ROTATE_METHODS:
            raise ValueError(f"Affine rotate_method must be one of {list(_ROTATE_METHODS)}, got {rotate_method!r}.")
        self.fit_output, self.keep_ratio, self.rotate_method = bool(fit_output), bool(keep_ratio), rotate_method

    @staticmethod
    def _interpolation(name: Any, arg: str) -> int:
        if not isinstance(name, str) or name not in _INTERPOLATIONS:
            raise ValueError(f"Affine {arg} must be one of {list(_INTERPOLATIONS)}, got {name!r}; fe_ray does not "
                             "implement 'bicubic', 'biquartic' or 'biquintic'.")
        return _INTERPOLATIONS[name]

    def matrix(self, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
        """Draw one sample's forward 3x3 map (input ``(x, y, 1)`` to output), before any ``fit_output`` shift."""
        if self.translate_px:
            tx, ty = (float(rng.integers(int(self.translate[0]), int(self.translate[1]), endpoint=True))
                      for _ in range(2))
        else:
            tx, ty = float(rng.uniform(*self.translate)) * width, float(rng.uniform(*self.translate)) * height
        # albumentations negates the angles so that, with y pointing down, positive ones turn counter-clockwise.
        shear_x, shear_y = (-np.deg2rad(rng.uniform(*self.shear)) for _ in range(2))
        scale_x, scale_y = float(rng.uniform(*self.scale)), float(rng.uniform(*self.scale))
        if self.keep_ratio:
            scale_y = scale_x
        angle = -np.deg2rad(rng.uniform(*self.rotate))
        centre_x, centre_y = (width - 1) / 2.0, (height - 1) / 2.0
        to_origin = _affine(translation=(-centre_x, -centre_y))
        # A y shear is an x shear in a frame turned by a quarter turn.
        y_shear = _affine(rotation=np.pi / 2) @ _affine(shear=shear_y) @ _affine(rotation=-np.pi / 2)
        main = _affine(scale=(scale_x, scale_y), rotation=angle, shear=shear_x, translation=(tx, ty))
        return _affine(translation=(centre_x, centre_y)) @ main @ y_shear @ to_origin

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Coords | None:
        matrix = self.matrix(height, width, get_rng(state))
        if np.allclose(matrix, np.eye(3)):
            return None  # as albumentations, an identity map returns the input untouched
        out_height, out_width = height, width
        if self.fit_output:
            corners = matrix @ np.array([[0, 0, width - 1, width - 1], [0, height - 1, height - 1, 0], [1, 1, 1, 1]])
            low = corners[:2].min(axis=1)
            out_width, out_height = (int(np.ceil(size)) for size in corners[:2].max(axis=1) - low + 1)
            matrix = _affine(translation=(-low[0], -low[1])) @ matrix
        return affine_sources(matrix, out_height, out_width)

    def apply(self, image: np.ndarray, params: Coords | None) -> np.ndarray:
        if params is None:
            return image.copy()
        return sample(image, params, self.interpolation, self.border_mode, self.fill_value)

    def apply_to_mask(self, mask: np.ndarray, params: Coords | None) -> np.ndarray:
        if params is None:
            return mask.copy()
        return sample(mask, params, self.mask_interpolation, self.border_mode, self.fill_value_mask)
