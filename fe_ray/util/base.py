"""Small framework-neutral helpers shared across fe_ray: containers, argument checks, batch size, contexts."""

from __future__ import annotations

import inspect
import numbers
import os
from collections.abc import Callable, Iterable, KeysView, Mapping
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: The execution modes a Network, Pipeline or Op can run in.
MODES = ("train", "eval", "test", "infer")


def to_list(data: Any) -> list[Any]:
    """Wrap ``data`` in a list (``None`` becomes ``[]``; lists, tuples and sets are copied into a list)."""
    if data is None:
        return []
    if isinstance(data, list):
        return list(data)
    if isinstance(data, (tuple, set)):
        return list(data)
    return [data]


def to_set(data: Any) -> set[Any]:
    """Wrap ``data`` in a set (``None`` becomes the empty set; lists, tuples, sets and dict key views are copied into
    a set)."""
    if data is None:
        return set()
    if isinstance(data, (list, tuple, set, frozenset, KeysView)):
        return set(data)
    return {data}


def map_nested(fn: Callable[[Any], Any], data: Any) -> Any:
    """Apply ``fn`` to every leaf of ``data``, rebuilding the dicts, lists and tuples around the results."""
    if isinstance(data, dict):
        return {key: map_nested(fn, value) for key, value in data.items()}
    if isinstance(data, list):
        return [map_nested(fn, value) for value in data]
    if isinstance(data, tuple):
        return tuple(map_nested(fn, value) for value in data)
    return fn(data)


def drop_nones(items: Iterable[T | None]) -> list[T]:
    """``items`` without its ``None`` entries, as a list (falsy values such as 0 stay: fe_ray's internal rule)."""
    return [item for item in items if item is not None]


def filter_nones(items: Any) -> Any:
    """FastEstimator's ``fe.util.filter_nones``: a dict without the keys whose value is None; any other collection
    without its falsy entries (None, 0, '', ...), as a set or tuple where it was one, else as a list."""
    if isinstance(items, dict):
        return {key: value for key, value in items.items() if value is not None}
    kept = [item for item in items if item]
    if isinstance(items, (set, frozenset)):
        return set(kept)
    return tuple(kept) if isinstance(items, tuple) else kept


def IfElse(cond: Any, y: Any, n: Any = None) -> Any:  # noqa: N802 - FastEstimator's name
    """``y`` if ``cond`` else ``n``: FastEstimator's helper for configurable op lists, e.g.
    ``ops=[..., IfElse(extra_augs, RandomJitter(...))]`` (a None op is skipped)."""
    return y if cond else n


def accepts_positional(fn: Callable[..., Any], count: int) -> bool | None:
    """Whether ``fn`` can be called with ``count`` positional arguments; None where its signature is unknown."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C callables have no signature
        return None
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def parse_ds_ids(ds_id: None | str | Iterable[str]) -> set[str] | None:
    """The ds_id filter of an op or trace: None (every dataset), plain ids (a whitelist) or "!id"s (a blacklist).

    Raises:
        ValueError: If plain and negated ids are mixed.
    """
    if ds_id is None:
        return None
    ids = to_set(ds_id)
    negated = {d for d in ids if d.startswith("!")}
    if negated and len(negated) != len(ids):
        raise ValueError(f"Cannot mix plain and negated ('!') ds_ids, got {sorted(ids)}; use one style.")
    return ids


def parse_modes(modes: set[str]) -> set[str]:
    """Expand "!mode" negations into a whitelist and check every mode name.

    Args:
        modes: Mode names, either all plain or all negated with a leading "!".

    Returns:
        The set of modes in which to run.

    Raises:
        ValueError: If a mode is unknown, or plain and negated modes are mixed (FastEstimator raises AssertionError).
    """
    negated = {m for m in modes if m.startswith("!")}
    if negated and len(negated) != len(modes):
        raise ValueError(f"Cannot mix plain and negated ('!') modes, got {sorted(modes)}; use one style.")
    names = {m.lstrip("!") for m in modes}
    unknown = names - set(MODES)
    if unknown:
        raise ValueError(f"Unknown mode(s) {sorted(unknown)}; valid modes are {list(MODES)} "
                         "(optionally prefixed by '!').")
    if negated:
        return set(MODES) - names
    return names


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is a valid execution mode, else raise a ValueError naming the valid choices."""
    if mode not in MODES:
        raise ValueError(f"Unknown mode {mode!r}; valid modes are {list(MODES)}.")
    return mode


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer, numpy's included, but not a bool (an ``int`` subclass that is no size)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_count(value: Any, name: str, minimum: int = 0) -> int:
    """Return ``value`` as an int if it is an int (numpy ints too) >= ``minimum``, else raise ValueError naming
    ``name``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return int(value)


def check_epoch(epoch: Any) -> int:
    """Return ``epoch`` if it is an int >= 1 (epochs count from 1), else raise ValueError."""
    return check_count(epoch, "epoch", minimum=1)


#: Characters a dataset id may not hold: ':' and ';' are reserved by FastEstimator's key syntax, '|' separates a
#: key from its ds_id in logged names.
_FORBIDDEN_DS_ID_CHARS = frozenset(":;|")
#: Characters an op / trace input or output key may not hold ('|' is allowed once, as the ds_id separator).
_FORBIDDEN_KEY_CHARS = frozenset(":;")


@overload
def check_ds_id(ds_ids: str) -> str: ...


@overload
def check_ds_id(ds_ids: set[str]) -> set[str]: ...


def check_ds_id(ds_ids: Any) -> str | set[str]:
    """Check a dataset id, or a set of ds_id filters.

    * A str (what a running Network gets): returned as is; ``''`` stands for a mode's only dataset.
      (``ds_ids`` is FastEstimator's name for the argument.)
    * A set / list / tuple of ids (FastEstimator's ``fe.util.check_ds_id``): every id a non-empty str without
      ``':'``, ``';'`` or ``'|'`` (they separate names in keys such as ``"acc|ds1"``), all plain (a whitelist) or
      all ``'!'``-negated (a blacklist); returned as a set.

    Raises:
        TypeError: If ``ds_id`` (or one of the ids) is not a str.
        ValueError: If an id in a set is empty or holds a forbidden character, or plain and negated ids are mixed
            (FastEstimator raises AssertionError for these).
    """
    ds_id = ds_ids  # FastEstimator's parameter name; one id or several
    if isinstance(ds_id, str):
        return ds_id
    if not isinstance(ds_id, (set, frozenset, list, tuple)):
        raise TypeError(f"ds_id must be a str (the dataset id, '' when a mode has a single dataset) or a set of ids, "
                        f"got {ds_id!r}.")
    ids = set(ds_id)
    for item in ids:
        if not isinstance(item, str):
            raise TypeError(f"Every ds_id must be a str, got {type(item).__name__} {item!r} in {ds_id!r}.")
        if not item.lstrip("!") or any(char in item for char in _FORBIDDEN_DS_ID_CHARS):
            raise ValueError(f"Invalid ds_id {item!r}: a dataset id must be a non-empty name without "
                             f"{sorted(_FORBIDDEN_DS_ID_CHARS)} (optionally prefixed by '!').")
    if len({item.startswith("!") for item in ids}) > 1:
        raise ValueError(f"Cannot mix plain and negated ('!') ds_ids, got {sorted(ids)}; use one style.")
    return ids


def check_io_names(names: list[Any]) -> list[Any]:
    """Check the input / output keys of an op or trace and return them unchanged.

    A key must be a non-empty str without ``':'`` or ``';'``, with at most one ``'|'`` (``"key|ds_id"``); lists of
    keys inside the list are checked the same way, as in FastEstimator.

    Raises:
        TypeError: If a name is not a str.
        ValueError: If a name is empty, holds a forbidden character or more than one ``'|'`` (FastEstimator raises
            AssertionError).
    """
    for name in names:
        if isinstance(name, list):
            check_io_names(name)
            continue
        if not isinstance(name, str):
            raise TypeError(f"inputs/outputs names must be str, got {type(name).__name__} {name!r}.")
        if not name:
            raise ValueError("inputs/outputs names cannot be an empty string; name every key.")
        if any(char in name for char in _FORBIDDEN_KEY_CHARS):
            raise ValueError(f"inputs/outputs name {name!r} holds a forbidden character "
                             f"{sorted(_FORBIDDEN_KEY_CHARS)}; rename the key.")
        if name.count("|") > 1:
            raise ValueError(f"inputs/outputs name {name!r} holds more than one '|' (allowed once, as in "
                             f"'key|ds_id'); rename the key.")
    return names


def get_batch_size(data: Mapping[str, Any]) -> int:
    """Return the size of the leading (batch) axis shared by the array values of ``data`` (a batch dict).

    Raises:
        ValueError: If the arrays disagree on their batch size (a ragged batch) or none has a batch axis.
    """
    sizes = {key: int(value.shape[0]) for key, value in data.items() if _has_batch_axis(value)}
    if not sizes:
        raise ValueError(f"Cannot infer a batch size: none of the keys {sorted(data)} holds an array with a "
                         "batch axis.")
    distinct = set(sizes.values())
    if len(distinct) > 1:
        raise ValueError(f"Ragged batch: keys have different batch sizes {sizes}; every array must share axis 0.")
    return distinct.pop()


def _has_batch_axis(value: Any) -> bool:
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) > 0


class NonContext:
    """A no-op context manager, used where a framework context is only sometimes needed."""

    def __enter__(self) -> NonContext:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def lower_priority(niceness: int) -> None:
    """Lower the calling thread's scheduling priority by ``niceness`` (and that of the threads it starts later).

    For background work that shares the cores with training (checkpoint writers): at a lower priority it uses idle
    time first instead of preempting an intra-op thread, which would stall a whole step. Linux keeps the nice
    value per thread. Where that is unsupported or not permitted, nothing changes.
    """
    try:
        os.nice(niceness)
    except (AttributeError, OSError):  # not on this platform / not permitted: run at normal priority
        pass
