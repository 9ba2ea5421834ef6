"""Datasets: in-memory NumpyDataset and small bundled example data (``fe_ray.dataset.data``)."""

from fe_ray.dataset.numpy_dataset import NumpyDataset

__all__ = ["NumpyDataset"]
