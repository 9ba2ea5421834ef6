"""RUA and its ops (AutoContrast, Equalize, Color, Sharpness, ShearX/Y, TranslateX/Y, Rotate, RUA's Posterize and
Solarize): equality with Pillow (which FastEstimator calls), hand-computed values, RUA's strength rules and choice
parsing, and exact per-sample draws in a Pipeline (threads, resume)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import LambdaOp, NumpyOp
from fe_ray.op.numpyop.meta import OneOf, Sometimes
from fe_ray.op.numpyop.randomness import RNG_KEY
from fe_ray.op.numpyop.univariate import (
    RUA,
    AutoContrast,
    Brightness,
    Color,
    Sharpness,
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
)
from fe_ray.op.numpyop.univariate import Equalize as AlbEqualize
from fe_ray.op.numpyop.univariate.rua import Equalize, Identity, OneOfMultiVar, Posterize, Rotate, Solarize
from tests.op.numpyop.pipeline_checks import assert_position_seeded


def _state(seed: int) -> dict[str, Any]:
    return {RNG_KEY: np.random.default_rng(seed)}


def _image(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


SHAPES = [(9, 7, 3), (6, 11), (16, 16, 3), (5, 13)]


# ------------------------------------------------------------------ equality with Pillow
@pytest.mark.parametrize("shape", SHAPES)
def test_histogram_ops_equal_pillow(shape: tuple[int, ...]) -> None:
    image_module = importlib.import_module("PIL.Image")  # Pillow is a dev dependency: never skipped
    image_ops = importlib.import_module("PIL.ImageOps")  # Pillow is a dev dependency: never skipped
    for image in (_image(shape), _image(shape, 1) // 4 + 60, _image(shape, 2) % 3 + 7):
        image = image.astype(np.uint8)
        pil = image_module.fromarray(image)
        np.testing.assert_array_equal(AutoContrast("x", "x").forward(image, {}), np.array(image_ops.autocontrast(pil)))
        np.testing.assert_array_equal(Equalize("x", "x").forward(image, {}), np.array(image_ops.equalize(pil)))


@pytest.mark.parametrize("shape", [*SHAPES, (7, 6, 4), (2, 5, 3)])
def test_color_and_sharpness_equal_pillow(shape: tuple[int, ...]) -> None:
    image_module = importlib.import_module("PIL.Image")  # Pillow is a dev dependency: never skipped
    enhance = importlib.import_module("PIL.ImageEnhance")  # Pillow is a dev dependency: never skipped
    image = _image(shape, 3)
    for factor in (0.0, 0.1, 0.46, 1.0, 1.54, 1.9):
        for op, reference in ((Color("x", "x"), enhance.Color), (Sharpness("x", "x"), enhance.Sharpness)):
            expected = np.array(reference(image_module.fromarray(image)).enhance(factor))
            np.testing.assert_array_equal(op.apply(image, factor), expected)


@pytest.mark.parametrize("shape", SHAPES)
def test_affine_ops_equal_fastestimators_pillow_calls(shape: tuple[int, ...]) -> None:
    image_module = importlib.import_module("PIL.Image")  # Pillow is a dev dependency: never skipped
    transform = importlib.import_module("PIL.ImageTransform")  # Pillow is a dev dependency: never skipped
    image = _image(shape, 4)
    height, width = shape[:2]
    pil = image_module.fromarray(image)

    def warp(size: tuple[int, int], matrix: tuple[float, ...]) -> Any:
        return pil.transform(size, transform.AffineTransform(matrix), resample=image_module.BICUBIC)

    for coef in (-0.5, -0.23, 0.0, 0.07, 0.31, 0.5):
        shift = round(abs(coef) * width)
        expected = warp((width + shift, height), (1.0, coef, -shift if coef > 0 else 0.0, 0.0, 1.0, 0.0))
        np.testing.assert_array_equal(ShearX("x", "x").apply(image, coef), np.array(expected.resize((width, height))))
        shift = round(abs(coef) * height)
        expected = warp((width, height + shift), (1.0, 0.0, 0.0, coef, 1.0, -shift if coef > 0 else 0.0))
        np.testing.assert_array_equal(ShearY("x", "x").apply(image, coef), np.array(expected.resize((width, height))))
        np.testing.assert_array_equal(TranslateX("x", "x").apply(image, coef),
                                      np.array(warp((width, height), (1.0, 0.0, coef * width, 0.0, 1.0, 0.0))))
        np.testing.assert_array_equal(TranslateY("x", "x").apply(image, coef),
                                      np.array(warp((width, height), (1.0, 0.0, 0.0, 0.0, 1.0, coef * height))))


@pytest.mark.parametrize("shape", [*SHAPES, (8, 8)])
def test_rotate_equals_pillow(shape: tuple[int, ...]) -> None:
    image_module = importlib.import_module("PIL.Image")  # Pillow is a dev dependency: never skipped
    image = _image(shape, 5)
    for angle in (0.0, 90.0, -90.0, 180.0, 270.0, 360.0, 45.0, 30.5, -17.3, 89.99, 123.4):
        np.testing.assert_array_equal(Rotate("x", "x").apply(image, angle),
                                      np.array(image_module.fromarray(image).rotate(angle)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_])
def test_affine_ops_equal_pillow_on_gray_float_int_and_bool_images(dtype: type) -> None:
    """Pillow makes F, I and 1 mode images of these arrays: F and I warp bicubically (F's row differences in single
    precision), 1 always nearest neighbour (its scaling path when there is no shear)."""
    image_module = importlib.import_module("PIL.Image")  # Pillow is a dev dependency: never skipped
    transform = importlib.import_module("PIL.ImageTransform")  # Pillow is a dev dependency: never skipped
    rng = np.random.default_rng(9)
    for shape in ((9, 7), (2, 3)):
        image = (rng.random(shape) * 3 - 1 if dtype != np.int32 else rng.integers(-9000, 9000, shape)).astype(dtype)
        if dtype == np.bool_:
            image = rng.random(shape) > 0.5
        pil = image_module.fromarray(image)
        height, width = shape

        def warp(size: tuple[int, int], matrix: tuple[float, ...], pil: Any = pil) -> Any:
            return pil.transform(size, transform.AffineTransform(matrix), resample=image_module.BICUBIC)

        for coef in (-0.31, 0.0, 0.137, 0.5):
            shift = round(abs(coef) * width)
            sheared = warp((width + shift, height), (1.0, coef, -shift if coef > 0 else 0.0, 0.0, 1.0, 0.0))
            cases = [(ShearX("x", "x").apply(image, coef), np.array(sheared.resize((width, height)))),
                     (TranslateX("x", "x").apply(image, coef),
                      np.array(warp((width, height), (1.0, 0.0, coef * width, 0.0, 1.0, 0.0)))),
                     (TranslateY("x", "x").apply(image, coef),
                      np.array(warp((width, height), (1.0, 0.0, 0.0, 0.0, 1.0, coef * height)))),
                     (Rotate("x", "x").apply(image, coef * 100), np.array(pil.rotate(coef * 100)))]
            shift = round(abs(coef) * height)
            sheared = warp((width, height + shift), (1.0, 0.0, 0.0, coef, 1.0, -shift if coef > 0 else 0.0))
            cases.append((ShearY("x", "x").apply(image, coef), np.array(sheared.resize((width, height)))))
            for ours, expected in cases:
                assert ours.dtype == expected.dtype  # float64 comes back float32, as from Pillow's F mode
                np.testing.assert_array_equal(ours, expected)


def test_rua_rotate_takes_uint16_images() -> None:
    image = np.arange(30, dtype=np.uint16).reshape(5, 6) * 1000
    np.testing.assert_array_equal(Rotate("x", "x").apply(image, 180.0), image[::-1, ::-1])


# ------------------------------------------------------------------ hand-computed values (no Pillow needed)
def test_autocontrast_and_equalize_tables_by_hand() -> None:
    image = np.array([[50, 100], [150, 150]], dtype=np.uint8)
    # scale 255 / 100, offset -127.5: int(100 * 2.55 - 127.5) = int(127.5) = 127.
    np.testing.assert_array_equal(AutoContrast("x", "x").forward(image, {}), [[0, 127], [255, 255]])
    flat = np.full((3, 3), 9, dtype=np.uint8)
    np.testing.assert_array_equal(AutoContrast("x", "x").forward(flat, {}), flat)  # one value: unchanged
    ramp = np.repeat(np.arange(0, 256, dtype=np.uint8)[None], 2, axis=0)  # every level twice: step = 510 // 255 = 2
    expected = (1 + 2 * np.arange(256)) // 2  # (step // 2 + count below level) // step
    np.testing.assert_array_equal(Equalize("x", "x").forward(ramp, {}), np.repeat(expected[None], 2, axis=0))


def test_enhance_and_warp_special_factors_by_hand() -> None:
    image = _image((6, 10, 3), 6)
    np.testing.assert_array_equal(Sharpness("x", "x").apply(image, 1.0), image)
    red, green, blue = (image[..., c].astype(np.int64) for c in range(3))
    gray = (red * 19595 + green * 38470 + blue * 7471 + 0x8000) >> 16
    np.testing.assert_array_equal(Color("x", "x").apply(image, 0.0), np.repeat(gray[..., None], 3, axis=-1))
    np.testing.assert_array_equal(ShearX("x", "x").apply(image, 0.0), image)
    shifted = TranslateX("x", "x").apply(image, 0.2)  # exactly 2 columns: bicubic at whole pixels copies them
    np.testing.assert_array_equal(shifted[:, :8], image[:, 2:])
    assert not shifted[:, 8:].any()
    down = TranslateY("x", "x").apply(image, -0.5)  # 3 rows down
    np.testing.assert_array_equal(down[3:], image[:3])
    assert not down[:3].any()
    square = _image((5, 5), 7)
    np.testing.assert_array_equal(Rotate("x", "x").apply(square, 90.0), np.rot90(square))
    np.testing.assert_array_equal(Rotate("x", "x").apply(image, 180.0), image[::-1, ::-1])


def test_ops_keep_one_channel_images_and_reject_others() -> None:
    image = _image((6, 6, 1), 8)
    for op in (ShearX("x", "x"), Rotate("x", "x"), Sharpness("x", "x"), Color("x", "x")):
        assert op.apply(image, 0.3).shape == (6, 6, 1)
    np.testing.assert_array_equal(Color("x", "x").apply(image, 0.0), image)
    with pytest.raises(ValueError, match=r"RGBA is not supported"):
        ShearX("x", "x").apply(_image((4, 4, 4)), 0.1)
    with pytest.raises(TypeError, match=r"uint8, int32, float32, float64, bool images, but \['x'\] has dtype uint16"):
        TranslateY("x", "x").apply(np.zeros((4, 4), np.uint16), 0.1)  # Pillow's bicubic warp misreads uint16
    with pytest.raises(TypeError, match=r"float32 images in grayscale only"):
        ShearX("x", "x").apply(np.zeros((4, 4, 3), np.float32), 0.1)  # Pillow can't make an image of it
    with pytest.raises(TypeError, match="uint8"):
        AutoContrast("x", "x").forward(np.zeros((4, 4), np.float32), {})
    with pytest.raises(ValueError, match=r"grayscale \(height, width\[, 1\]\) or RGB"):
        Equalize("x", "x").forward(_image((4, 4, 4)), {})  # Pillow's ImageOps refuses RGBA too


def test_histogram_op_as_a_pop_works_per_sample() -> None:
    batch = np.stack([np.array([[10, 20]], np.uint8), np.array([[100, 200]], np.uint8)])
    # Each sample's own table; 200 * (255 / 100) - 255 is 254.99999999999994 in floats, truncated as by Pillow.
    np.testing.assert_array_equal(AutoContrast("x", "x").forward_batch(batch, {}), [[[0, 255]], [[0, 254]]])


# ------------------------------------------------------------------ the package-level (albumentations') Equalize
def test_albumentations_equalize_cv_formula_by_hand() -> None:
    image = np.array([[0, 0, 1, 2]], np.uint8)
    # First present level 0 (2 pixels); scale 255 / (4 - 2): level 1 -> round(127.5) = 128 (half to even), 2 -> 255.
    np.testing.assert_array_equal(AlbEqualize("x", "x").forward(image, {}), [[0, 0, 128, 255]])
    np.testing.assert_array_equal(AlbEqualize("x", "x").forward(np.full((2, 2), 9, np.uint8), {}), np.full((2, 2), 9))
    rgb = np.stack([image, image[:, ::-1], np.full_like(image, 4)], axis=-1)
    out = AlbEqualize("x", "x").forward(rgb, {})
    np.testing.assert_array_equal(out[..., 1], [[255, 128, 0, 0]])  # each channel its own histogram
    masked = AlbEqualize("x", "x", mask=np.array([[0, 1, 1, 1]])).forward(image, {})  # histogram 0, 1, 2 once each
    np.testing.assert_array_equal(masked, [[0, 0, 128, 255]])
    called = AlbEqualize("x", "x", mask=lambda image: image > 0).forward(image, {})  # only levels 1, 2 counted
    np.testing.assert_array_equal(called, [[0, 0, 0, 255]])


def test_albumentations_equalize_pil_mode_and_luma() -> None:
    image = _image((9, 8, 3), 11) // 2 + 40
    pil_mode = AlbEqualize("x", "x", eq_mode="pil").forward(image.astype(np.uint8), {})
    np.testing.assert_array_equal(pil_mode, Equalize("x", "x").forward(image.astype(np.uint8), {}))
    luma = AlbEqualize("x", "x", by_channels=False).forward(np.repeat(image[..., :1], 3, axis=-1), {})
    gray = AlbEqualize("x", "x").forward(image[..., 0], {})
    np.testing.assert_array_equal(luma, np.repeat(gray[..., None], 3, axis=-1))  # gray: luma is the image itself
    with pytest.raises(ValueError, match="eq_mode must be 'cv' or 'pil'"):
        AlbEqualize("x", "x", eq_mode="cv2")
    with pytest.raises(ValueError, match="mask_params"):
        AlbEqualize("x", "x", mask_params=["label"])
    with pytest.raises(ValueError, match="does not fit"):
        AlbEqualize("x", "x", mask=np.ones((3, 3))).forward(image, {})


def test_albumentations_equalize_matches_opencv_when_available() -> None:
    cv2 = pytest.importorskip("cv2")
    image = _image((12, 9, 3), 12)
    expected = np.stack([cv2.equalizeHist(image[..., c]) for c in range(3)], axis=-1)
    np.testing.assert_array_equal(AlbEqualize("x", "x").forward(image, {}), expected)
    ycrcb = cv2.cvtColor(image, cv2.COLOR_RGB2YCrCb)
    ycrcb[..., 0] = cv2.equalizeHist(ycrcb[..., 0])
    np.testing.assert_array_equal(AlbEqualize("x", "x", by_channels=False).forward(image, {}),
                                  cv2.cvtColor(ycrcb, cv2.COLOR_YCrCb2RGB))


# ------------------------------------------------------------------ parameters and RUA levels
def test_factors_come_from_the_generator_and_rua_level_narrows_them() -> None:
    for op, attr, default in ((ShearX("x", "x"), "shear_coef", 0.3), (ShearY("x", "x"), "shear_coef", 0.3),
                              (TranslateX("x", "x"), "shift_limit", 0.2), (TranslateY("x", "x"), "shift_limit", 0.2),
                              (Rotate("x", "x"), "limit", 30.0), (Color("x", "x"), "limit", 0.54),
                              (Sharpness("x", "x"), "limit", 0.54)):
        assert getattr(op, attr) == (-default, default)
        expected = np.random.default_rng(3).uniform(-default, default)
        offset = 1.0 if isinstance(op, (Color, Sharpness)) else 0.0
        assert op.get_params(None, _state(3)) == pytest.approx(expected + offset)  # type: ignore[arg-type]
        op.set_rua_level(0.5)
        assert getattr(op, attr) == pytest.approx((-default / 2, default / 2))
    assert ShearX("x", "x", shear_coef=(0.1, 0.3)).shear_coef == (0.1, 0.3)


def test_rua_posterize_and_solarize_levels() -> None:
    posterize = Posterize("x", "x")
    assert posterize.num_bits == (7, 7)
    posterize.set_rua_level(0.5)  # int n -> (round(8 - 0.5 * 7), 8) = (round(4.5), 8) = (4, 8): Python's round
    assert posterize.num_bits == (4, 8)
    per_channel = Posterize("x", "x", num_bits=((2, 8), 6, (4, 4)))
    per_channel.set_rua_level(0.5)
    assert per_channel.num_bits == [(4, 6), (5, 8), (4, 4)]
    solarize = Solarize("x", "x")
    solarize.set_rua_level(0.5)
    assert solarize.threshold == 128.0
    threshold = solarize.get_params(None, _state(2))  # type: ignore[arg-type]
    assert threshold == 256 - round(np.random.default_rng(2).uniform(0, 128))
    image = np.array([[0, 127, 128, 255]], np.uint8)
    np.testing.assert_array_equal(solarize.apply(image, 128), [[0, 127, 127, 0]])
    pair = Solarize("x", "x", threshold=(10, 30))
    pair.set_rua_level(0.25)
    assert pair.threshold == 15.0
    with pytest.raises(ValueError, match="threshold must be a number or a pair"):
        Solarize("x", "x", threshold="high")  # type: ignore[arg-type]


def test_rua_counts_ops_by_level() -> None:
    assert len(RUA("x", "x", level=0).ops) == 1
    full = RUA("x", "x", level=30)
    assert len(full.ops) == 5 and all(isinstance(op, OneOfMultiVar) for op in full.ops)
    default = RUA("x", "x")  # level 18: 1 + 18 * 4 / 30 = 3.4 -> three always, a fourth with probability 0.4
    assert len(default.ops) == 4 and isinstance(default.ops[3], Sometimes)
    assert default.ops[3].prob == pytest.approx(0.4)
    assert len(default.ops[0].ops) == 14
    two = RUA("x", "x", choices=["Rotate", "Identity"], level=15)  # 1 + 15 * 1 / 30 = 1.5
    assert len(two.ops) == 2 and two.ops[1].prob == pytest.approx(0.5)


def test_rua_scales_the_default_ranges() -> None:
    rotate = RUA("x", "x", choices="Rotate", level=15).ops[0].ops[0]
    assert rotate.limit == pytest.approx((-45.0, 45.0))  # limit 90 at half strength
    ops = {type(op).__name__: op for op in RUA("x", "x", level=30).ops[0].ops}
    assert ops["Brightness"].limit == pytest.approx((-0.9, 0.9))
    assert ops["ShearY"].shear_coef == pytest.approx((-0.5, 0.5))
    assert ops["TranslateX"].shift_limit == pytest.approx((-0.33, 0.33))
    assert ops["Posterize"].num_bits == (1, 8)
    assert ops["Solarize"].threshold == 256.0


def test_rua_choices() -> None:
    names = [type(op).__name__ for op in RUA("x", "x", choices=["!Rotate", "!Color"]).ops[0].ops]
    assert len(names) == 12 and "Rotate" not in names and "Color" not in names
    custom = Brightness("x", "x", limit=0.5)
    chosen = RUA("x", "x", choices=["Identity", custom], level=30).ops[0].ops
    assert [type(op) for op in chosen] == [Identity, Brightness] and custom.limit == (-0.5, 0.5)
    with pytest.raises(ValueError, match="not both"):
        RUA("x", "x", choices=["Rotate", "!Color"])
    with pytest.raises(ValueError, match="'defaults' already holds"):
        RUA("x", "x", choices=["defaults", "Rotate"])
    with pytest.raises(ValueError, match=r"no default augmentation\(s\) \['Blur'\]"):
        RUA("x", "x", choices=["Blur"])
    with pytest.raises(ValueError, match="select no augmentation"):
        RUA("x", "x", choices=[])
    with pytest.raises(ValueError, match=r"level must be a number in \[0, 30\]"):
        RUA("x", "x", level=31)
    with pytest.raises(TypeError, match="_Unscalable inside RUA has no set_rua_level"):
        RUA("x", "x", choices=[_Unscalable(inputs="x", outputs="x")])


class _Unscalable(NumpyOp):
    """An op of a user's own with no ``set_rua_level``: RUA cannot scale it."""


def test_rua_takes_lambda_ops_and_meta_ops_among_its_choices() -> None:
    # As in FastEstimator: a LambdaOp's set_rua_level does nothing, Sometimes and OneOf pass the level on.
    inner, first, second = (Brightness("x", "x", limit=0.5) for _ in range(3))
    choices = [Sometimes(inner, prob=1.0), OneOf(first, second), LambdaOp(lambda x: [255 - x], ["x"], ["x"])]
    RUA("x", "x", choices=choices, level=15)
    assert inner.limit == first.limit == second.limit == (-0.25, 0.25)
    with pytest.raises(ValueError, match=r"name their outputs in the same form: op #0 \(Sometimes\) has a list of "
                                         r"keys but op #1 \(LambdaOp\) has one key string; give every op its outputs "
                                         r"as a list \(outputs=\[...\]\)"):
        RUA("x", "x", choices=[Sometimes(Brightness("x", "x")), LambdaOp(lambda x: 255 - x, inputs="x", outputs="x")])


def test_one_of_multi_var_reads_every_key_and_passes_unwritten_ones_through() -> None:
    op = OneOfMultiVar(Identity("x", "x"), Brightness("y", "z"))
    assert op.inputs == ["x", "y", "z"] and op.outputs == ["x", "z"]
    image = np.full((2, 2), 100, np.uint8)
    for seed in range(6):
        choice = int(np.random.default_rng(seed).integers(2))
        x, z = op.forward([image, image, image * 0], _state(seed))
        np.testing.assert_array_equal(x, image)
        assert (z.any()) == (choice == 1)  # Brightness wrote z (from y), or z passed through as zeros


def _replay_rua(rua: RUA, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RUA by its documented draws: per slot a uniform choice (the last slot after a coin), then the op's own."""
    for slot in rua.ops:
        if isinstance(slot, Sometimes):
            if not rng.random() < slot.prob:
                continue
            slot = slot.op
        chosen = slot.ops[int(rng.integers(len(slot.ops)))]
        params = chosen.get_params(image, {RNG_KEY: rng})
        image = chosen.apply(image, params)
    return image


def test_rua_draws_choices_and_parameters_from_the_sample_generator() -> None:
    rua = RUA("x", "x", level=24)
    image = _image((12, 10, 3), 9)
    outputs = []
    for seed in range(12):
        out = rua.forward([image], _state(seed))[0]
        np.testing.assert_array_equal(out, _replay_rua(rua, image, np.random.default_rng(seed)))
        outputs.append(out.tobytes())
    assert len(set(outputs)) > 6


# ------------------------------------------------------------------ in a Pipeline
N = 6


def _dataset() -> NumpyDataset:
    return NumpyDataset({"x": np.random.default_rng(7).integers(0, 256, (N, 8, 8, 3), dtype=np.uint8),
                         "y": np.arange(N)})


def _ops() -> list[NumpyOp]:
    return [RUA("x", "x", level=20), Rotate("x", "x"), Sharpness("x", "x")]


def test_pipeline_rua_are_exact_by_sample_position() -> None:
    assert_position_seeded(_dataset, _ops, seed=5)
