"""Every optimizer a built model holds, for state snapshots that must restore each of them, and optimizers looked up
by FastEstimator's names (framework-neutral).

A model built with a Scheduler of optimizers (``fe_ray.build(..., optimizer_fn=EpochScheduler({1: "adam", 3:
"sgd"}))``) holds one optimizer per scheduled entry and uses one of them per epoch (``current_optimizer``). A
snapshot of only the current one loses the others: a RepeatScheduler's optimizer that comes back in a later epoch
would restart from nothing, and a run resumed in epoch 3 would load the SGD state into the optimizer current when the
checkpoint is read (the Adam of epoch 1, before the first epoch starts). So a backend's ``get_state`` adds
:data:`SCHEDULED_KEY`: the state of every scheduled optimizer, by its place in the schedule, and ``set_state``
loads each into its own optimizer, whichever is current at either end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: The snapshot entry holding a scheduled model's optimizer states:
#: ``{"current": index or None, "states": [state or None, ...]}``. The current optimizer's state stays in the
#: snapshot's ``"optimizer"`` entry (``states`` has None at its index), so it is not held twice.
SCHEDULED_KEY = "scheduled_optimizers"


def scheduled_optimizers(model: Any) -> list[Any]:
    """The distinct optimizers of a model built with a Scheduler of optimizers, in the schedule's order.

    Returns:
        An empty list for a model with a single optimizer or none.
    """
    from fe_ray.schedule.schedule import Scheduler  # deferred: the schedule package is not a backend dependency

    schedule = getattr(model, "optimizer", None)
    if not isinstance(schedule, Scheduler):
        return []
    found: list[Any] = []
    for optimizer in schedule.get_all_values():
        # The same optimizer may be scheduled twice (RepeatScheduler([adam, sgd, adam])): one state for it.
        if optimizer is not None and not any(optimizer is seen for seen in found):
            found.append(optimizer)
    return found


def model_optimizers(model: Any) -> list[Any]:
    """Every optimizer of ``model``: the current one first (if any), then the other scheduled ones."""
    current = getattr(model, "current_optimizer", None)
    optimizers = [current] if current is not None else []
    return optimizers + [optimizer for optimizer in scheduled_optimizers(model) if optimizer is not current]


def scheduled_states(model: Any, current: Any, state_of: Callable[[Any], Any]) -> dict[str, Any] | None:
    """The :data:`SCHEDULED_KEY` entry for ``model``'s snapshot, or None for a model without a schedule.

    Args:
        model: The model.
        current: The optimizer whose state the snapshot's ``"optimizer"`` entry holds (None: that entry is None).
        state_of: The backend's snapshot of one optimizer's state.
    """
    optimizers = scheduled_optimizers(model)
    if not optimizers:
        return None
    index = next((pos for pos, optimizer in enumerate(optimizers) if optimizer is current), None)
    return {"current": index,
            "states": [None if pos == index else state_of(optimizer) for pos, optimizer in enumerate(optimizers)]}


def restore_scheduled(model: Any, state: dict[str, Any], load: Callable[[Any, Any], None]) -> bool:
    """Load every scheduled optimizer's state from a snapshot with a :data:`SCHEDULED_KEY` entry.

    Args:
        model: The model.
        state: The snapshot (``"optimizer"`` holds the state of the optimizer that was current when it was taken).
        load: The backend's restore of one optimizer from its snapshot state.

    Returns:
        False, having loaded nothing, when the snapshot has no such entry (a single optimizer, or one taken without
        the optimizers) or the model's schedule holds a different number of optimizers; the caller then restores
        ``"optimizer"`` into the current optimizer.
    """
    saved = state.get(SCHEDULED_KEY)
    optimizers = scheduled_optimizers(model)
    if not saved or len(saved["states"]) != len(optimizers):
        return False
    for pos, optimizer in enumerate(optimizers):
        payload = state.get("optimizer") if pos == saved["current"] else saved["states"][pos]
        if payload is not None:
            load(optimizer, payload)
    return True


def optimizer_by_name(name: str, constructors: Mapping[str, Callable[..., Any]], instead: str) -> Callable[..., Any]:
    """The constructor a backend lists for optimizer ``name`` (any case).

    Args:
        name: The name given as ``optimizer_fn`` ("adam", "SGD", ...).
        constructors: The backend's constructors by lower-case name.
        instead: What to pass instead, for the error (e.g. "a callable such as `...`").

    Raises:
        ValueError: For an unknown name, listing the valid names and ``instead``.
    """
    key = name.lower()
    if key not in constructors:
        raise ValueError(f"Unknown optimizer {name!r}; valid names are {sorted(constructors)}, or pass {instead}.")
    return constructors[key]


__all__ = ["SCHEDULED_KEY", "model_optimizers", "optimizer_by_name", "restore_scheduled", "scheduled_optimizers",
           "scheduled_states"]
