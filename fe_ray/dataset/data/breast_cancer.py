"""The Wisconsin breast cancer table (569 samples, 30 features; bundled with scikit-learn: no download).

Split as FastEstimator's ``breast_cancer.load_data`` splits it: scikit-learn's ``train_test_split`` with
``test_size=0.2`` and ``random_state=42``, so the train / eval samples are the very ones FastEstimator gives.
"""

from __future__ import annotations

import numpy as np

from fe_ray.dataset.numpy_dataset import NumpyDataset


def load_data() -> tuple[NumpyDataset, NumpyDataset]:
    """Load the table as ``(train, eval)`` NumpyDatasets: 455 and 114 samples, with keys ``x`` ((30,) float32
    features) and ``y`` (int64 label: 0 malignant, 1 benign).
    """
    # Local imports: scikit-learn is slow to import and only needed here.
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    features, labels = load_breast_cancer(return_X_y=True)
    x_train, x_eval, y_train, y_eval = train_test_split(features, labels, test_size=0.2, random_state=42)
    return (NumpyDataset({"x": x_train.astype(np.float32), "y": y_train}),
            NumpyDataset({"x": x_eval.astype(np.float32), "y": y_eval}))
