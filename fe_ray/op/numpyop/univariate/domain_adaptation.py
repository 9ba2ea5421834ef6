"""HistogramMatching, FDA and PixelDistributionAdaptation: move images towards the look of reference images, as
albumentations (1.4) does.

FastEstimator 1.7 wraps albumentations' three domain-adaptation ops, which per sample pick one of
``reference_images`` (through ``read_fn``) and a blend factor:

- HistogramMatching maps each channel's values onto the reference's by their cumulative distributions
  (``skimage.exposure.match_histograms``), then blends with the image (``cv2.addWeighted``, rounded for integer
  images);
- FDA (Fourier domain adaptation) swaps the low frequencies of the image's Fourier amplitude for the reference's,
  keeping the image's phase;
- PixelDistributionAdaptation fits a PCA, standard or min-max scaler to the pixels of the image and of the
  reference, maps the image through its own transform and back through the reference's inverse, then blends.

The numpy code here repeats those steps (scikit-learn, a dependency, fits the scalers, imported when first used).
References of another height or width are resized to the image's bilinearly (``cv2.resize``'s mapping). The results
are clipped to the dtype's range ([0, 1] for float32) and truncated, as albumentations does. The choices are drawn
from the sample's generator (exact across resumes and worker threads in a Pipeline; the numbers differ from
albumentations' Python ``random`` draws); several inputs of one op share the reference and blend factor.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.interpolation import INTER_LINEAR, resize_array
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, clip_to, is_number, max_value, to_range
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

_TRANSFORMS = ("pca", "standard", "minmax")


def _as_is(value: Any) -> Any:
    """The default ``read_fn``: the reference is already an array (a named function, so the op pickles)."""
    return value


def _references(reference_images: Any, op: str) -> Sequence[Any]:
    """``reference_images`` as a sequence to pick from: a single path counts as one reference, an array as a stack
    along its first axis (as albumentations' ``random.choice`` reads it)."""
    if isinstance(reference_images, (str, bytes, PathLike)):
        return [reference_images]
    if isinstance(reference_images, np.ndarray):
        references: Sequence[Any] = reference_images
    elif isinstance(reference_images, Sequence):
        references = reference_images
    elif isinstance(reference_images, Iterable):
        references = list(reference_images)
    else:
        raise ValueError(f"{op} reference_images must be a sequence of images (or of whatever read_fn reads, e.g. "
                         f"paths), got {type(reference_images).__name__}.")
    if len(references) == 0:
        raise ValueError(f"{op} reference_images is empty; pass at least one reference image.")
    return references


def _check_read_fn(read_fn: Any, op: str) -> Callable[[Any], Any]:
    if not callable(read_fn):
        raise TypeError(f"{op} read_fn must be a function turning one of reference_images into an image array, "
                        f"got {read_fn!r}.")
    return read_fn


def _blend_range(blend_ratio: Any, op: str) -> tuple[float, float]:
    low, high = to_range(blend_ratio, "blend_ratio", op, low=blend_ratio if is_number(blend_ratio) else None)
    if not 0 <= low <= high <= 1:
        raise ValueError(f"{op} blend_ratio must be a pair (low, high) with 0 <= low <= high <= 1, got "
                         f"{blend_ratio!r}.")
    return low, high


def _fit_to(reference: np.ndarray, image: np.ndarray) -> np.ndarray:
    """The reference resized (bilinearly) to the image's height and width when they differ."""
    if reference.shape[:2] != image.shape[:2]:
        return resize_array(reference, image.shape[0], image.shape[1], INTER_LINEAR)
    return reference


class _ReferenceOp(UnivariateOp):
    """Picks one reference (through ``read_fn``) and one uniform number per sample."""

    is_random = True
    _name = ""

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], reference_images: Any,
                 mode: None | str | Iterable[str], ds_id: None | str | Iterable[str], read_fn: Callable[[Any], Any],
                 draw_range: tuple[float, float]) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.reference_images = _references(reference_images, self._name)
        self.read_fn = _check_read_fn(read_fn, self._name)
        self._draw_range = draw_range

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> tuple[np.ndarray, float]:
        rng = get_rng(state)
        reference = np.asarray(self.read_fn(self.reference_images[int(rng.integers(len(self.reference_images)))]))
        if reference.ndim not in (2, 3):
            raise ValueError(f"{self._name} read a reference of shape {reference.shape}, not an image (height, "
                             "width[, channels]); pass reference_images as a list of images (a single array counts "
                             "as a stack of them along its first axis), or a read_fn that returns images.")
        return reference, float(rng.uniform(*self._draw_range))


def _match_channel(source: np.ndarray, template: np.ndarray) -> np.ndarray:
    """``source``'s values mapped onto ``template``'s by their cumulative distributions (float64)."""
    if source.dtype.kind == "u" and template.dtype.kind == "u":
        lookup = source.reshape(-1)
        src_counts = np.bincount(lookup)
        tmpl_counts = np.bincount(template.reshape(-1))
        tmpl_values = np.nonzero(tmpl_counts)[0]  # only values the template has
        tmpl_counts = tmpl_counts[tmpl_values]
    else:
        _, lookup, src_counts = np.unique(source.reshape(-1), return_inverse=True, return_counts=True)
        tmpl_values, tmpl_counts = np.unique(template.reshape(-1), return_counts=True)
    src_quantiles = np.cumsum(src_counts) / source.size
    tmpl_quantiles = np.cumsum(tmpl_counts) / template.size
    mapped = np.interp(src_quantiles, tmpl_quantiles, tmpl_values)
    return mapped[lookup.reshape(-1)].reshape(source.shape)


def match_histograms(image: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``skimage.exposure.match_histograms``: per channel for ``(h, w, c)`` images. Multi-channel results keep the
    image's dtype (integers truncated, as scikit-image's assignment does); 2-D ones are float64 (float32 for a
    float32 image)."""
    if image.ndim == 3:
        matched = np.empty(image.shape, dtype=image.dtype)
        for channel in range(image.shape[-1]):
            matched[..., channel] = _match_channel(image[..., channel], reference[..., channel])
        return matched
    result = _match_channel(image, reference)
    return result.astype(np.float32) if image.dtype == np.float32 else result


class HistogramMatching(_ReferenceOp):
    """Match each channel's histogram to a random reference image's, blended with the image by a random ratio.

    Per sample a reference is picked uniformly from ``reference_images`` and read with ``read_fn``, and
    ``ratio = uniform(blend_ratio)``; the result is ``matched * ratio + image * (1 - ratio)``, rounded for integer
    images, clipped and cast to the image's dtype. The reference must have the image's dtype and channels; another
    height or width is resized to the image's.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the matched images to (one per input).
        reference_images: The references: images, or anything ``read_fn`` turns into one (e.g. paths).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blend_ratio: The range of the matched image's weight, within [0, 1].
        read_fn: Turns one of ``reference_images`` into an image array (the identity by default).

    Raises:
        ValueError: If ``reference_images`` is empty or not a sequence, ``blend_ratio`` not a pair in [0, 1]; when
            running, if an image is not 2-D or 3-D or the reference's channels differ.
        TypeError: If ``read_fn`` is not callable; when running, if an image is not uint8, uint16 or float32, or the
            reference's dtype differs (albumentations raises RuntimeError for that).
    """

    _name = "HistogramMatching"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], reference_images: Any,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blend_ratio: tuple[float, float] = (0.5, 1.0), read_fn: Callable[[Any], Any] = _as_is) -> None:
        self.blend_ratio = _blend_range(blend_ratio, "HistogramMatching")
        super().__init__(inputs, outputs, reference_images, mode, ds_id, read_fn, self.blend_ratio)

    def apply(self, data: np.ndarray, params: tuple[np.ndarray, float]) -> np.ndarray:
        reference, ratio = params
        check_dtype(data, (np.uint8, np.uint16, np.float32), "HistogramMatching", self.inputs)
        if reference.dtype != data.dtype:
            raise TypeError(f"HistogramMatching needs references of the image's dtype; {self.inputs} is "
                            f"{data.dtype} but the reference is {reference.dtype}. Convert it in read_fn.")
        image, template = np.squeeze(data), np.squeeze(_fit_to(reference, data))
        if image.ndim not in (2, 3) or image.ndim != template.ndim or image.shape[2:] != template.shape[2:]:
            raise ValueError(f"HistogramMatching needs a (height, width[, channels]) image and a reference with as "
                             f"many channels; {self.inputs} has shape {data.shape}, the reference {reference.shape}.")
        matched = match_histograms(image, template)
        # cv2.addWeighted works in float32, or float64 when an input is float64; integer results are rounded.
        work = np.float64 if matched.dtype == np.float64 else np.float32
        blended = matched.astype(work) * work(ratio) + image.astype(work) * work(1 - ratio)
        if data.dtype != np.float32:
            blended = np.rint(blended)
        return clip_to(blended, data.dtype).reshape(data.shape)


def fourier_domain_adaptation(image: np.ndarray, reference: np.ndarray, beta: float) -> np.ndarray:
    """``image`` with the centre of its (shifted) Fourier amplitude, a square of half-width
    ``floor(min(h, w) * beta)`` around the zero frequency, taken from ``reference``; real part, float64.

    Even ``beta = 0`` swaps the zero frequency itself, i.e. the mean of each channel.
    """
    source = image.astype(np.float32)
    target = reference.astype(np.float32)
    if source.ndim == 2:
        source, target = source[..., None], target[..., None]
    fft_source = np.fft.fft2(source, axes=(0, 1))
    amplitude = np.fft.fftshift(np.abs(fft_source), axes=(0, 1))
    phase = np.angle(fft_source)
    amplitude_target = np.fft.fftshift(np.abs(np.fft.fft2(target, axes=(0, 1))), axes=(0, 1))
    height, width = amplitude.shape[:2]
    border = int(np.floor(min(height, width) * beta))
    centre_y, centre_x = height // 2, width // 2
    rows = slice(centre_y - border, centre_y + border + 1)
    cols = slice(centre_x - border, centre_x + border + 1)
    amplitude[rows, cols] = amplitude_target[rows, cols]
    amplitude = np.fft.ifftshift(amplitude, axes=(0, 1))
    result = np.real(np.fft.ifft2(amplitude * np.exp(1j * phase), axes=(0, 1)))
    return result.reshape(image.shape)


class FDA(_ReferenceOp):
    """Fourier domain adaptation: give images the low-frequency amplitude (the overall "style") of a random
    reference image, keeping their own phase (content).

    Per sample a reference is picked uniformly from ``reference_images`` and read with ``read_fn`` (then resized to
    the image's height and width), and ``beta = uniform(beta_limit)``; see :func:`fourier_domain_adaptation`. The
    result is clipped to the dtype's range and truncated, so a uint8 identity can come out one level low.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the adapted images to (one per input).
        reference_images: The references: images, or anything ``read_fn`` turns into one (e.g. paths).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        beta_limit: The range of ``beta``: a number ``b`` means ``(0, b)``, or a pair, within [0, 0.5] (fe_ray
            refuses larger values, whose squares leave the spectrum and break albumentations' slicing).
        read_fn: Turns one of ``reference_images`` into an image array (the identity by default).

    Raises:
        ValueError: If ``reference_images`` is empty or not a sequence, ``beta_limit`` not a number or pair in
            [0, 0.5]; when running, if the reference (after resizing) and the image differ in shape.
        TypeError: If ``read_fn`` is not callable; when running, if an image is neither uint8 nor float32.
    """

    _name = "FDA"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], reference_images: Any,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 beta_limit: float | tuple[float, float] = 0.1, read_fn: Callable[[Any], Any] = _as_is) -> None:
        self.beta_limit = to_range(beta_limit, "beta_limit", "FDA", low=0.0)
        if not 0 <= self.beta_limit[0] <= self.beta_limit[1] <= 0.5:
            raise ValueError(f"FDA beta_limit must be a number b in [0, 0.5] (meaning (0, b)) or a pair (low, high) "
                             f"with 0 <= low <= high <= 0.5, got {beta_limit!r}.")
        super().__init__(inputs, outputs, reference_images, mode, ds_id, read_fn, self.beta_limit)

    def apply(self, data: np.ndarray, params: tuple[np.ndarray, float]) -> np.ndarray:
        reference, beta = params
        check_dtype(data, (np.uint8, np.float32), "FDA", self.inputs)
        image, target = np.squeeze(data), np.squeeze(_fit_to(reference, data))
        if image.shape != target.shape or image.ndim not in (2, 3):
            raise ValueError(f"FDA needs a (height, width[, channels]) image and a reference with as many channels; "
                             f"{self.inputs} has shape {data.shape}, the reference {reference.shape}.")
        return clip_to(fourier_domain_adaptation(image, target, beta), data.dtype).reshape(data.shape)


def _pca_sign(pca: Any) -> float:
    return float(np.sign(np.trace(pca.components_)))


def adapt_pixels(image: np.ndarray, reference: np.ndarray, transform_type: str) -> np.ndarray:
    """The uint8 RGB ``image``'s pixels through a transform fitted on them, then back through the inverse of one
    fitted on ``reference``'s pixels (values scaled to [0, 1]); clipped, truncated to uint8."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    kinds = {"pca": PCA, "standard": StandardScaler, "minmax": MinMaxScaler}
    target = kinds[transform_type]()
    source = copy.deepcopy(target)
    target.fit(reference.astype(np.float32).reshape(-1, 3) / 255.0)
    pixels = image.astype(np.float32).reshape(-1, 3) / 255.0
    source.fit(pixels)
    if transform_type == "pca" and _pca_sign(target) != _pca_sign(source):
        target.components_ *= -1  # keep the two bases' orientation alike, so colours are not inverted
    result = target.inverse_transform(source.transform(pixels))
    return (np.clip(result, 0, 1) * 255).astype(np.uint8).reshape(image.shape)


class PixelDistributionAdaptation(_ReferenceOp):
    """Pixel-level domain adaptation: map the pixel distribution of RGB images onto a random reference image's.

    Per sample a reference is picked uniformly from ``reference_images`` and read with ``read_fn``, and
    ``ratio = uniform(blend_ratio)``. A ``transform_type`` transform (scikit-learn's PCA, StandardScaler or
    MinMaxScaler) is fitted to the image's pixels and another to the reference's; the image goes through its own and
    back through the reference's inverse (:func:`adapt_pixels`), and the result is
    ``adapted * ratio + image * (1 - ratio)`` truncated to uint8. Float32 images (values in [0, 1]) are converted
    to uint8 for this (truncating) and back (divided by 255); so are float32 references.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the adapted images to (one per input).
        reference_images: The references: images, or anything ``read_fn`` turns into one (e.g. paths).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        blend_ratio: The range of the adapted image's weight, within [0, 1].
        read_fn: Turns one of ``reference_images`` into an image array (the identity by default).
        transform_type: "pca", "standard" or "minmax".

    Raises:
        ValueError: If ``reference_images`` is empty or not a sequence, ``blend_ratio`` not a pair in [0, 1], or
            ``transform_type`` unknown; when running, if an image or reference is not ``(height, width, 3)``.
        TypeError: If ``read_fn`` is not callable; when running, if an image is neither uint8 nor float32, or a
            float32 one has values outside [0, 1].
    """

    _name = "PixelDistributionAdaptation"

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str], reference_images: Any,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 blend_ratio: tuple[float, float] = (0.25, 1.0), read_fn: Callable[[Any], Any] = _as_is,
                 transform_type: str = "pca") -> None:
        if transform_type not in _TRANSFORMS:
            raise ValueError(f"PixelDistributionAdaptation transform_type must be one of {_TRANSFORMS}, got "
                             f"{transform_type!r}.")
        self.transform_type = transform_type
        self.blend_ratio = _blend_range(blend_ratio, "PixelDistributionAdaptation")
        super().__init__(inputs, outputs, reference_images, mode, ds_id, read_fn, self.blend_ratio)

    def _to_uint8(self, image: np.ndarray, what: str) -> np.ndarray:
        check_dtype(image, (np.uint8, np.float32), "PixelDistributionAdaptation", self.inputs)
        if image.ndim != 3 or image.shape[-1] != 3:
            raise ValueError(f"PixelDistributionAdaptation works on RGB images (height, width, 3); the {what} of "
                             f"{self.inputs} has shape {image.shape} (gray and multispectral images are not "
                             "supported).")
        if image.dtype == np.float32:
            if image.size and (image.min() < 0 or image.max() > max_value(image.dtype)):
                raise TypeError(f"PixelDistributionAdaptation converts float32 images to uint8, which needs values in "
                                f"[0, 1]; the {what} of {self.inputs} spans [{image.min()}, {image.max()}].")
            return (image * 255).astype(np.uint8)
        return image

    def apply(self, data: np.ndarray, params: tuple[np.ndarray, float]) -> np.ndarray:
        reference, ratio = params
        image = self._to_uint8(data, "image")
        adapted = adapt_pixels(image, self._to_uint8(reference, "reference"), self.transform_type)
        blended = (image.astype(np.float32) * (1 - ratio) + adapted.astype(np.float32) * ratio).astype(np.uint8)
        if data.dtype == np.float32:
            return blended.astype(np.float32) * np.float32(1 / 255)
        return blended
