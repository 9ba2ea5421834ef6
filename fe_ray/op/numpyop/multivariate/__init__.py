"""Ops that transform an image together with its masks (``fe.op.numpyop.multivariate``)."""

from fe_ray.op.numpyop.multivariate.crop import CenterCrop, RandomCrop
from fe_ray.op.numpyop.multivariate.flip import HorizontalFlip, VerticalFlip
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.multivariate.pad_if_needed import PadIfNeeded
from fe_ray.op.numpyop.multivariate.rotate import Rotate

__all__ = ["CenterCrop", "HorizontalFlip", "MultiVariateOp", "PadIfNeeded", "RandomCrop", "Rotate",
           "VerticalFlip"]
