"""Index planning shared by every dataset's ``split``: FastEstimator's ``dataset.split(*fractions)`` rules.

Kept apart from the datasets so that each of them (NumpyDataset, the in-memory file datasets, GeneratorDataset)
takes samples out by the same rules and raises the same messages, only naming itself (``owner``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def plan_split(fractions: Sequence[Any], size: int, seed: int | None, owner: str) -> tuple[list[np.ndarray],
                                                                                            np.ndarray]:
    """Decide which samples each part of a ``split`` takes and which stay.

    Each entry of ``fractions`` is a fraction (a float in (0, 1): ``ceil(fraction * size)`` samples), a number of
    samples (an int), or a list of sample indices; numbers and index lists cannot be mixed. Numbers take a random
    choice of samples, spread over the parts in the order drawn.

    Args:
        fractions: One entry per part.
        size: The number of samples of the dataset being split.
        seed: Seed of the random choice; None draws from numpy's global generator (which
            ``fe.enable_deterministic`` seeds).
        owner: The dataset's name for error messages (e.g. ``"NumpyDataset"``).

    Returns:
        ``(parts, keep)``: the indices of each part (in the order they will appear in it), and the sorted indices
        the dataset keeps.

    Raises:
        ValueError: If no part is asked for, a fraction or count is out of range, index lists overlap or hold an
            index out of range, numbers and index lists are mixed, or nothing would be left in the dataset.
        TypeError: If an entry is neither a number nor a list of indices.
    """
    if not fractions:
        raise ValueError(f"{owner}.split needs at least one part: a fraction (split(0.2)), a number of "
                         "samples (split(100)) or a list of indices (split([0, 5, 7])).")
    kinds = [_split_kind(part, owner) for part in fractions]
    if len(set(kinds)) > 1:
        raise ValueError(f"{owner}.split takes either numbers (fractions, counts) or index lists, not both; "
                         f"got {list(fractions)!r:.200}.")
    if kinds[0] == "number":
        counts = [_split_count(part, size, owner) for part in fractions]
        rng = np.random.default_rng(seed) if seed is not None else np.random
        chosen = rng.permutation(size)[:sum(counts)]
        parts = np.split(chosen, np.cumsum(counts)[:-1])
    else:
        parts = [np.asarray(list(part)).reshape(-1) for part in fractions]
        for given, part in zip(fractions, parts):
            if part.size and not np.issubdtype(part.dtype, np.integer):
                raise TypeError(f"{owner}.split index lists hold ints, got {given!r:.100}; pass fractions "
                                "as separate arguments: split(0.1, 0.2).")
        parts = [part.astype(np.int64) for part in parts]
        for part in parts:
            if part.size and (part.min() < 0 or part.max() >= size):
                raise ValueError(f"{owner}.split index lists need indices in [0, {size}), got "
                                 f"{part.tolist()!r:.200}.")
    taken = np.concatenate(parts) if parts else np.empty(0, np.int64)
    if len(np.unique(taken)) != len(taken):
        raise ValueError(f"{owner}.split index lists overlap (or repeat an index); each sample can go to one "
                         "part only.")
    keep = np.setdiff1d(np.arange(size), taken)
    if keep.size == 0:
        raise ValueError(f"{owner}.split would take all {size} samples and leave this dataset empty; ask for "
                         "smaller parts.")
    return list(parts), keep


def _split_kind(part: Any, owner: str) -> str:
    if isinstance(part, (int, float, np.integer, np.floating)) and not isinstance(part, bool):
        return "number"
    if isinstance(part, (str, bytes, Mapping)) or not hasattr(part, "__iter__"):
        raise TypeError(f"{owner}.split takes fractions (0.2), numbers of samples (100) or lists of indices "
                        f"([0, 5, 7]), got {type(part).__name__}: {part!r:.100}.")
    return "indices"


def _split_count(part: float | int, size: int, owner: str) -> int:
    """The number of samples a fraction or count asks for, checked against the dataset's ``size``."""
    if isinstance(part, (float, np.floating)):
        if not 0.0 < part < 1.0:
            raise ValueError(f"{owner}.split fractions must be in (0, 1), got {part!r}; pass an int for a number "
                             "of samples.")
        return math.ceil(size * float(part))
    if part < 1:
        raise ValueError(f"{owner}.split numbers of samples must be >= 1, got {part!r}.")
    return int(part)
