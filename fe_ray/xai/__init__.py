"""Explainable-AI helpers at FastEstimator's path (``fe.xai``): saliency masks of a model's decisions."""

from fe_ray.xai.saliency import SaliencyNet

__all__ = ["SaliencyNet"]
