"""Shared check for the dataset tests: a Pipeline resumed mid-epoch from its state_dict replays the same batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fe_ray.pipeline import Pipeline


def batches(pipeline: Pipeline, epochs: range) -> list[dict[str, list[Any]]]:
    """Every batch of ``epochs`` in train mode, as lists (comparable with ==)."""
    result = []
    for epoch in epochs:
        with pipeline("train", epoch) as loader:
            result += [{key: np.asarray(value).tolist() for key, value in batch.items()} for batch in loader]
    return result


def interrupted_run(make: Callable[[], Pipeline], epochs: int, stop_epoch: int, taken: int
                    ) -> list[dict[str, list[Any]]]:
    """Run ``make()`` up to ``taken`` batches into ``stop_epoch``, checkpoint, and finish in a new Pipeline."""
    first = make()
    seen = batches(first, range(1, stop_epoch))
    with first("train", stop_epoch) as loader:
        iterator = iter(loader)
        for _ in range(taken):
            batch = next(iterator)
            seen.append({key: np.asarray(value).tolist() for key, value in batch.items()})
        state = first.state_dict()
    assert state["positions"]["train"][""] == {"epoch": stop_epoch, "batches": taken}
    restored = make()
    restored.load_state_dict(state)
    return seen + batches(restored, range(stop_epoch, epochs + 1))
