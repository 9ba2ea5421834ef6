"""The Pipeline's checkpoint pieces: saved positions, dataset states, and tracked DataLoader / tf.data loaders.

See the state contract of :class:`~fe_ray.pipeline.Pipeline`; the Pipeline keeps its positions as
``{(mode, ds_id): {"epoch", "batches"[, "exact", "rng"]}}``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fe_ray.pipeline.framework_data import FrameworkLoader, exact_resume, framework_kind, rng_state, set_rng_state
from fe_ray.schedule import get_current_items
from fe_ray.util import MODES

Positions = dict[tuple[str, str], dict[str, Any]]


def parse_positions(saved: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> Positions:
    """The positions of a state_dict's ``"positions"``, as the Pipeline keeps them.

    Raises:
        ValueError: If a position names an unknown mode.
    """
    positions: Positions = {}
    for mode, by_id in saved.items():
        if mode not in MODES:
            raise ValueError(f"Pipeline state has a position for unknown mode {mode!r}; valid modes: {MODES}.")
        for ds_id, position in by_id.items():
            positions[(mode, ds_id)] = {"epoch": int(position["epoch"]), "batches": int(position["batches"])}
            if "exact" in position:  # a DataLoader / tf.data.Dataset's position
                positions[(mode, ds_id)].update(exact=bool(position["exact"]), rng=position.get("rng"))
    return positions


def dataset_states(data: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """Every dataset's state (every dataset of a Scheduler, in order), ``{mode: {ds_id: [state or None]}}``."""
    return {mode: {ds_id: [dataset_state(dataset) for dataset in get_current_items([value])]
                   for ds_id, value in by_id.items()} for mode, by_id in data.items()}


def dataset_state(dataset: Any) -> Any:
    """A dataset's own ``state_dict()`` (copied: the dataset goes on changing), or None if it keeps no state; for a
    DataLoader, its generators' states (a tf.data.Dataset keeps none)."""
    if framework_kind(dataset) is not None:
        states = rng_state(dataset)
        return None if states is None else {"rng": states}
    state_dict = getattr(dataset, "state_dict", None)
    return copy.deepcopy(state_dict()) if callable(state_dict) else None


def holds_state(state: Any) -> bool:
    """Whether a ``state_dict`` holds anything: False for None and for dicts and lists of only such values (a
    stateless op's ``{}``, a composite dataset's ``{"datasets": [None, None]}``)."""
    if isinstance(state, Mapping):
        return any(holds_state(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return any(holds_state(value) for value in state)
    return state is not None


def dataset_restores(data: Mapping[str, Mapping[str, Any]],
                     states: Mapping[str, Mapping[str, list[Any]]]) -> list[tuple[Any, Any]]:
    """Pair each saved dataset state with the Pipeline's dataset at the same (mode, ds_id, position).

    Raises:
        ValueError: If the saved states name a (mode, ds_id) the Pipeline lacks, hold another number of datasets
            there, or hold a state for a dataset that cannot load one.
    """
    restores = []
    for mode, by_id in states.items():
        for ds_id, saved in by_id.items():
            if ds_id not in data.get(mode, {}):
                raise ValueError(f"Pipeline state holds a dataset state for mode {mode!r}, ds_id {ds_id!r}, which "
                                 f"this Pipeline has no data for; restore into a Pipeline with the same datasets.")
            datasets = get_current_items([data[mode][ds_id]])
            if len(saved) != len(datasets):
                raise ValueError(f"Pipeline state holds {len(saved)} dataset state(s) for mode {mode!r}, ds_id "
                                 f"{ds_id!r}, but this Pipeline has {len(datasets)} dataset(s) there.")
            for dataset, state in zip(datasets, saved):
                if state is None:
                    continue
                if framework_kind(dataset) is not None:
                    if not isinstance(state, Mapping) or "rng" not in state:
                        raise ValueError(f"Pipeline state for the {type(dataset).__name__} of mode {mode!r}, "
                                         f"ds_id {ds_id!r} is not a DataLoader's generator state.")
                elif not callable(getattr(dataset, "load_state_dict", None)):
                    raise ValueError(f"Pipeline state holds a state for the {type(dataset).__name__} of mode "
                                     f"{mode!r}, ds_id {ds_id!r}, which has no load_state_dict.")
                restores.append((dataset, state))
    return restores


def restore_datasets(restores: list[tuple[Any, Any]]) -> None:
    """Load the states :func:`dataset_restores` paired with their datasets."""
    for dataset, state in restores:
        if framework_kind(dataset) is not None:
            set_rng_state(dataset, state["rng"])
        else:
            dataset.load_state_dict(copy.deepcopy(state))


def framework_loader(positions: Positions, data: Any, mode: str, epoch: int, ds_id: str,
                     steps_per_epoch: int | None, track: bool) -> FrameworkLoader:
    """A DataLoader / tf.data.Dataset's loader; tracked, it resumes a saved position in ``positions`` by skipping
    batches, and keeps the entry up to date as batches are handed out."""
    key = (mode, ds_id)
    saved = positions.get(key) if track else None
    resumed = saved is not None and saved["epoch"] == epoch
    if resumed:
        set_rng_state(data, saved.get("rng"))  # the pass is re-created from the generators' epoch-start state
    loader = FrameworkLoader(data, mode, epoch, ds_id, steps_per_epoch=steps_per_epoch,
                             start=saved["batches"] if resumed else 0)  # type: ignore[index]
    if not track:
        return loader
    entry = {"epoch": epoch, "batches": loader.start, "exact": exact_resume(data), "rng": rng_state(data)}
    total = loader.num_batches

    def on_batch(handed_out: int) -> None:
        if total is not None and handed_out >= total:
            positions.pop(key, None)
        else:
            positions[key] = {**entry, "batches": handed_out}

    def on_end() -> None:  # the pass ran out before the expected count: the epoch is over
        if positions.get(key, {}).get("epoch") == epoch:
            positions.pop(key, None)

    loader.on_batch, loader.on_end = on_batch, on_end
    if loader.remaining == 0:
        positions.pop(key, None)
    else:
        positions[key] = entry
    return loader
