"""TensorOps augmenting whole batches inside a Network: MixUp and CutMix."""

from fe_ray.op.tensorop.augmentation.cutmix_batch import CutMixBatch
from fe_ray.op.tensorop.augmentation.mixup_batch import MixUpBatch

__all__ = ["CutMixBatch", "MixUpBatch"]
