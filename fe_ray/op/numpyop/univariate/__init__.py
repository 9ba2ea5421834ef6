"""Ops on one kind of data at a time (``fe.op.numpyop.univariate``): each input key transformed alike."""

from fe_ray.op.numpyop.univariate.basic import ExpandDims, Minmax, Onehot
from fe_ray.op.numpyop.univariate.coarse_dropout import CoarseDropout
from fe_ray.op.numpyop.univariate.color import ChannelDropout, ChannelShuffle, RGBShift, ToGray, ToSepia
from fe_ray.op.numpyop.univariate.enhance import Brightness, Contrast
from fe_ray.op.numpyop.univariate.normalize import Binarize, Normalize, ToFloat
from fe_ray.op.numpyop.univariate.photometric import (
    GaussianNoise,
    Posterize,
    RandomBrightnessContrast,
    RandomGamma,
    Solarize,
)
from fe_ray.op.numpyop.univariate.read_image import ReadImage
from fe_ray.op.numpyop.univariate.reshape import ChannelTranspose, Reshape
from fe_ray.op.numpyop.univariate.text import PadSequence, Tokenize, WordtoId
from fe_ray.op.numpyop.univariate.to_array import ToArray
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

__all__ = ["Binarize", "Brightness", "ChannelDropout", "ChannelShuffle", "ChannelTranspose", "CoarseDropout",
           "Contrast", "ExpandDims", "GaussianNoise", "Minmax", "Normalize", "Onehot", "PadSequence", "Posterize",
           "RGBShift", "RandomBrightnessContrast", "RandomGamma", "ReadImage", "Reshape", "Solarize", "ToArray",
           "ToFloat", "ToGray", "ToSepia", "Tokenize", "UnivariateOp", "WordtoId"]
