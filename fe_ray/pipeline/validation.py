"""Argument checks for the Pipeline: data per mode and batch sizes (counts and epochs: ``fe_ray.util``)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from fe_ray.pipeline.batching import self_batching, sized_modes
from fe_ray.pipeline.framework_data import framework_kind
from fe_ray.schedule import Scheduler, get_current_items
from fe_ray.util import check_mode


def normalize_data(given: Any, mode: str) -> dict[str, Any]:
    """Turn a mode's data (dataset, ``{ds_id: dataset}`` or Scheduler) into ``{ds_id: dataset or Scheduler}``.

    Raises:
        TypeError: If a value is neither a map-style dataset, a torch DataLoader nor a tf.data.Dataset (or a
            Scheduler of them).
        ValueError: If a dataset is empty, the dict is empty, or a ds_id is not a plain string.
    """
    if isinstance(given, Mapping):
        if not given:
            raise ValueError(f"{mode}_data is an empty dict; pass a dataset or a non-empty {{ds_id: dataset}} dict.")
        if all(isinstance(value, np.ndarray) for value in given.values()):
            raise TypeError(f"{mode}_data is a dict of arrays; wrap it in fe_ray.dataset.NumpyDataset({{...}}). A dict "
                            "given as data maps ds_ids to datasets.")
        # A None entry is left out, as FastEstimator filters it (a dataset switched off for this run).
        by_id = {ds_id: value for ds_id, value in given.items() if value is not None}
        if not by_id:
            raise ValueError(f"{mode}_data holds no dataset: every value of {dict(given)!r:.200} is None.")
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
    """Raise TypeError unless ``dataset`` is map-style (or a DataLoader / tf.data.Dataset), ValueError if it is
    empty (``where`` names it)."""
    if framework_kind(dataset) is not None:
        return  # batches itself; its length may be unknown (see fe_ray.pipeline.framework_data)
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")) or isinstance(dataset, (str, bytes)):
        raise TypeError(f"{where} must be a map-style dataset (__len__ and __getitem__ returning a dict), a torch "
                        f"DataLoader or tf.data.Dataset of dict batches, a {{ds_id: dataset}} dict or a Scheduler of "
                        f"datasets; got {type(dataset).__name__}.")
    if len(dataset) == 0:
        raise ValueError(f"{where} is an empty dataset ({type(dataset).__name__} of length 0).")


def check_batch_sizes(batch_size: Any, data: Mapping[str, Mapping[str, Any]], ops: list[Any]) -> None:
    """Check a Pipeline's ``batch_size`` against its data. None is valid: samples are then handed out one at a
    time, without a batch axis, as in FastEstimator. A ``{mode: batch_size}`` dict must name every mode with data,
    unless all that mode's datasets size their own batches or a Batch op with a ``batch_size`` may run in it.

    Raises:
        ValueError: If the dict misses a mode or names an unknown one, or a size is not positive.
    """
    sized = sized_modes(ops)
    needs = [mode for mode, by_id in data.items()
             if mode not in sized and not all(self_batching(value) for value in by_id.values())]
    if isinstance(batch_size, Mapping):
        for mode in batch_size:
            check_mode(mode)
        missing = [mode for mode in needs if mode not in batch_size]
        if missing:
            raise ValueError(f"batch_size dict {dict(batch_size)} has no entry for mode(s) {missing}, which have "
                             "data; add them, or give those modes a Batch(batch_size=...) op.")
        for mode, value in batch_size.items():
            if value is None and mode not in needs:
                continue  # a mode whose data batches itself (a BatchDataset): None is its batch size
            check_batch_size(value)
    elif batch_size is not None:
        check_batch_size(batch_size)


def check_batch_size(value: Any) -> None:
    """Raise ValueError unless ``value`` is a positive int or a Scheduler of positive ints (None entries allowed)."""
    values = value.get_all_values() if isinstance(value, Scheduler) else [value]
    for item in values:
        if item is None and isinstance(value, Scheduler):
            continue
        if not isinstance(item, (int, np.integer)) or isinstance(item, bool) or item < 1:
            raise ValueError(f"batch_size must be a positive int (or a Scheduler of them), got {item!r}.")


def check_framework_options(data: Mapping[str, Mapping[str, Any]], options: Mapping[str, Any]) -> None:
    """Refuse map-style-only options when all data is DataLoaders / tf.data.Datasets; warn about ops that select one.

    Args:
        data: The Pipeline's ``{mode: {ds_id: dataset or Scheduler}}``.
        options: The Pipeline's batching options by name, None where not given (``ops`` as the list of ops).

    Raises:
        ValueError: If any option is given while no map-style dataset exists (FastEstimator refuses batch_size,
            ops and num_process there; fe_ray's own drop_last, pad_value and collate_fn would be ignored as well).
    """
    framework_at = [(mode, ds_id) for mode, by_id in data.items() for ds_id, value in by_id.items()
                    if any(framework_kind(dataset) for dataset in _values(value))]
    if not framework_at:
        return
    map_style = any(framework_kind(dataset) is None for by_id in data.values() for value in by_id.values()
                    for dataset in _values(value))
    if not map_style:
        given = [name for name, value in options.items() if value is not None]
        if given:
            raise ValueError(f"Pipeline got {given} but all its data are DataLoaders / tf.data.Datasets, which "
                             "batch themselves and take no Pipeline ops; drop those arguments and do that work in "
                             "the DataLoader (batch_size, collate_fn, num_workers, drop_last, its dataset's "
                             "__getitem__) or the tf.data pipeline (.map, .batch), or give a map-style dataset such "
                             "as fe_ray.dataset.NumpyDataset.")
        return
    # Mixed data: the options serve the map-style datasets; only ops that select a framework source are suspicious.
    skipped = [mode + (f"[{ds_id!r}]" if ds_id else "") for mode, ds_id in framework_at
               if get_current_items(options.get("ops") or [], run_modes=mode, ds_id=ds_id)]
    if skipped:
        warnings.warn(f"Pipeline ops select the DataLoader / tf.data.Dataset data of {skipped}, which is used as "
                      "it is: the ops only run on map-style datasets. Give those ops mode= / ds_id= filters that "
                      "leave that data out to silence this.", stacklevel=3)


def _values(data: Any) -> list[Any]:
    """The datasets ``data`` may be: itself, or a Scheduler's non-None values."""
    return [value for value in (data.get_all_values() if isinstance(data, Scheduler) else [data])
            if value is not None]
