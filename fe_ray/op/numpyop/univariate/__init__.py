"""Ops on one kind of data at a time (``fe.op.numpyop.univariate``): each input key transformed alike."""

from fe_ray.op.numpyop.univariate.affine import ShearX, ShearY, TranslateX, TranslateY
from fe_ray.op.numpyop.univariate.basic import ExpandDims, Minmax, Onehot
from fe_ray.op.numpyop.univariate.blur import Blur, GaussianBlur, MedianBlur
from fe_ray.op.numpyop.univariate.calibrate import Calibrate
from fe_ray.op.numpyop.univariate.clahe import CLAHE
from fe_ray.op.numpyop.univariate.coarse_dropout import CoarseDropout
from fe_ray.op.numpyop.univariate.color import ChannelDropout, ChannelShuffle, RGBShift, ToGray, ToSepia
from fe_ray.op.numpyop.univariate.compression import ImageCompression
from fe_ray.op.numpyop.univariate.defocus import Defocus, ZoomBlur
from fe_ray.op.numpyop.univariate.domain_adaptation import FDA, HistogramMatching, PixelDistributionAdaptation
from fe_ray.op.numpyop.univariate.downscale import Downscale
from fe_ray.op.numpyop.univariate.enhance import Brightness, Color, Contrast, Sharpness
from fe_ray.op.numpyop.univariate.equalize import Equalize
from fe_ray.op.numpyop.univariate.hadamard import Hadamard
from fe_ray.op.numpyop.univariate.histogram import AutoContrast
from fe_ray.op.numpyop.univariate.hsv import ColorJitter, HueSaturationValue
from fe_ray.op.numpyop.univariate.invert import FromFloat, InvertImg
from fe_ray.op.numpyop.univariate.motion_blur import MotionBlur
from fe_ray.op.numpyop.univariate.multiplicative_noise import MultiplicativeNoise
from fe_ray.op.numpyop.univariate.noise import ISONoise
from fe_ray.op.numpyop.univariate.normalize import Binarize, Normalize, ToFloat
from fe_ray.op.numpyop.univariate.photometric import (
    GaussianNoise,
    Posterize,
    RandomBrightnessContrast,
    RandomGamma,
    Solarize,
)
from fe_ray.op.numpyop.univariate.random_shapes import RandomShapes
from fe_ray.op.numpyop.univariate.read_image import ReadImage
from fe_ray.op.numpyop.univariate.reshape import ChannelTranspose, Reshape
from fe_ray.op.numpyop.univariate.rua import RUA
from fe_ray.op.numpyop.univariate.text import PadSequence, Tokenize, WordtoId
from fe_ray.op.numpyop.univariate.to_array import ToArray
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp
from fe_ray.op.numpyop.univariate.weather import RandomFog, RandomRain, RandomShadow, RandomSnow, RandomSunFlare
from fe_ray.util.module_aliases import register_module_aliases

__all__ = ["AutoContrast", "Binarize", "Blur", "Brightness", "CLAHE", "Calibrate", "ChannelDropout", "ChannelShuffle",
           "ChannelTranspose", "CoarseDropout", "Color", "ColorJitter", "Contrast", "Defocus", "Downscale",
           "Equalize", "ExpandDims", "FDA", "FromFloat", "GaussianBlur", "GaussianNoise", "Hadamard",
           "HistogramMatching", "HueSaturationValue", "ISONoise", "ImageCompression", "InvertImg", "MedianBlur",
           "Minmax", "MotionBlur", "MultiplicativeNoise", "Normalize", "Onehot", "PadSequence",
           "PixelDistributionAdaptation", "Posterize", "RGBShift", "RUA", "RandomBrightnessContrast", "RandomFog",
           "RandomGamma", "RandomRain", "RandomShadow", "RandomShapes", "RandomSnow", "RandomSunFlare", "ReadImage",
           "Reshape", "Sharpness", "ShearX", "ShearY", "Solarize", "ToArray", "ToFloat", "ToGray", "ToSepia",
           "Tokenize", "TranslateX", "TranslateY", "UnivariateOp", "WordtoId", "ZoomBlur"]

# FastEstimator's one-module-per-op paths (``...univariate.expand_dims.ExpandDims``), served by the modules above.
register_module_aliases(__name__, {
    "autocontrast": "AutoContrast", "binarize": "Binarize", "brightness": "Brightness", "calibate": "Calibrate",
    "channel_dropout": "ChannelDropout", "channel_shuffle": "ChannelShuffle", "channel_transpose": "ChannelTranspose",
    "color_jitter": "ColorJitter", "contrast": "Contrast", "expand_dims": "ExpandDims", "fda": "FDA",
    "from_float": "FromFloat", "gaussian_blur": "GaussianBlur", "gaussian_noise": "GaussianNoise",
    "histogram_matching": "HistogramMatching", "hue_saturation_value": "HueSaturationValue",
    "image_compression": "ImageCompression", "invert_img": "InvertImg", "iso_noise": "ISONoise",
    "median_blur": "MedianBlur", "minmax": "Minmax", "onehot": "Onehot", "pad_sequence": "PadSequence",
    "pixel_distribution_adaptation": "PixelDistributionAdaptation", "posterize": "Posterize",
    "random_brightness_contrast": "RandomBrightnessContrast", "random_fog": "RandomFog", "random_gamma": "RandomGamma",
    "random_rain": "RandomRain", "random_shadow": "RandomShadow", "random_snow": "RandomSnow",
    "random_sun_flare": "RandomSunFlare", "rgb_shift": "RGBShift", "sharpness": "Sharpness", "shear_x": "ShearX",
    "shear_y": "ShearY", "solarize": "Solarize", "to_float": "ToFloat", "to_gray": "ToGray", "to_sepia": "ToSepia",
    "tokenize": "Tokenize", "translate_x": "TranslateX", "translate_y": "TranslateY", "word_to_id": "WordtoId",
    "zoom_blur": "ZoomBlur",
})
