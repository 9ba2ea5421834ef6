"""LabeledDirDataset at FastEstimator's module path (``fastestimator.dataset.labeled_dir_dataset``); it lives in
:mod:`fe_ray.dataset.dir_dataset`."""

from fe_ray.dataset.dir_dataset import LabeledDirDataset

__all__ = ["LabeledDirDataset"]
