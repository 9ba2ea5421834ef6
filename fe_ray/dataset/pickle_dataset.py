"""PickleDataset: one sample per row of a pickled table (a pandas DataFrame, as FastEstimator reads)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

from fe_ray.dataset._files import checked_file, open_file
from fe_ray.dataset.in_memory_dataset import InMemoryDataset


class PickleDataset(InMemoryDataset):
    """A dataset with one sample per row of a pickled pandas DataFrame: sample ``i`` is ``{column: value}``.

    The file is unpickled as ``pandas.read_pickle`` does (``.gz``, ``.bz2`` and ``.xz`` files are decompressed), so
    a pickled DataFrame needs pandas installed to load, as in FastEstimator; fe_ray itself does not need pandas.
    ``parent_path`` is the file's folder, for columns holding relative file paths.

    Differences from FastEstimator: rows are numbered by position, so a DataFrame whose index is not ``0..n-1``
    (filtered or re-indexed) loads in row order where FastEstimator's samples would be keyed by the index labels;
    and besides a DataFrame the file may hold a ``{column: values}`` dict of equal-length columns or a list of
    ``{column: value}`` rows.

    Only unpickle files you trust: unpickling runs code the file names.

    Args:
        file_path: Path of the pickle file.

    Raises:
        FileNotFoundError: If ``file_path`` does not exist.
        ValueError: If the path is a folder, or columns of a ``{column: values}`` dict differ in length.
        TypeError: If the file holds something other than a DataFrame, a dict of columns or a list of rows, or a
            column name is not a string.
    """

    def __init__(self, file_path: str | os.PathLike[str]) -> None:
        path = checked_file(file_path, "PickleDataset", "pass the path of a pickle file (for a folder of files use "
                            "DirDataset or LabeledDirDataset).")
        with open_file(path, "rb") as file:
            table = pickle.load(file)  # noqa: S301 - reading a pickle is this dataset's purpose (see the docstring)
        super().__init__(_rows(table, path))
        self.parent_path = os.path.dirname(path)


def _rows(table: Any, path: str) -> list[Mapping[str, Any]]:
    """The rows of an unpickled DataFrame, ``{column: values}`` dict or list of rows."""
    if hasattr(table, "to_dict") and hasattr(table, "columns"):  # a DataFrame (duck-typed: pandas is not imported)
        return list(table.to_dict(orient="records"))
    if isinstance(table, Mapping):
        lengths = {name: len(values) for name, values in table.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"PickleDataset file {path!r} holds columns of different lengths {lengths}; every column "
                             "needs one value per row.")
        count = next(iter(lengths.values()), 0)
        return [{name: values[i] for name, values in table.items()} for i in range(count)]
    if isinstance(table, Sequence) and not isinstance(table, (str, bytes)):
        return list(table)
    raise TypeError(f"PickleDataset file {path!r} holds a {type(table).__name__}; it needs a pickled pandas "
                    "DataFrame, a {column: values} dict or a list of {column: value} rows.")
