"""scikit-learn's 8x8 handwritten digits as one NumpyDataset, as FastEstimator's ``skl_digits.load_data``.

The 1,797 images ship inside scikit-learn, so this works offline. (fe_ray's :mod:`fe_ray.dataset.data.digits` loads
the same images already split into train / eval parts.)
"""

from __future__ import annotations

from fe_ray.dataset.numpy_dataset import NumpyDataset


def load_data(image_key: str = "x", label_key: str = "y") -> NumpyDataset:
    """Load all 1,797 digits, unsplit: ``image_key`` holds (8, 8) float64 images (0..16), ``label_key`` int64 0..9.

    Args:
        image_key: The key of the images.
        label_key: The key of the labels.

    Returns:
        One NumpyDataset of every sample, in scikit-learn's order (split it with ``dataset.split(...)``).

    Raises:
        ValueError: If the two keys are equal.
    """
    if image_key == label_key:
        raise ValueError(f"skl_digits.load_data needs two different keys, got image_key=label_key={image_key!r}.")
    from sklearn.datasets import load_digits  # local import: scikit-learn is slow to import and only needed here

    bunch = load_digits()
    return NumpyDataset({image_key: bunch.images, label_key: bunch.target})
