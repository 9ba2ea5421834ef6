"""FastEstimator 1.7 helpers that user programs call directly: ``traceable``, ``warn``, ``get_colors`` and
``is_valid_file``, so that programs written for ``fe.util`` run unchanged."""

from __future__ import annotations

import colorsys
import gzip
import os
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: The ten colours of FastEstimator's plots (the colour-blind-safe palette seaborn calls "colorblind"), as RGB.
_PALETTE = ((1, 115, 178), (222, 143, 5), (2, 158, 115), (213, 94, 0), (204, 120, 188), (202, 145, 97),
            (251, 175, 228), (148, 148, 148), (236, 225, 51), (86, 180, 233))


def traceable(whitelist: str | tuple[str, ...] = (), blacklist: str | tuple[str, ...] = ()) -> Callable[[T], T]:
    """Class decorator of FastEstimator's traceability: accepted, so classes decorated for FastEstimator work.

    FastEstimator records the constructor arguments of a decorated class for its LaTeX Traceability report and
    restores the ``whitelist`` attributes (or all but the ``blacklist`` ones) of its objects from checkpoints.
    fe_ray has no Traceability report and checkpoints each object through its explicit ``state_dict`` /
    ``load_state_dict`` (or ``__getstate__`` / ``__setstate__``), so the decorator only records the two lists on the
    class (``_fe_state_whitelist`` / ``_fe_state_blacklist``, merged with a base class's) and returns it unchanged.

    Args:
        whitelist: Attribute name(s) FastEstimator would restore.
        blacklist: Attribute name(s) FastEstimator would not restore.

    Raises:
        ValueError: If both lists are given (as FastEstimator refuses them).
        TypeError: If an entry is not a string, or the decorated object is not a class.
    """
    allowed = (whitelist,) if isinstance(whitelist, str) else tuple(whitelist)
    denied = (blacklist,) if isinstance(blacklist, str) else tuple(blacklist)
    if allowed and denied:
        raise ValueError(f"traceable takes a whitelist or a blacklist, not both: got whitelist={allowed} and "
                         f"blacklist={denied}.")
    bad = [name for name in allowed + denied if not isinstance(name, str)]
    if bad:
        raise TypeError(f"traceable's whitelist / blacklist hold attribute names (str), got {bad!r}.")

    def mark(cls: T) -> T:
        if not isinstance(cls, type):
            raise TypeError(f"traceable decorates classes, got {type(cls).__name__} {cls!r}.")
        cls._fe_state_whitelist = tuple(getattr(cls, "_fe_state_whitelist", ())) + allowed
        cls._fe_state_blacklist = tuple(getattr(cls, "_fe_state_blacklist", ())) + denied
        return cls

    return mark


def warn(message: str) -> None:
    """Print ``message`` as a yellow ``FastEstimator-Warn:`` line (FastEstimator's attention-catching warning)."""
    print(f"\033[93mFastEstimator-Warn: {message}\033[00m", flush=True)


def get_colors(n_colors: int, as_numbers: bool = False, alpha: float = 1.0) -> list[Any]:
    """``n_colors`` plot colours as FastEstimator picks them: its ten-colour palette for up to ten, else hues spread
    evenly around the colour wheel.

    Args:
        n_colors: How many colours.
        as_numbers: Return ``(r, g, b, a)`` tuples (r, g, b in 0-255) instead of ``'rgba(r,g,b,a)'`` strings.
        alpha: The opacity, 0 to 1.

    Raises:
        ValueError: If ``n_colors`` is negative or ``alpha`` is outside [0, 1].
    """
    if isinstance(n_colors, bool) or not isinstance(n_colors, int) or n_colors < 0:
        raise ValueError(f"get_colors n_colors must be an int >= 0, got {n_colors!r}.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"get_colors alpha must be a number in [0, 1], got {alpha!r}.")
    if n_colors <= len(_PALETTE):
        rgb = list(_PALETTE[:n_colors])
    else:
        hues = [((i + 0.01) / n_colors) % 1.0 for i in range(n_colors)]
        rgb = [tuple(int(256 * c) for c in colorsys.hls_to_rgb(hue, 0.6, 0.95)) for hue in hues]
    if as_numbers:
        return [(float(r), float(g), float(b), float(alpha)) for r, g, b in rgb]
    return [f"rgba({r},{g},{b},{alpha})" for r, g, b in rgb]


def is_valid_file(file_path: str) -> bool:
    """Whether ``file_path`` exists and, for a ``.zip``, ``.gz`` or ``.tar.gz`` archive, can be read through (e.g. a
    download that did not stop half way); the reason a file is not valid is printed, as in FastEstimator."""
    if not os.path.exists(file_path):
        return False
    try:
        if file_path.endswith(".zip"):
            with zipfile.ZipFile(file_path) as archive:
                archive.namelist()
        elif file_path.endswith(".tar.gz"):
            with tarfile.open(file_path) as archive:
                archive.getmembers()
        elif file_path.endswith(".gz"):
            with gzip.open(file_path, "rb") as file:
                while file.read(1 << 20):
                    pass
    except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as err:  # zlib: corrupt data
        print(err)
        return False
    return True
