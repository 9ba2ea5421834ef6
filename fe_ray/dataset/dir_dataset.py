"""DirDataset and LabeledDirDataset: one sample per file under a folder, holding the file's path (not its content).

As in FastEstimator, the samples hold paths as strings; reading the files (images, arrays, text) is the job of a
per-sample op. Files whose name starts with ``.`` (``.DS_Store``, editor swap files) are left out, and the order is
sorted, so that the same folder always gives the same samples and the same ``split``.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Mapping
from typing import Any

from fe_ray.dataset.in_memory_dataset import InMemoryDataset
from fe_ray.dataset.summary import DatasetSummary


class DirDataset(InMemoryDataset):
    """A dataset with one sample ``{data_key: path}`` per file under ``root_dir``, sorted by path.

    Args:
        root_dir: The folder to list.
        data_key: The key of the path in each sample.
        file_extension: Keep only files whose name ends with this (e.g. ``".png"``; a tuple keeps any of several).
        recursive_search: Also list the files of subfolders (at any depth); False lists ``root_dir`` only.

    Raises:
        FileNotFoundError: If ``root_dir`` does not exist.
        ValueError: If ``root_dir`` is a file, or no file matches (the message lists the extensions present).
        TypeError: If ``data_key`` is not a string or ``file_extension`` neither a string nor a tuple of them.
    """

    def __init__(self, root_dir: str | os.PathLike[str], data_key: str = "x",
                 file_extension: str | tuple[str, ...] | None = None, recursive_search: bool = True) -> None:
        _check_key(data_key, "data_key", type(self).__name__)
        root, found, skipped = _list_files(root_dir, file_extension, recursive_search, type(self).__name__)
        paths = sorted(os.path.join(root, relative) for files in found.values() for relative in files)
        if not paths:
            raise ValueError(_no_files(root, file_extension, skipped, type(self).__name__))
        super().__init__([{data_key: path} for path in paths])
        self.root_dir = os.path.normpath(os.fspath(root_dir))  # FastEstimator's attribute


class LabeledDirDataset(InMemoryDataset):
    """A dataset with one sample ``{data_key: path, label_key: label}`` per file of a ``root_dir/class/file`` tree.

    The class of a file is its folder's path relative to ``root_dir`` (``"cat"``, or ``"animals/cat"`` for deeper
    trees; files directly in ``root_dir`` have the class ``""``, as in FastEstimator, with a warning). Without a
    ``label_mapping``, the classes that hold files are numbered 0, 1, ... in sorted order. Samples are ordered by
    class name, then by file name. (FastEstimator orders the classes as ``os.walk`` lists the folders, which
    depends on the file system, and the files of each class by name; so the sample at an index, and what a
    seeded ``split`` takes, can differ from FastEstimator's, while the labels and each class's files agree.)

    Args:
        root_dir: The folder holding one subfolder per class.
        data_key: The key of the path in each sample.
        label_key: The key of the label in each sample.
        label_mapping: ``{class folder name: label}``; every class holding files must be in it. None (or empty)
            numbers the classes.
        file_extension: Keep only files whose name ends with this (e.g. ``".png"``; a tuple keeps any of several).

    Attributes:
        mapping: The ``{class name: label}`` in use (also returned by :meth:`get_mapping`).

    Raises:
        FileNotFoundError: If ``root_dir`` does not exist.
        ValueError: If ``root_dir`` is a file, no file matches, or ``label_mapping`` lacks a class.
        TypeError: If a key is not a string, ``label_mapping`` is not a dict or ``file_extension`` is neither a
            string nor a tuple of them.
    """

    def __init__(self, root_dir: str | os.PathLike[str], data_key: str = "x", label_key: str = "y",
                 label_mapping: Mapping[str, Any] | None = None,
                 file_extension: str | tuple[str, ...] | None = None) -> None:
        name = type(self).__name__
        _check_key(data_key, "data_key", name)
        _check_key(label_key, "label_key", name)
        if data_key == label_key:
            raise ValueError(f"{name} data_key and label_key are both {data_key!r}; give them different names.")
        if label_mapping is not None and not isinstance(label_mapping, Mapping):
            raise TypeError(f"{name} label_mapping must be a dict {{class folder name: label}}, got "
                            f"{type(label_mapping).__name__}.")
        root, found, skipped = _list_files(root_dir, file_extension, True, name)
        if not found:
            raise ValueError(_no_files(root, file_extension, skipped, name))
        if "" in found:
            warnings.warn(f"{name}: {len(found[''])} file(s) directly in {root!r} get the class '' (only files in "
                          "subfolders have a named class); move them out or pass file_extension to leave them out.",
                          stacklevel=2)
        self.mapping: dict[str, Any] = dict(label_mapping) if label_mapping else {
            label: number for number, label in enumerate(sorted(found))}
        missing = sorted(set(found) - set(self.mapping))
        if missing:
            raise ValueError(f"{name} label_mapping has no label for the class folder(s) {missing} under {root!r}; "
                             f"add them to the mapping (it has {sorted(self.mapping)!r:.200}).")
        self.label_key = label_key
        super().__init__([{data_key: os.path.join(root, relative), label_key: self.mapping[label]}
                          for label in sorted(found) for relative in sorted(found[label])])

    def get_mapping(self) -> dict[str, Any]:
        """The ``{class name: label}`` mapping in use."""
        return self.mapping

    def summary(self) -> DatasetSummary:
        """One line naming the size, each key's type and the number of classes; the summary's fields name the class
        key, the number of classes and the class mapping, as FastEstimator's."""
        base = super().summary()
        return DatasetSummary(f"{base[:-1]}; {len(self.mapping)} classes)", base.num_instances, base.keys,
                              num_classes=len(self.mapping), class_key_mapping=self.mapping, class_key=self.label_key)


def _check_key(key: Any, what: str, owner: str) -> None:
    if not isinstance(key, str) or not key:
        raise TypeError(f"{owner} {what} must be a non-empty string, got {key!r}.")


def _list_files(root_dir: str | os.PathLike[str], extension: str | tuple[str, ...] | None, recursive: bool,
                owner: str) -> tuple[str, dict[str, list[str]], Counter[str]]:
    """Walk ``root_dir``: its normalized path, ``{folder relative to root ('' for root): [file paths relative to
    root]}`` for folders holding matching files, and a count of the extensions of the files left out."""
    if extension is not None and not (isinstance(extension, str) or (
            isinstance(extension, tuple) and all(isinstance(item, str) for item in extension))):
        raise TypeError(f"{owner} file_extension must be a string like '.png' (or a tuple of them), got "
                        f"{type(extension).__name__}: {extension!r}.")
    root = os.path.normpath(os.fspath(root_dir))
    if not os.path.exists(root):
        raise FileNotFoundError(f"{owner} root_dir {root!r} does not exist; check the path (relative paths start at "
                                f"the working directory {os.getcwd()!r}).")
    if not os.path.isdir(root):
        raise ValueError(f"{owner} root_dir {root!r} is a file; pass the folder that holds the data files.")
    found: dict[str, list[str]] = {}
    skipped: Counter[str] = Counter()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()  # walk order does not matter for the result, but sorted keeps it reproducible to debug
        relative_folder = os.path.relpath(folder, root)
        relative_folder = "" if relative_folder == os.curdir else relative_folder
        for file_name in files:
            if file_name.startswith("."):
                continue
            if extension is not None and not file_name.endswith(extension):
                skipped[os.path.splitext(file_name)[1] or file_name] += 1
                continue
            found.setdefault(relative_folder, []).append(os.path.join(relative_folder, file_name))
        if not recursive:
            break
    return root, found, skipped


def _no_files(root: str, extension: str | tuple[str, ...] | None, skipped: Counter[str], owner: str) -> str:
    if extension is None:
        return f"{owner} found no files under {root!r} (names starting with '.' are ignored); check root_dir."
    present = ", ".join(f"{suffix!r} ({count})" for suffix, count in skipped.most_common(10)) or "none"
    return (f"{owner} found no files ending with {extension!r} under {root!r}; extensions present: {present}. Fix "
            "file_extension (it must match the end of the name, dot included, case-sensitive) or pass None.")
