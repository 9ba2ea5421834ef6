"""ImageCompression: encode images as JPEG or WEBP at a random quality and decode them again (compression artifacts).

FastEstimator wraps albumentations' (1.3) ImageCompression, which round-trips through ``cv2.imencode`` /
``cv2.imdecode``. fe_ray uses Pillow's codecs (libjpeg / libwebp, as OpenCV's are) and hands them the channels in
the order OpenCV's encoder reads them (OpenCV takes the array as BGR), so the color conversion inside the codec
weighs the channels as albumentations' does. The bytes of another codec build may differ slightly. Pillow is
imported only when the op runs.

The quality is drawn per sample from the sample's generator (exact across resumes and worker threads in a Pipeline;
the numbers differ from albumentations' Python ``random`` draws); several inputs of one op share it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from enum import IntEnum
from typing import Any

import numpy as np

from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.op.numpyop.univariate._image import check_dtype, is_number
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp


class ImageCompressionType(IntEnum):
    """The codecs of :class:`ImageCompression` (albumentations' ``ImageCompression.ImageCompressionType``)."""

    JPEG = 0
    WEBP = 1


def _compression_type(value: Any) -> ImageCompressionType:
    if isinstance(value, str) and value.lower().lstrip(".") in ("jpeg", "jpg", "webp"):
        return ImageCompressionType.WEBP if value.lower().lstrip(".") == "webp" else ImageCompressionType.JPEG
    try:
        return ImageCompressionType(value)
    except ValueError:
        raise ValueError(f"ImageCompression compression_type must be ImageCompressionType.JPEG or .WEBP (or 'jpeg', "
                         f"'webp'), got {value!r}.") from None


def compress(image: np.ndarray, quality: int, kind: ImageCompressionType) -> np.ndarray:
    """Encode a uint8 ``image`` (gray, RGB or, for WEBP, RGBA) with ``kind`` at ``quality`` and decode it."""
    from PIL import Image  # lazily: only this op needs Pillow's codecs

    gray = image.ndim == 2 or image.shape[-1] == 1
    # OpenCV encodes the array as BGR(A): reversing the color channels hands Pillow (RGB) the same picture.
    pixels = image.reshape(image.shape[:2]) if gray else image[..., [2, 1, 0, *range(3, image.shape[-1])]]
    picture = Image.fromarray(np.ascontiguousarray(pixels))
    buffer = io.BytesIO()
    if kind == ImageCompressionType.JPEG:
        picture.save(buffer, format="JPEG", quality=int(quality))
    else:
        picture.save(buffer, format="WEBP", quality=int(quality), lossless=False)
    buffer.seek(0)
    decoded = np.asarray(Image.open(buffer))
    if gray:
        # libwebp stores gray pictures as RGB with equal channels; keep one of them.
        decoded = decoded[..., 0] if decoded.ndim == 3 else decoded
        return decoded.reshape(image.shape)
    return np.ascontiguousarray(decoded[..., [2, 1, 0, *range(3, decoded.shape[-1])]])


class ImageCompression(UnivariateOp):
    """Degrade images by JPEG or WEBP compression at a random quality ``randint(quality_lower, quality_upper)``.

    uint8 images are encoded and decoded as they are. float32 images (in [0, 1]) are scaled to uint8 first (times
    255, truncated), round-tripped and scaled back (divided by 255), as albumentations does; fe_ray clips the scaled
    values into [0, 255] before the cast (albumentations does not) and does not repeat albumentations' warning that
    uint8 inputs suit this op better. JPEG takes gray and RGB images, WEBP also RGBA ones.

    Args:
        inputs: Key(s) of the images.
        outputs: Key(s) to write the compressed images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        quality_lower: Lowest quality, an int in [0, 100] for JPEG and [1, 100] for WEBP.
        quality_upper: Highest quality (inclusive), in the same range.
        compression_type: ``ImageCompressionType.JPEG`` or ``ImageCompressionType.WEBP`` (also reachable as
            ``ImageCompression.ImageCompressionType``, or given as 'jpeg' / 'webp').

    Raises:
        ValueError: If a quality is not an int in its range or ``quality_lower > quality_upper`` (albumentations
            fails at run time for the latter), or the type is unknown; when running, if an image has a channel
            count the codec cannot take (JPEG: 1 or 3; WEBP: 1, 3 or 4).
        TypeError: When running, if an image is neither uint8 nor float32.
    """

    ImageCompressionType = ImageCompressionType
    is_random = True

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 quality_lower: float = 99, quality_upper: float = 100,
                 compression_type: ImageCompressionType = ImageCompressionType.JPEG) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.compression_type = _compression_type(compression_type)
        lowest = 1 if self.compression_type == ImageCompressionType.WEBP else 0
        for name, value in (("quality_lower", quality_lower), ("quality_upper", quality_upper)):
            if not (is_number(value) and float(value).is_integer() and lowest <= value <= 100):
                raise ValueError(f"ImageCompression {name} must be an int in [{lowest}, 100] for "
                                 f"{self.compression_type.name}, got {value!r}.")
        if quality_lower > quality_upper:
            raise ValueError(f"ImageCompression quality_lower ({quality_lower}) must not exceed quality_upper "
                             f"({quality_upper}).")
        self.quality_lower, self.quality_upper = int(quality_lower), int(quality_upper)

    def get_params(self, data: np.ndarray, state: dict[str, Any]) -> int:
        return int(get_rng(state).integers(self.quality_lower, self.quality_upper + 1))

    def apply(self, data: np.ndarray, params: int) -> np.ndarray:
        check_dtype(data, (np.uint8, np.float32), "ImageCompression", self.inputs)
        allowed = (1, 3) if self.compression_type == ImageCompressionType.JPEG else (1, 3, 4)
        if not (data.ndim == 2 or (data.ndim == 3 and data.shape[-1] in allowed)):
            raise ValueError(f"ImageCompression with {self.compression_type.name} takes (height, width) images or "
                             f"(height, width, channels) with channels in {allowed}; {self.inputs} has shape "
                             f"{data.shape}.")
        if data.dtype == np.float32:
            wide = np.clip(data * np.float32(255), 0, 255).astype(np.uint8)
            return compress(wide, params, self.compression_type).astype(np.float32) / np.float32(255)
        return compress(data, params, self.compression_type)
