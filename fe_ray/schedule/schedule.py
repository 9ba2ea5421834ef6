"""Epoch-based schedulers: pick which op, optimizer, dataset or value is active in a given epoch."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from fe_ray.util import drop_nones, to_list

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
        repeat_list: The values to cycle through, at least two of them; ``None`` entries mean "nothing this epoch".

    Raises:
        ValueError: If ``repeat_list`` is not a list of two or more entries.
    """

    def __init__(self, repeat_list: list[T | None]) -> None:
        # A single entry never changes, so it is rejected (as in FastEstimator) to point the user at a plain value.
        if not isinstance(repeat_list, list) or len(repeat_list) < 2:
            raise ValueError(f"RepeatScheduler needs a list of at least 2 entries to cycle through, got "
                             f"{repeat_list!r}; use the value itself (or an EpochScheduler) if it never changes.")
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
        epoch_dict: Mapping of start epoch (>= 1) to value; ``None`` means "nothing from this epoch". Epochs before
            the first key, and every epoch of an empty mapping, get ``None``.

    Raises:
        ValueError: If ``epoch_dict`` is not a mapping of int epochs >= 1.
    """

    def __init__(self, epoch_dict: Mapping[int, T | None]) -> None:
        if not isinstance(epoch_dict, Mapping):
            raise ValueError(f"EpochScheduler needs a dict of {{epoch: value}}, got {epoch_dict!r}.")
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


def get_signature_epochs(items: Iterable[Any], total_epochs: int, mode: str | Iterable[str] | None = None) -> list[int]:
    """Return the first epoch of every distinct configuration of ``items`` in ``mode``.

    A configuration is the list of items active at an epoch (see ``get_current_items``), so an epoch is reported
    when the combination of all schedulers yields a set of items that no earlier epoch had, even if each scheduler on
    its own only repeats itself. Items that do not run in ``mode`` cannot create signature epochs. The Estimator's
    warmup runs one batch per signature epoch so that every configuration is checked once before training.

    Args:
        items: Ops, optimizers, datasets, traces, numbers or Schedulers of them.
        total_epochs: The last epoch of the run; no epoch after it is reported.
        mode: Only items that run in this mode (or any of these modes) count; None counts every item.

    Returns:
        Ascending epochs in ``[1, total_epochs]``, starting with 1 (empty when ``total_epochs`` < 1).
    """
    items = to_list(items)
    seen: list[list[Any]] = []
    signature: list[int] = []
    for epoch in range(1, _last_epoch_to_scan(items, total_epochs) + 1):
        config = get_current_items(items, run_modes=mode, epoch=epoch)
        if not any(_same_config(config, old) for old in seen):
            seen.append(config)
            signature.append(epoch)
    return signature


def _last_epoch_to_scan(items: list[Any], total_epochs: int) -> int:
    """The last epoch that can show a configuration not already seen in an earlier epoch.

    From the last EpochScheduler key on, only RepeatSchedulers still change, and together they repeat every
    lcm(cycle lengths) epochs, so scanning one such period past that key covers every later epoch. Any other
    Scheduler (a subclass included) can change in any way, so then the whole run is scanned.
    """
    last_key, period = 1, 1
    for item in items:
        # Exact types: a subclass may override get_current_value, so it falls back to a full scan.
        if type(item) is EpochScheduler:
            last_key = max([last_key, *item.keys])
        elif type(item) is RepeatScheduler:
            period = math.lcm(period, item.cycle_length)
        elif isinstance(item, Scheduler):
            return total_epochs
    return min(total_epochs, last_key + period - 1)


def _same_config(first: list[Any], second: list[Any]) -> bool:
    """Whether two configurations hold the same items, in order.

    Identity settles most items (ops, datasets); equality covers plain values such as batch sizes. An item whose
    ``==`` does not give a plain truth value (an array) counts as different, which at worst adds a warmup step.
    """
    if len(first) != len(second):
        return False
    for a, b in zip(first, second):
        if a is b:
            continue
        try:
            if not bool(a == b):
                return False
        except (TypeError, ValueError):
            return False
    return True


def get_current_items(items: Iterable[Any], run_modes: str | Iterable[str] | None = None, epoch: int | None = None,
                      ds_id: str | Iterable[str] | None = None) -> list[Any]:
    """Resolve schedulers at ``epoch`` and keep the items that run in ``run_modes`` and ``ds_id``.

    Args:
        items: Plain items or Schedulers of items; ``None`` entries are skipped.
        run_modes: Keep only items whose ``mode`` allows this mode, or at least one of these modes (None or empty:
            keep all). Items without a ``mode`` (or with ``mode=None``) run in every mode.
        epoch: Resolve schedulers at this epoch (None: take every value of each scheduler).
        ds_id: Keep only items whose ``ds_id`` allows this dataset id, or one of these ids (None: keep all).

    Returns:
        The active items, in order.

    Raises:
        TypeError: If ``run_modes`` is neither None, a str, nor an iterable of str.
    """
    wanted = _as_mode_set(run_modes)
    selected: list[Any] = []
    for item in to_list(items):
        if isinstance(item, Scheduler):
            values = item.get_all_values() if epoch is None else [item.get_current_value(epoch)]
        else:
            values = [item]
        for value in drop_nones(values):
            if wanted and not _runs_in(getattr(value, "mode", None), wanted):
                continue
            if ds_id is not None and hasattr(value, "ds_id") and not _ds_id_allowed(value.ds_id, ds_id):
                continue
            selected.append(value)
    return selected


def _runs_in(item_modes: Any, wanted: set[str]) -> bool:
    """Whether an item whose ``mode`` attribute is ``item_modes`` runs in at least one of the ``wanted`` modes."""
    if not item_modes:
        return True  # no mode (None or empty) means every mode
    if isinstance(item_modes, str):
        return item_modes in wanted
    if isinstance(item_modes, Iterable):
        return not wanted.isdisjoint(item_modes)
    return True  # a ``mode`` field of some other meaning (not a mode filter) must not hide the item


def _as_mode_set(modes: str | Iterable[str] | None) -> set[str]:
    """``modes`` as a set of mode names (a single str is one mode, not its characters; None is empty).

    Raises:
        TypeError: If ``modes`` is neither None, a str, nor an iterable of str.
    """
    if modes is None:
        return set()
    if isinstance(modes, str):
        return {modes}
    if isinstance(modes, Iterable):
        found = set(modes)
        if all(isinstance(mode, str) for mode in found):
            return found
    raise TypeError(f"Modes must be None, a str or an iterable of str (from 'train', 'eval', 'test', 'infer'), "
                    f"got {modes!r}.")


def _ds_id_allowed(spec: Any, ds_id: str | Iterable[str]) -> bool:
    """Apply an op's ds_id whitelist (plain ids) or blacklist ("!id") to ``ds_id`` (or to several ids: allowed when
    the whitelist names one of them, or the blacklist none of them, as in FastEstimator)."""
    if not spec:
        return True
    spec = set(spec)
    targets = {ds_id} if isinstance(ds_id, str) else set(ds_id)
    blacklist = {s[1:] for s in spec if s.startswith("!")}
    if blacklist:
        return not blacklist & targets
    return bool(spec & targets)
