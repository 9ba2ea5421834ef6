"""Ops that transform an image together with its masks (``fe.op.numpyop.multivariate``)."""

from fe_ray.op.numpyop.multivariate.affine import Affine
from fe_ray.op.numpyop.multivariate.bbox_crop import BBoxSafeRandomCrop, RandomCropNearBBox, RandomSizedBBoxSafeCrop
from fe_ray.op.numpyop.multivariate.crop import CenterCrop, Crop, RandomCrop
from fe_ray.op.numpyop.multivariate.crop_and_pad import CropAndPad
from fe_ray.op.numpyop.multivariate.crop_from_borders import RandomCropFromBorders
from fe_ray.op.numpyop.multivariate.distortion import ElasticTransform, GridDistortion, OpticalDistortion
from fe_ray.op.numpyop.multivariate.flip import Flip, HorizontalFlip, VerticalFlip
from fe_ray.op.numpyop.multivariate.grid_shuffle import RandomGridShuffle
from fe_ray.op.numpyop.multivariate.mask_crop import CropNonEmptyMaskIfExists
from fe_ray.op.numpyop.multivariate.mask_dropout import MaskDropout
from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp
from fe_ray.op.numpyop.multivariate.pad_if_needed import PadIfNeeded
from fe_ray.op.numpyop.multivariate.read_mat import ReadMat
from fe_ray.op.numpyop.multivariate.resize import LongestMaxSize, RandomScale, Resize, SmallestMaxSize
from fe_ray.op.numpyop.multivariate.resized_crop import RandomResizedCrop, RandomSizedCrop
from fe_ray.op.numpyop.multivariate.rotate import Rotate
from fe_ray.op.numpyop.multivariate.shift_scale_rotate import ShiftScaleRotate
from fe_ray.op.numpyop.multivariate.transpose import RandomRotate90, Transpose
from fe_ray.util.module_aliases import register_module_aliases

__all__ = ["Affine", "BBoxSafeRandomCrop", "CenterCrop", "Crop", "CropAndPad", "CropNonEmptyMaskIfExists",
           "ElasticTransform", "Flip", "GridDistortion", "HorizontalFlip", "LongestMaxSize", "MaskDropout",
           "MultiVariateOp", "OpticalDistortion", "PadIfNeeded", "RandomCrop", "RandomCropFromBorders",
           "RandomCropNearBBox", "RandomGridShuffle", "RandomResizedCrop", "RandomRotate90", "RandomScale",
           "RandomSizedBBoxSafeCrop", "RandomSizedCrop", "ReadMat", "Resize", "Rotate", "ShiftScaleRotate",
           "SmallestMaxSize", "Transpose", "VerticalFlip"]

# FastEstimator's one-module-per-op paths (``...multivariate.horizontal_flip.HorizontalFlip``), served by the modules
# above.
register_module_aliases(__name__, {
    "bbox_safe_random_crop": "BBoxSafeRandomCrop", "random_crop_near_bbox": "RandomCropNearBBox",
    "random_sized_bbox_safe_crop": "RandomSizedBBoxSafeCrop",
    "center_crop": "CenterCrop", "crop_non_empty_mask_if_exists": "CropNonEmptyMaskIfExists",
    "elastic_transform": "ElasticTransform", "grid_distortion": "GridDistortion", "horizontal_flip": "HorizontalFlip",
    "longest_max_size": "LongestMaxSize", "optical_distortion": "OpticalDistortion", "random_crop": "RandomCrop",
    "random_crop_from_borders": "RandomCropFromBorders", "random_grid_shuffle": "RandomGridShuffle",
    "random_resized_crop": "RandomResizedCrop", "random_rotate_90": "RandomRotate90", "random_scale": "RandomScale",
    "random_sized_crop": "RandomSizedCrop", "smallest_max_size": "SmallestMaxSize", "vertical_flip": "VerticalFlip",
})
