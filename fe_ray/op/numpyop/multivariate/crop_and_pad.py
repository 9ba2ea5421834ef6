"""CropAndPad: crop (negative amounts) or pad (positive amounts) each side of an image and its masks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fe_ray.op.numpyop.multivariate.border import BORDER_CONSTANT, BORDER_NAMES, BORDER_REFLECT_101
from fe_ray.op.numpyop.multivariate.interpolation import INTER_LINEAR, INTER_NEAREST, resize_array
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.multivariate.pad_if_needed import pad_array
from fe_ray.op.numpyop.randomness import get_rng

PAD_MODES = {"constant": BORDER_CONSTANT, "reflect": BORDER_REFLECT_101}
INTERPOLATIONS = {"nearest_neighbor": INTER_NEAREST, "bilinear": INTER_LINEAR}
# FastEstimator's other names, which map to OpenCV modes fe_ray does not implement.
_UNSUPPORTED_INTERPOLATIONS = ("bicubic", "biquartic", "biquintic")

Sides = tuple[int, int, int, int]  # (top, right, bottom, left), the order px and percent list the sides in


class Amount(NamedTuple):
    """How one side's amount (or a fill value) is chosen: ``kind`` is "fixed" (``values`` holds it), "range" (uniform
    between the two ``values``), "int_range" (a whole number between them, both included) or "choice" (one of the
    ``values``)."""

    kind: str
    values: tuple[float, ...]


class Plan(NamedTuple):
    """One sample's transform."""

    crop: Sides  # pixels cut from each side (top, right, bottom, left), all >= 0
    pad: Sides  # pixels added to each side, in the same order
    value: float  # the image's constant fill
    mask_value: float  # the masks' constant fill
    size: tuple[int, int]  # the input's (height, width), which keep_size restores


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _parse_sides(spec: Any, name: str, check: Any, range_kind: str) -> list[Amount]:
    """The four sides' amounts from ``px`` or ``percent``; ``check`` tells whether one number is acceptable and
    ``range_kind`` how a ``(low, high)`` pair is drawn from."""
    def fixed(value: Any) -> Amount | None:
        return Amount("fixed", (value,)) if check(value) else None

    def ranged(pair: Any) -> Amount | None:
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(check(v) for v in pair) and pair[0] <= pair[1]:
            return Amount(range_kind, (pair[0], pair[1]))
        return None

    def entry(value: Any) -> Amount | None:
        if isinstance(value, tuple):
            return ranged(value)
        if isinstance(value, list):
            return Amount("choice", tuple(value)) if value and all(check(v) for v in value) else None
        return fixed(value)

    single = fixed(spec) or ranged(spec)
    if single is not None:
        return [single] * 4  # a range is still drawn once per side
    if isinstance(spec, (list, tuple)) and len(spec) == 4:
        sides = [entry(value) for value in spec]
        if all(side is not None for side in sides):
            return [side for side in sides if side is not None]
    raise ValueError(f"CropAndPad {name} must be a number, a pair (low, high) with low <= high drawn per side, or "
                     f"4 entries (top, right, bottom, left) each a number, a (low, high) tuple or a list to choose "
                     f"from; got {spec!r}." + (" Fractions must be above -1." if name == "percent" else ""))


def _parse_fill(value: Any, name: str) -> Amount:
    if _is_number(value):
        return Amount("fixed", (value,))
    if isinstance(value, tuple) and len(value) == 2 and all(_is_number(v) for v in value) and value[0] <= value[1]:
        # Whole numbers between two ints, as albumentations draws them; otherwise uniform.
        return Amount("int_range" if all(_is_int(v) for v in value) else "range", value)
    if isinstance(value, list) and value and all(_is_number(v) for v in value):
        return Amount("choice", tuple(value))
    raise ValueError(f"CropAndPad {name} must be a number, a (low, high) tuple to draw from or a non-empty list to "
                     f"choose from, got {value!r}.")


def _draw(amount: Amount, rng: np.random.Generator) -> float:
    kind, values = amount
    if kind == "fixed":
        return values[0]
    if kind == "choice":
        return values[int(rng.integers(len(values)))]
    low, high = values
    if kind == "int_range":
        return int(rng.integers(int(low), int(high) + 1))
    return float(rng.uniform(low, high))


def _keep_a_pixel(first: int, second: int, size: int) -> tuple[int, int]:
    """The crops of two opposite sides, reduced as albumentations does when together they would leave no pixel.

    albumentations hands back ``size + 1`` pixels of crop (not just the overshoot), split between the sides with the
    odd pixel going to the first, and moves what a side cannot give back to the other one.
    """
    if size - first - second >= 1:
        return first, second
    back_first, back_second = (size + 2) // 2, (size + 1) // 2
    if back_first > first:
        back_first, back_second = first, back_second + back_first - first
    elif back_second > second:
        back_first, back_second = back_first + back_second - second, second
    first, second = max(first - back_first, 0), max(second - back_second, 0)
    if size - first - second < 1:
        # Crops above twice the side, which albumentations turns into an empty image: keep one pixel instead.
        first = min(first, size - 1)
        second = size - 1 - first
    return first, second


def _fill(value: float, dtype: Any) -> float:
    """A constant fill as ``dtype`` holds it: integer images round to the nearest value in range (as OpenCV's
    saturating cast does), where a plain cast would truncate."""
    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return int(np.clip(np.rint(value), limits.min, limits.max))
    return value


class CropAndPad(MultiVariateOp):
    """Crop (negative amounts) or pad (positive amounts) each side of the image and its masks, optionally resizing
    back to the input's size.

    Exactly one of ``px`` (pixels) or ``percent`` (fractions of the height for top/bottom and of the width for
    left/right, truncated toward zero to whole pixels) is given, as

    * a number: that amount on every side;
    * a pair ``(low, high)``: an amount drawn per side (integers with both ends included for ``px``, uniform for
      ``percent``);
    * 4 entries for top, right, bottom and left, each a number, a ``(low, high)`` tuple or a list to choose from.

    Crops never leave fewer than one row or column: when two opposite crops would, they are reduced as albumentations
    reduces them. The image is cropped, then padded, then (``keep_size``) resized to the input's height and width.
    Random when an amount or fill is drawn: the draws come from the sample's generator (exact across resumes and
    worker threads, see :mod:`fe_ray.op.numpyop.randomness`).

    Differences from FastEstimator 1.7 (albumentations 1.4.1):

    * ``pad_mode="reflect"`` mirrors the image around its edge pixels (``cv2.BORDER_REFLECT_101``); FastEstimator
      maps "reflect" to OpenCV flag 1, which is ``cv2.BORDER_REPLICATE`` (the edge pixel repeated). fe_ray also
      accepts OpenCV's flags 0-4 themselves, so ``pad_mode=1`` reproduces FastEstimator's "reflect".
    * Masks are resized with nearest neighbour so that labels stay labels (albumentations resizes them with the
      image's interpolation).
    * ``pad_cval_mask=None`` takes ``pad_cval``, but an explicit 0 stays 0 (FastEstimator replaces any false value,
      0 included, by ``pad_cval``).
    * A ``px`` range ``(a, b)`` includes ``b``, as documented (albumentations draws from ``[a, b)``); a fill given
      as a list is always chosen from, a tuple is always a range (albumentations treats any 2 values as a range).
    * Only "nearest_neighbor" and "bilinear" interpolation are implemented.

    Args:
        px: Pixels to crop (negative) or pad (positive) per side; see above. Either this or ``percent``.
        percent: Fractions of the side to crop (negative, above -1) or pad (positive); see above.
        pad_mode: "constant" (fill with ``pad_cval`` / ``pad_cval_mask``) or "reflect" (mirror the image), or an
            OpenCV border flag 0-4.
        pad_cval: The image's constant fill: a number, a ``(low, high)`` tuple to draw from (whole numbers when
            both are ints) or a list to choose from; integer images round it to their range.
        pad_cval_mask: The same for masks; None uses ``pad_cval`` (drawn separately).
        keep_size: Resize the result back to the input's height and width.
        interpolation: The image's resize interpolation for ``keep_size``: "nearest_neighbor" or "bilinear".
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp` (bounding boxes and keypoints are
            not supported).

    Raises:
        ValueError: If both or neither of ``px`` and ``percent`` are given, or an argument is malformed (naming it).
    """

    is_random = True

    def __init__(self, px: None | int | Sequence[Any] = None, percent: None | float | Sequence[Any] = None,
                 pad_mode: int | str = "constant", pad_cval: float | Sequence[float] = 0,
                 pad_cval_mask: None | float | Sequence[float] = None, keep_size: bool = True,
                 interpolation: str = "bilinear", mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, image_out: str | None = None, mask_out: str | None = None,
                 masks_out: str | None = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         image_out=image_out, mask_out=mask_out, masks_out=masks_out)
        if (px is None) == (percent is None):
            raise ValueError(f"CropAndPad needs exactly one of px (pixels) or percent (fractions of the side), got "
                             f"px={px!r} and percent={percent!r}.")
        self.px, self.percent = px, percent
        if px is not None:
            self.sides = _parse_sides(px, "px", _is_int, "int_range")
        else:
            self.sides = _parse_sides(percent, "percent", lambda v: _is_number(v) and v > -1, "range")
        self.pad_mode = self._check_pad_mode(pad_mode)
        self.pad_cval = _parse_fill(pad_cval, "pad_cval")
        self.pad_cval_mask = self.pad_cval if pad_cval_mask is None else _parse_fill(pad_cval_mask, "pad_cval_mask")
        if not isinstance(keep_size, (bool, np.bool_)):
            raise ValueError(f"CropAndPad keep_size must be True or False, got {keep_size!r}.")
        self.keep_size = bool(keep_size)
        if interpolation in _UNSUPPORTED_INTERPOLATIONS:
            raise ValueError(f"CropAndPad interpolation={interpolation!r} is not implemented in fe_ray; use "
                             f"'nearest_neighbor' or 'bilinear'.")
        if not isinstance(interpolation, str) or interpolation not in INTERPOLATIONS:
            raise ValueError(f"CropAndPad interpolation must be 'nearest_neighbor' or 'bilinear', got "
                             f"{interpolation!r}.")
        self.interpolation = INTERPOLATIONS[interpolation]

    @staticmethod
    def _check_pad_mode(pad_mode: Any) -> int:
        if isinstance(pad_mode, str) and pad_mode in PAD_MODES:
            return PAD_MODES[pad_mode]
        if _is_int(pad_mode) and int(pad_mode) in BORDER_NAMES:
            return int(pad_mode)
        flags = ", ".join(f"{flag} (cv2.{name})" for flag, name in BORDER_NAMES.items())
        raise ValueError(f"CropAndPad pad_mode must be 'constant', 'reflect' or an OpenCV border flag ({flags}); got "
                         f"{pad_mode!r}.")

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> Plan:
        rng = get_rng(state)
        amounts = [_draw(side, rng) for side in self.sides]
        if self.percent is not None:
            # int() truncates toward zero, as albumentations does, so -0.15 of 10 rows crops 1 row.
            amounts = [int(fraction * (height if i % 2 == 0 else width)) for i, fraction in enumerate(amounts)]
        pad_top, pad_right, pad_bottom, pad_left = (max(int(a), 0) for a in amounts)
        top, right, bottom, left = (max(-int(a), 0) for a in amounts)
        top, bottom = _keep_a_pixel(top, bottom, height)
        left, right = _keep_a_pixel(left, right, width)
        return Plan(crop=(top, right, bottom, left), pad=(pad_top, pad_right, pad_bottom, pad_left),
                    value=_draw(self.pad_cval, rng), mask_value=_draw(self.pad_cval_mask, rng), size=(height, width))

    def _transform(self, data: np.ndarray, plan: Plan, value: float, interpolation: int) -> np.ndarray:
        height, width = plan.size
        top, right, bottom, left = plan.crop
        out = data[top:height - bottom, left:width - right]
        pad_top, pad_right, pad_bottom, pad_left = plan.pad
        if any(plan.pad):
            out = pad_array(out, (pad_top, pad_bottom, pad_left, pad_right), self.pad_mode, _fill(value, data.dtype))
        if self.keep_size:
            return resize_array(out, height, width, interpolation)  # a copy even when the size is unchanged
        return out if any(plan.pad) else out.copy()

    def apply(self, image: np.ndarray, params: Plan) -> np.ndarray:
        return self._transform(image, params, params.value, self.interpolation)

    def apply_to_mask(self, mask: np.ndarray, params: Plan) -> np.ndarray:
        return self._transform(mask, params, params.mask_value, INTER_NEAREST)
