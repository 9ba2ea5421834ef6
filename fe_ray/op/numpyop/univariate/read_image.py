"""ReadImage: load image files (PNG, JPEG, ... with Pillow; ``.npy`` arrays with numpy) from their paths."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from fe_ray.op.numpyop.file_paths import sample_file_path
from fe_ray.op.numpyop.numpyop import NumpyOp

# OpenCV's imread flags that FastEstimator's color_flag accepts and fe_ray reproduces (OpenCV itself is not needed).
IMREAD_UNCHANGED = -1
IMREAD_GRAYSCALE = 0
IMREAD_COLOR = 1
_FLAG_NAMES = {"color": IMREAD_COLOR, "gray": IMREAD_GRAYSCALE, "grey": IMREAD_GRAYSCALE}
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N")


def _pillow() -> Any:
    """Pillow's ``Image`` and ``ImageOps`` modules, imported on first use (Pillow is optional)."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        raise ImportError("ReadImage needs Pillow to decode image files: pip install pillow (or store the images as "
                          ".npy arrays, which ReadImage loads with numpy alone).") from None
    return Image, ImageOps


class ReadImage(NumpyOp):
    """Read images from file paths into uint8 arrays of shape ``(height, width, channels)``, as FastEstimator does.

    ``color_flag``:

    * ``"color"`` / ``IMREAD_COLOR`` (1, the default): 3 channels in RGB order (gray images are repeated into 3
      channels, an alpha channel is dropped).
    * ``"gray"`` / ``"grey"`` / ``IMREAD_GRAYSCALE`` (0): one channel, ``(height, width, 1)``.
    * ``IMREAD_UNCHANGED`` (-1): the file's own channels and depth (uint16 PNGs stay uint16), in OpenCV's order:
      FastEstimator leaves OpenCV's BGR(A) unconverted for this flag, so fe_ray returns BGR(A) too.

    FastEstimator reads with OpenCV; fe_ray with Pillow (installed separately: ``pip install pillow``), applying the
    EXIF orientation as OpenCV does except for ``IMREAD_UNCHANGED``. Gray conversion of color files uses Pillow's
    weights, which may differ from OpenCV's by 1 in some values. Files ending in ``.npy`` are loaded with numpy,
    without Pillow, as stored (a 2-D array gains a trailing channel axis; ``color_flag`` does not convert them): an
    fe_ray addition. Other OpenCV flags (reduced sizes, ``IMREAD_ANYDEPTH``, ...) are not supported.

    Args:
        inputs: Key(s) of the paths.
        outputs: Key(s) to write the images to (one per input).
        mode: Mode(s) to run in (None for all, "!mode" to exclude one).
        ds_id: Dataset id(s) to run for (None for all, "!id" to exclude one).
        parent_path: A folder joined in front of every path (paths are then normalized).
        color_flag: ``"color"``, ``"gray"``/``"grey"``, or one of the ints above.

    Raises:
        ValueError: If ``inputs`` and ``outputs`` differ in number or ``color_flag`` is not supported; when
            running, if a file cannot be decoded.
        FileNotFoundError: When running, if a file does not exist.
        ImportError: When running, if an image file (not ``.npy``) is read without Pillow installed.
    """

    def __init__(self, inputs: str | Iterable[str], outputs: str | Iterable[str],
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None,
                 parent_path: str = "", color_flag: str | int = IMREAD_COLOR) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"ReadImage writes each input's image to the output at the same position, but got "
                             f"{len(self.inputs)} input(s) {self.inputs} and {len(self.outputs)} output(s) "
                             f"{self.outputs}.")
        flag = _FLAG_NAMES.get(color_flag) if isinstance(color_flag, str) else color_flag
        if isinstance(flag, bool) or flag not in (IMREAD_UNCHANGED, IMREAD_GRAYSCALE, IMREAD_COLOR):
            raise ValueError(f"ReadImage color_flag must be 'color', 'gray', 'grey', IMREAD_COLOR (1), "
                             f"IMREAD_GRAYSCALE (0) or IMREAD_UNCHANGED (-1), got {color_flag!r}.")
        self.parent_path = parent_path
        self.color_flag = int(flag)
        self.in_list, self.out_list = True, True

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[np.ndarray]:
        return [self._read(path) for path in data]

    def _path(self, path: Any) -> str:
        return sample_file_path(path, self.parent_path, f"ReadImage {self.inputs}")

    def _read(self, raw_path: Any) -> np.ndarray:
        path = self._path(raw_path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ReadImage cannot find {path!r} (from {raw_path!r} with parent_path "
                                    f"{self.parent_path!r}).")
        if path.endswith(".npy"):
            image = np.load(path, allow_pickle=False)
        else:
            image = self._decode(path)
        return image[..., None] if image.ndim == 2 else image

    def _decode(self, path: str) -> np.ndarray:
        image_module, image_ops = _pillow()
        try:
            with image_module.open(path) as opened:
                if self.color_flag == IMREAD_GRAYSCALE and opened.format == "JPEG":
                    # Decode the luma plane itself, as OpenCV does: converting decoded RGB back to gray moves
                    # values by up to ~20 levels.
                    opened.draft("L", opened.size)
                opened.load()
                if self.color_flag == IMREAD_UNCHANGED and _sixteen_bit_colour(opened, path):
                    raise _SixteenBitColour(path)
                image = opened if self.color_flag == IMREAD_UNCHANGED else image_ops.exif_transpose(opened)
                return self._convert(image)
        except _SixteenBitColour:
            raise ValueError(f"ReadImage cannot read the 16-bit colour PNG {path!r} unchanged (color_flag=-1): fe_ray "
                             "decodes with Pillow, which keeps 8 bits of colour PNGs, where OpenCV (under "
                             "FastEstimator) keeps uint16. Read it with color_flag='color' (8 bits, as OpenCV scales "
                             "it), or save it as .npy or as 16-bit gray.") from None
        except (OSError, SyntaxError, ValueError) as error:  # what Pillow raises for files it cannot decode
            raise ValueError(f"ReadImage could not decode {path!r} as an image: {error}") from None

    def _convert(self, image: Any) -> np.ndarray:
        if image.mode in _SIXTEEN_BIT or image.mode == "I":
            array = np.asarray(image)
            if self.color_flag == IMREAD_UNCHANGED:
                return array.astype(np.uint16)
            gray = (array.astype(np.uint32) >> 8).astype(np.uint8)  # OpenCV scales 16-bit files to 8 bits
            return gray if self.color_flag == IMREAD_GRAYSCALE else np.repeat(gray[..., None], 3, axis=-1)
        if self.color_flag == IMREAD_GRAYSCALE:
            return np.asarray(image.convert("L"))
        if self.color_flag == IMREAD_COLOR:
            return np.asarray(image.convert("RGB"))
        if image.mode == "P":
            image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        elif image.mode == "1":
            image = image.convert("L")  # a 1-bit file is one channel, as OpenCV reads it
        elif image.mode not in ("L", "LA", "RGB", "RGBA"):
            image = image.convert("RGB")
        array = np.asarray(image)
        if image.mode == "LA":
            # OpenCV expands a gray+alpha file to BGRA.
            array = np.concatenate([np.repeat(array[..., :1], 3, axis=-1), array[..., 1:]], axis=-1)
        if array.ndim == 3:
            array = np.concatenate([array[..., 2::-1], array[..., 3:]], axis=-1)  # RGB(A) -> BGR(A), as OpenCV
        return np.ascontiguousarray(array)


class _SixteenBitColour(Exception):
    """A 16-bit colour PNG read unchanged (see :func:`_sixteen_bit_colour`)."""


def _sixteen_bit_colour(opened: Any, path: str) -> bool:
    """Whether ``opened`` is a 16-bit colour PNG, which Pillow decodes to 8 bits only (its header says so)."""
    if opened.format != "PNG":
        return False
    with open(path, "rb") as file:
        header = file.read(26)
    # IHDR's bit depth and colour type follow the 8-byte signature, the chunk's 8-byte head and 8 bytes of size.
    return len(header) == 26 and header[24] == 16 and header[25] in (2, 6)  # truecolour, with or without alpha
