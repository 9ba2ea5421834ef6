"""ReadImage: the arrays FastEstimator's OpenCV reading gives (RGB uint8 HxWx3, gray HxWx1, unchanged BGR(A)/uint16)
from PNGs written with Pillow, .npy files without Pillow, parent_path, errors, and use in a Pipeline."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image  # a dev dependency (pyproject's dev extra): these tests must not be skipped in CI

from fe_ray.dataset import LabeledDirDataset
from fe_ray.op.numpyop.univariate import ReadImage
from fe_ray.op.numpyop.univariate.read_image import IMREAD_COLOR, IMREAD_GRAYSCALE, IMREAD_UNCHANGED
from fe_ray.pipeline import Pipeline

# Pure red, green, blue and a mixed color; gray levels (19595 R + 38470 G + 7471 B + 32768) >> 16: 76, 150, 29, 18.
RGB = np.array([[[255, 0, 0], [0, 255, 0]], [[0, 0, 255], [10, 20, 30]]], dtype=np.uint8)
GRAY_OF_RGB = np.array([[76, 150], [29, 18]], dtype=np.uint8)


def _save(path: Path, array: np.ndarray, mode: str | None = None) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array, mode).save(path) if mode else Image.fromarray(array).save(path)
    return str(path)


def _read(path: str, **kwargs: object) -> np.ndarray:
    return ReadImage("x", "x", **kwargs).forward([path], {})[0]  # type: ignore[arg-type]


def test_color_png_reads_as_rgb_uint8(tmp_path: Path) -> None:
    path = _save(tmp_path / "rgb.png", RGB)
    image = _read(path)
    assert image.dtype == np.uint8 and image.shape == (2, 2, 3)
    np.testing.assert_array_equal(image, RGB)
    np.testing.assert_array_equal(_read(path, color_flag="color"), RGB)
    np.testing.assert_array_equal(_read(path, color_flag=IMREAD_COLOR), RGB)


def test_gray_flag_gives_one_channel(tmp_path: Path) -> None:
    path = _save(tmp_path / "rgb.png", RGB)
    for flag in ("gray", "grey", IMREAD_GRAYSCALE):
        image = _read(path, color_flag=flag)
        assert image.shape == (2, 2, 1)
        np.testing.assert_array_equal(image[..., 0], GRAY_OF_RGB)


def test_gray_file_in_color_mode_repeats_channels(tmp_path: Path) -> None:
    gray = np.array([[0, 128], [200, 255]], dtype=np.uint8)
    path = _save(tmp_path / "gray.png", gray)
    np.testing.assert_array_equal(_read(path), np.repeat(gray[..., None], 3, axis=-1))
    np.testing.assert_array_equal(_read(path, color_flag="gray"), gray[..., None])
    np.testing.assert_array_equal(_read(path, color_flag=IMREAD_UNCHANGED), gray[..., None])


def test_alpha_is_dropped_in_color_and_kept_bgra_unchanged(tmp_path: Path) -> None:
    rgba = np.array([[[10, 20, 30, 40]]], dtype=np.uint8)
    path = _save(tmp_path / "rgba.png", rgba)
    np.testing.assert_array_equal(_read(path), [[[10, 20, 30]]])
    np.testing.assert_array_equal(_read(path, color_flag=IMREAD_UNCHANGED), [[[30, 20, 10, 40]]])  # OpenCV's BGRA
    np.testing.assert_array_equal(_read(_save(tmp_path / "rgb.png", RGB), color_flag=-1), RGB[..., ::-1])


def test_sixteen_bit_and_palette_files(tmp_path: Path) -> None:
    deep = (np.arange(4, dtype=np.uint16) * 20000).reshape(2, 2)
    path = _save(tmp_path / "deep.png", deep)
    unchanged = _read(path, color_flag=IMREAD_UNCHANGED)
    assert unchanged.dtype == np.uint16
    np.testing.assert_array_equal(unchanged[..., 0], deep)
    np.testing.assert_array_equal(_read(path, color_flag="gray")[..., 0], deep >> 8)  # OpenCV scales to 8 bits
    palette = Image.fromarray(np.array([[0, 1]], dtype=np.uint8), "P")
    palette.putpalette([255, 0, 0, 0, 0, 255])
    palette.save(tmp_path / "p.png")
    np.testing.assert_array_equal(_read(str(tmp_path / "p.png")), [[[255, 0, 0], [0, 0, 255]]])


def test_parent_path_and_several_inputs(tmp_path: Path) -> None:
    _save(tmp_path / "imgs" / "a.png", RGB)
    _save(tmp_path / "imgs" / "b.png", RGB[::-1])
    op = ReadImage(["p", "q"], ["a", "b"], parent_path=str(tmp_path / "imgs"))
    first, second = op.forward(["a.png", np.array("sub/../b.png")], {})
    np.testing.assert_array_equal(first, RGB)
    np.testing.assert_array_equal(second, RGB[::-1])


def test_npy_files_load_without_pillow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(tmp_path / "b.npy", RGB)
    _save(tmp_path / "c.png", RGB)
    monkeypatch.setitem(sys.modules, "PIL", None)  # importing PIL now fails, as without Pillow installed
    image = _read(str(tmp_path / "a.npy"), color_flag="gray")
    assert image.shape == (2, 3, 1) and image.dtype == np.float32
    np.testing.assert_array_equal(_read(str(tmp_path / "b.npy")), RGB)
    with pytest.raises(ImportError, match="pip install pillow"):
        _read(str(tmp_path / "c.png"))


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.png"):
        _read(str(tmp_path / "missing.png"))
    (tmp_path / "bad.png").write_text("not an image")
    with pytest.raises(ValueError, match="could not decode"):
        _read(str(tmp_path / "bad.png"))
    with pytest.raises(ValueError, match="color_flag must be"):
        ReadImage("x", "x", color_flag="rgb")
    with pytest.raises(ValueError, match="color_flag must be"):
        ReadImage("x", "x", color_flag=16)  # OpenCV's reduced sizes are not supported
    with pytest.raises(ValueError, match="same position"):
        ReadImage(["a", "b"], "x")
    with pytest.raises(TypeError, match="file paths"):
        ReadImage("x", "x").forward([3], {})


def test_in_a_pipeline_with_a_labeled_dir_dataset(tmp_path: Path) -> None:
    _save(tmp_path / "data" / "cat" / "a.png", RGB)
    _save(tmp_path / "data" / "dog" / "b.png", RGB[::-1, ::-1])
    pipeline = Pipeline(LabeledDirDataset(str(tmp_path / "data")), batch_size=2, ops=[ReadImage("x", "x")])
    batch = pipeline.get_results()
    assert batch["x"].shape == (2, 2, 2, 3) and batch["x"].dtype == np.uint8
    np.testing.assert_array_equal(batch["x"][0], RGB)
    np.testing.assert_array_equal(batch["y"], [0, 1])


def _png_rgb16(path: Path, pixels: np.ndarray) -> str:
    """A 16-bit truecolour PNG written by hand (Pillow cannot write one): signature, IHDR, IDAT, IEND."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    height, width, _ = pixels.shape
    rows = b"".join(b"\x00" + pixels[row].astype(">u2").tobytes() for row in range(height))
    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
                     + chunk(b"IEND", b""))
    return str(path)


def test_16_bit_colour_png_unchanged_is_refused_not_truncated_and_1_bit_png_is_one_channel(tmp_path: Path) -> None:
    """OpenCV (under FastEstimator) keeps a 16-bit colour PNG's uint16 values; Pillow would give 8 bits, so fe_ray
    refuses that read rather than return wrong values. A 1-bit PNG read unchanged is one channel, as OpenCV's."""
    path = _png_rgb16(tmp_path / "rgb16.png", np.array([[[1799, 771, 0]]], dtype=np.uint16))
    with pytest.raises(ValueError, match=r"16-bit colour PNG .*color_flag='color'"):
        _read(path, color_flag=IMREAD_UNCHANGED)
    assert _read(path).shape == (1, 1, 3)  # 8-bit colour reads stay allowed
    bits = tmp_path / "bits.png"
    Image.fromarray(np.array([[0, 255], [255, 0]], dtype=np.uint8)).convert("1").save(bits)
    unchanged = _read(str(bits), color_flag=IMREAD_UNCHANGED)
    assert unchanged.shape == (2, 2, 1) and unchanged[:, :, 0].tolist() == [[0, 255], [255, 0]]


def test_gray_reads_of_a_colour_jpeg_decode_its_luma_plane(tmp_path: Path) -> None:
    """OpenCV reads a colour JPEG as gray from its luma plane; decoding RGB and converting back differs by up to
    ~20 levels on real photos."""
    rng = np.random.default_rng(0)
    path = tmp_path / "photo.jpg"
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(path, quality=90)
    with Image.open(path) as opened:
        opened.draft("L", opened.size)
        luma = np.asarray(opened.convert("L"))
    with Image.open(path) as opened:
        via_rgb = np.asarray(opened.convert("RGB").convert("L"))
    gray = _read(str(path), color_flag=IMREAD_GRAYSCALE)
    assert not np.array_equal(luma, via_rgb)  # the two decodings differ on this image
    np.testing.assert_array_equal(gray[..., 0], luma)
