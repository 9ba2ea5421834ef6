"""Explainable-AI traces at FastEstimator's path (``fe.trace.xai``): saliency masks and class activation maps drawn
over images each epoch, and per-class / per-sample metric histories."""

from fe_ray.trace.xai.eigen_cam import EigenCAM
from fe_ray.trace.xai.grad_cam import GradCAM
from fe_ray.trace.xai.instance_tracker import InstanceTracker
from fe_ray.trace.xai.label_tracker import LabelTracker
from fe_ray.trace.xai.saliency import Saliency

__all__ = ["EigenCAM", "GradCAM", "InstanceTracker", "LabelTracker", "Saliency"]
