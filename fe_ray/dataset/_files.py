"""Opening the data files that file-backed datasets read: path checks with actionable errors, and transparent
decompression of ``.gz`` / ``.bz2`` / ``.xz`` files (pandas infers the same from the extension)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from collections.abc import Callable
from typing import IO, Any

_OPENERS: dict[str, Callable[..., IO[Any]]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def checked_file(file_path: str | os.PathLike[str], owner: str, folder_hint: str) -> str:
    """``file_path`` as a string, once it is known to name an existing file.

    Args:
        file_path: The path a dataset was given.
        owner: The dataset's class name, for the messages.
        folder_hint: What to use instead when the path is a folder (ends the ValueError's message).

    Raises:
        FileNotFoundError: If nothing exists at the path.
        ValueError: If the path is a folder.
    """
    path = os.fspath(file_path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{owner} file {path!r} does not exist; check the path (relative paths start at the "
                                f"working directory {os.getcwd()!r}).")
    if os.path.isdir(path):
        raise ValueError(f"{owner} file_path {path!r} is a folder; {folder_hint}")
    return path


def open_file(path: str, mode: str, **kwargs: Any) -> IO[Any]:
    """Open ``path`` (``mode`` "rt" or "rb"), decompressing by its extension; ``kwargs`` go to the opener."""
    opener = _OPENERS.get(os.path.splitext(path)[1].lower())
    if opener is None:
        return open(path, mode.replace("t", ""), **kwargs)
    return opener(path, mode, **kwargs)
