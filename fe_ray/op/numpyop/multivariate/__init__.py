"""Ops that transform an image together with its masks (``fe.op.numpyop.multivariate``)."""

from fe_ray.op.numpyop.multivariate.affine import Affine
from fe_ray.op.numpyop.multivariate.crop import CenterCrop, Crop, RandomCrop
from fe_ray.op.numpyop.multivariate.distortion import ElasticTransform, GridDistortion, OpticalDistortion
from fe_ray.op.numpyop.multivariate.flip import Flip, HorizontalFlip, VerticalFlip
from fe_ray.op.numpyop.multivariate.grid_shuffle import RandomGridShuffle
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.multivariate.pad_if_needed import PadIfNeeded
from fe_ray.op.numpyop.multivariate.resize import LongestMaxSize, RandomScale, Resize, SmallestMaxSize
from fe_ray.op.numpyop.multivariate.resized_crop import RandomResizedCrop, RandomSizedCrop
from fe_ray.op.numpyop.multivariate.rotate import Rotate
from fe_ray.op.numpyop.multivariate.shift_scale_rotate import ShiftScaleRotate
from fe_ray.op.numpyop.multivariate.transpose import RandomRotate90, Transpose

__all__ = ["Affine", "CenterCrop", "Crop", "ElasticTransform", "Flip", "GridDistortion", "HorizontalFlip",
           "LongestMaxSize", "MultiVariateOp", "OpticalDistortion", "PadIfNeeded", "RandomCrop", "RandomGridShuffle",
           "RandomResizedCrop", "RandomRotate90", "RandomScale", "RandomSizedCrop", "Resize", "Rotate",
           "ShiftScaleRotate", "SmallestMaxSize", "Transpose", "VerticalFlip"]
