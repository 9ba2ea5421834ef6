"""Index planning shared by every dataset's ``split``: FastEstimator's ``dataset.split(*fractions)`` rules.

Kept apart from the datasets so that each of them (NumpyDataset, the in-memory file datasets, GeneratorDataset)
takes samples out by the same rules and raises the same messages, only naming itself (``owner``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np


def plan_split(fractions: Sequence[Any], size: int, seed: int | None, owner: str,
               labels: Sequence[Any] | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """Decide which samples each part of a ``split`` takes and which stay.

    Each entry of ``fractions`` is a fraction (a float in (0, 1): ``ceil(fraction * size)`` samples), a number of
    samples (an int), or a list of sample indices; numbers and index lists cannot be mixed. Numbers take a random
    choice of samples, spread over the parts in the order drawn: the same samples FastEstimator's ``split`` takes
    for the same ``seed`` (Python's ``random.Random(seed).sample``), so a pinned split stays the same after moving
    to fe_ray. With ``labels`` each part keeps the classes' proportions (stratified), by FastEstimator's rules.

    Args:
        fractions: One entry per part.
        size: The number of samples of the dataset being split.
        seed: Seed of the random choice; None draws from Python's global generator (which
            ``fe.enable_deterministic`` seeds).
        owner: The dataset's name for error messages (e.g. ``"NumpyDataset"``).
        labels: Each sample's class (the ``stratify`` key's value), or None for a plain random split.

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
    if labels is not None and kinds[0] != "number":
        raise ValueError(f"{owner}.split(stratify=...) needs fractions or numbers of samples, not index lists.")
    if kinds[0] == "number":
        counts = [_split_count(part, size, owner) for part in fractions]
        if sum(counts) >= size:
            raise ValueError(f"{owner}.split would take all {size} samples and leave this dataset empty; ask for "
                             "smaller parts.")
        if labels is not None:
            parts = [np.asarray(part, dtype=np.int64) for part in _stratified(counts, labels, seed, owner)]
        else:
            drawn = (random.Random(seed) if seed is not None else random).sample(range(size), sum(counts))
            chosen = np.asarray(drawn, dtype=np.int64)
            parts = np.split(chosen, np.cumsum(counts)[:-1])
    else:
        parts = []
        for given in fractions:
            try:
                part = np.asarray(list(given))
            except ValueError:  # ragged nesting: not a flat list of indices either
                part = None
            if part is None or part.ndim != 1:
                # A nested list is no index list (FastEstimator fails on it too): it must not be flattened silently.
                raise TypeError(f"{owner}.split index lists hold ints, got {given!r:.100}; pass each part as its own "
                                "flat list: split([0, 1], [2, 3]).")
            parts.append(part)
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


def _class_key(label: Any) -> Hashable:
    """A hashable stand-in for a class label (numpy arrays and scalars by their bytes, as FastEstimator keys them)."""
    return label.tobytes() if hasattr(label, "tobytes") else label


def _stratified(counts: list[int], labels: Sequence[Any], seed: int | None, owner: str) -> list[list[int]]:
    """The sample indices of each part of a stratified split (FastEstimator's allocation and draws).

    Each part asks every class for its share of the part (at least one sample of a class that has any), then adds
    or gives back one sample at a time, most abundant classes first, until the part has its size; then draws that
    many samples of each class and shuffles the part. Seeded draws use ``seed``, ``seed + 1``, ... in turn.
    """
    pools: dict[Hashable, list[int]] = {}
    for index, label in enumerate(labels):
        pools.setdefault(_class_key(label), []).append(index)
    size = len(labels)
    totals = {key: len(members) for key, members in pools.items()}  # the shares follow the whole dataset's classes
    left = dict(totals)
    offset = 0
    parts: list[list[int]] = []
    for count in counts:
        taken: dict[Hashable, int] = {}
        for key in left:
            share = count * totals[key] / size
            want = 1 if 0 < share < 1 else round(share)
            taken[key] = min(want, left[key])
            left[key] -= taken[key]
        total = sum(taken.values())
        protect_singles = True  # when shaving, keep every class at one sample or more while possible
        while total != count:
            before = total
            for key, held in sorted(taken.items(), key=lambda item: item[1], reverse=True):
                if total < count and left[key] > 0:
                    taken[key] += 1
                    left[key] -= 1
                    total += 1
                elif total > count and taken[key] > 0 and (not protect_singles or held > 1):
                    taken[key] -= 1
                    left[key] += 1
                    total -= 1
                if total == count:
                    break
            if total == before:
                if not protect_singles:
                    raise ValueError(f"{owner}.split cannot stratify a part of {count} samples from what is left.")
                protect_singles = False
        part: list[int] = []
        for key, number in taken.items():
            rng = random.Random(seed + offset) if seed is not None else random
            picked = rng.sample(pools[key], number)
            offset += 1
            part.extend(picked)
            pools[key] = sorted(set(pools[key]) - set(picked))
        (random.Random(seed + offset) if seed is not None else random).shuffle(part)
        offset += 1
        parts.append(part)
    return parts


def stratify_for(dataset: Any, key: str | None) -> dict[str, str]:
    """``{"stratify": key}`` for a dataset of a BatchDataset / InterleaveDataset whose samples hold ``key``, else
    ``{}``: FastEstimator stratifies only the datasets that have the class key."""
    if key is None:
        return {}
    try:
        sample = dataset[0]
    except Exception:  # noqa: BLE001 - a dataset that cannot show a sample is split without stratify
        return {}
    return {"stratify": key} if isinstance(sample, Mapping) and key in sample else {}

