"""The Pipeline: per-mode datasets, per-sample NumpyOps, batching and a resumable, seeded data order."""

from fe_ray.pipeline.loader import Loader
from fe_ray.pipeline.pipeline import Pipeline

__all__ = ["Loader", "Pipeline"]
