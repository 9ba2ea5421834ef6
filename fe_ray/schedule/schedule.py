"""Epoch-based schedulers: pick which op, optimizer, dataset or value is active in a given epoch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from fe_ray.util import filter_nones, to_list

T = TypeVar("T")


class Scheduler(Generic[T]):
    """Base class: a value that changes with the epoch."""

    def get_current_value(self, epoch: int) -> T | None:
        """Return the value active at ``epoch`` (1-based)."""
        raise NotImplementedError

    def get_all_values(self) -> list[T | None]:
        """Return every value the scheduler can yield (used to build ops and collect models)."""
        raise NotImplementedError


class RepeatScheduler(Scheduler[T]):
    """Cycle through ``repeat_list`` one entry per epoch (epoch 1 gets entry 0).

    Args:
        repeat_list: The values to cycle through; ``None`` entries mean "nothing this epoch".

    Raises:
        ValueError: If ``repeat_list`` is not a non-empty list.
    """

    def __init__(self, repeat_list: list[T | None]) -> None:
        if not isinstance(repeat_list, list) or not repeat_list:
            raise ValueError(f"RepeatScheduler needs a non-empty list, got {repeat_list!r}.")
        self.repeat_list = repeat_list
        self.cycle_length = len(repeat_list)

    def get_current_value(self, epoch: int) -> T | None:
        return self.repeat_list[(epoch - 1) % self.cycle_length]

    def get_all_values(self) -> list[T | None]:
        return list(self.repeat_list)

    def __repr__(self) -> str:
        return f"RepeatScheduler({self.repeat_list!r})"


class EpochScheduler(Scheduler[T]):
    """Switch values at given epochs: ``{1: a, 3: b}`` gives ``a`` in epochs 1-2 and ``b`` from epoch 3 on.

    Args:
        epoch_dict: Mapping of start epoch (>= 1) to value; ``None`` means "nothing from this epoch".

    Raises:
        ValueError: If ``epoch_dict`` is not a dict of positive int epochs.
    """

    def __init__(self, epoch_dict: Mapping[int, T | None]) -> None:
        if not isinstance(epoch_dict, Mapping) or not epoch_dict:
            raise ValueError(f"EpochScheduler needs a non-empty dict of {{epoch: value}}, got {epoch_dict!r}.")
        for key in epoch_dict:
            if not isinstance(key, int) or isinstance(key, bool) or key < 1:
                raise ValueError(f"EpochScheduler keys must be epochs >= 1, got {key!r}.")
        self.epoch_dict = dict(epoch_dict)
        self.keys = sorted(self.epoch_dict)

    def get_current_value(self, epoch: int) -> T | None:
        last = None
        for key in self.keys:
            if key <= epoch:
                last = key
            else:
                break
        return None if last is None else self.epoch_dict[last]

    def get_all_values(self) -> list[T | None]:
        return list(self.epoch_dict.values())

    def __repr__(self) -> str:
        return f"EpochScheduler({self.epoch_dict!r})"


def get_signature_epochs(items: Iterable[Any], total_epochs: int, mode: str = "train") -> list[int]:
    """Return the epochs at which anything in ``items`` (possibly scheduled) can change.

    The Estimator's warmup runs one batch per signature epoch so that every op configuration is checked once.

    Args:
        items: Ops, optimizers, datasets or schedulers of them.
        total_epochs: Number of epochs of the run.
        mode: The mode; outside train there is a single epoch when nothing is scheduled.

    Returns:
        Sorted, de-duplicated epochs in ``[1, total_epochs]``.
    """
    epochs = {1}
    for item in items:
        if isinstance(item, EpochScheduler):
            epochs.update(k for k in item.keys if k <= total_epochs)
        elif isinstance(item, RepeatScheduler):
            epochs.update(range(1, min(item.cycle_length, total_epochs) + 1))
    return sorted(epochs)


def get_current_items(items: Iterable[Any], run_modes: str | None = None, epoch: int | None = None,
                      ds_id: str | None = None) -> list[Any]:
    """Resolve schedulers at ``epoch`` and keep the items that run in ``run_modes`` and ``ds_id``.

    Args:
        items: Plain items or Schedulers of items; ``None`` entries are skipped.
        run_modes: Keep only items whose ``mode`` allows this mode (None: keep all).
        epoch: Resolve schedulers at this epoch (None: take every value of each scheduler).
        ds_id: Keep only items whose ``ds_id`` allows this dataset id (None: keep all).

    Returns:
        The active items, in order.
    """
    selected: list[Any] = []
    for item in to_list(items):
        if isinstance(item, Scheduler):
            values = item.get_all_values() if epoch is None else [item.get_current_value(epoch)]
        else:
            values = [item]
        for value in filter_nones(values):
            if run_modes is not None and hasattr(value, "mode") and value.mode is not None:
                if run_modes not in value.mode:
                    continue
            if ds_id is not None and hasattr(value, "ds_id") and not _ds_id_allowed(value.ds_id, ds_id):
                continue
            selected.append(value)
    return selected


def _ds_id_allowed(spec: Any, ds_id: str) -> bool:
    """Apply an op's ds_id whitelist (plain ids) or blacklist ("!id") to ``ds_id``."""
    if not spec:
        return True
    spec = set(spec)
    blacklist = {s[1:] for s in spec if s.startswith("!")}
    if blacklist:
        return ds_id not in blacklist
    return ds_id in spec
