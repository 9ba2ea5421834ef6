"""The file path a reading op (ReadImage, ReadMat) finds in a sample, resolved against the op's ``parent_path``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def sample_file_path(path: Any, parent_path: str, owner: str) -> str:
    """``path`` (a str, bytes, PathLike, or a 0-d array of one, as a Network pop sees a batch element) joined to
    ``parent_path`` and normalised.

    Args:
        path: The value the op read from the sample.
        parent_path: The folder relative paths start from ('' for the working directory).
        owner: Names the op and its input key(s) in the error, e.g. ``"ReadImage ['x']"``.

    Raises:
        TypeError: If ``path`` is not a path.
    """
    if isinstance(path, np.ndarray) and path.ndim == 0:
        path = path.item()
    if isinstance(path, bytes):
        path = path.decode()
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{owner} must hold file paths (str), got {type(path).__name__}: {path!r:.100}.")
    return os.path.normpath(os.path.join(parent_path, os.fspath(path)))
