"""Argument checks for the Pipeline: data per mode and batch sizes (counts and epochs: ``fe_ray.util``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fe_ray.schedule import Scheduler


def normalize_data(given: Any, mode: str) -> dict[str, Any]:
    """Turn a mode's data (dataset, ``{ds_id: dataset}`` or Scheduler) into ``{ds_id: dataset or Scheduler}``.

    Raises:
        TypeError: If a value is not a map-style dataset (or a Scheduler of them).
        ValueError: If a dataset is empty, the dict is empty, or a ds_id is not a plain string.
    """
    if isinstance(given, Mapping):
        if not given:
            raise ValueError(f"{mode}_data is an empty dict; pass a dataset or a non-empty {{ds_id: dataset}} dict.")
        if all(isinstance(value, np.ndarray) for value in given.values()):
            raise TypeError(f"{mode}_data is a dict of arrays; wrap it in fe_ray.dataset.NumpyDataset({{...}}). A dict "
                            "given as data maps ds_ids to datasets.")
        by_id = dict(given)
        for ds_id in by_id:
            _check_ds_id(ds_id, mode)
    else:
        by_id = {"": given}
    for ds_id, value in by_id.items():
        where = f"{mode}_data" + (f"[{ds_id!r}]" if ds_id else "")
        values = value.get_all_values() if isinstance(value, Scheduler) else [value]
        for dataset in values:
            if dataset is not None or not isinstance(value, Scheduler):
                check_dataset(dataset, where)
    return by_id


def _check_ds_id(ds_id: Any, mode: str) -> None:
    if not isinstance(ds_id, str) or not ds_id:
        raise ValueError(f"{mode}_data ds_ids must be non-empty strings, got {ds_id!r}.")
    # '!' negates a ds_id in op filters and ';' separates them in logs, so neither may appear in a name.
    if ds_id.startswith("!") or ";" in ds_id:
        raise ValueError(f"{mode}_data ds_id {ds_id!r} may not start with '!' or contain ';'.")


def check_dataset(dataset: Any, where: str) -> None:
    """Raise TypeError unless ``dataset`` is map-style, ValueError if it is empty (``where`` names it)."""
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")) or isinstance(dataset, (str, bytes)):
        raise TypeError(f"{where} must be a map-style dataset (__len__ and __getitem__ returning a dict), a "
                        f"{{ds_id: dataset}} dict or a Scheduler of datasets; got {type(dataset).__name__}.")
    if len(dataset) == 0:
        raise ValueError(f"{where} is an empty dataset ({type(dataset).__name__} of length 0).")


def check_batch_size(value: Any) -> None:
    """Raise ValueError unless ``value`` is a positive int or a Scheduler of positive ints (None entries allowed)."""
    values = value.get_all_values() if isinstance(value, Scheduler) else [value]
    for item in values:
        if item is None and isinstance(value, Scheduler):
            continue
        if not isinstance(item, (int, np.integer)) or isinstance(item, bool) or item < 1:
            raise ValueError(f"batch_size must be a positive int (or a Scheduler of them), got {item!r}.")
