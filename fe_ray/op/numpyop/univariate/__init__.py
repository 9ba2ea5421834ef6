"""Ops on one kind of data at a time (``fe.op.numpyop.univariate``): each input key transformed alike."""

from fe_ray.op.numpyop.univariate.basic import ExpandDims, Minmax, Onehot
from fe_ray.op.numpyop.univariate.coarse_dropout import CoarseDropout
from fe_ray.op.numpyop.univariate.normalize import Binarize, Normalize, ToFloat
from fe_ray.op.numpyop.univariate.reshape import ChannelTranspose, Reshape
from fe_ray.op.numpyop.univariate.univariate import UnivariateOp

__all__ = ["Binarize", "ChannelTranspose", "CoarseDropout", "ExpandDims", "Minmax", "Normalize", "Onehot", "Reshape",
           "ToFloat", "UnivariateOp"]
