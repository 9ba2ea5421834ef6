"""scikit-learn's 8x8 handwritten digits (1,797 images, bundled with scikit-learn: no download)."""

from __future__ import annotations

import numpy as np

from fe_ray.dataset.data._split import split_dataset
from fe_ray.dataset.numpy_dataset import NumpyDataset


def load_data(eval_split: float = 0.2, test_split: float = 0.0,
              seed: int = 42) -> tuple[NumpyDataset, NumpyDataset] | tuple[NumpyDataset, NumpyDataset, NumpyDataset]:
    """Load the digits as NumpyDatasets with keys ``x`` ((8, 8) float32 in 0..16) and ``y`` (int64 class 0..9).

    Args:
        eval_split: Fraction of the samples held out for evaluation (> 0).
        test_split: Fraction held out for testing; 0 returns no test set.
        seed: Seed of the random split.

    Returns:
        ``(train, eval)``, or ``(train, eval, test)`` when ``test_split > 0``.

    Raises:
        ValueError: If the fractions are not in [0, 1), ``eval_split`` is 0, or nothing is left for training.
    """
    if eval_split <= 0:
        raise ValueError(f"digits.load_data needs eval_split > 0, got {eval_split!r}.")
    from sklearn.datasets import load_digits  # local import: scikit-learn is slow to import and only needed here

    bunch = load_digits()
    full = NumpyDataset({"x": bunch.images.astype(np.float32), "y": bunch.target.astype(np.int64)})
    return tuple(split_dataset(full, [eval_split, test_split], seed))  # type: ignore[return-value]
