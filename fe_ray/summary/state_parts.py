"""The parts of a System checkpoint taken from, or checked against, the objects a run trains: model states and
layouts, generator states, the running epoch's results, and the messages that explain a mismatch."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fe_ray.backend import get_backend
from fe_ray.backend.determinism import get_rng_state, set_rng_state
from fe_ray.io.snapshot import DeferredCopy, SnapshotBuffers
from fe_ray.schedule import get_current_items
from fe_ray.util import map_nested


def missing_message(load_dir: str, message: str) -> str:
    """``message`` (a missing file), or what is missing when it is the whole folder: a mistyped or never-written
    checkpoint rather than a damaged one."""
    from fe_ray.io.checkpoint import open_fs

    try:
        fs, path = open_fs(load_dir)
        folder_missing = not fs.isdir(path)
    except Exception:  # noqa: BLE001 - the file's own message is still right
        return message
    if not folder_missing:
        return message
    return (f"No checkpoint folder at {load_dir!r}: load_state reads a folder that save_state wrote (a "
            "RestoreWizard keeps its checkpoints as ckpt-NNNNNN folders inside its directory). Check the path.")


def snapshot_models(models: Sequence[Any], copy: bool = True,
                    buffers: SnapshotBuffers | None = None) -> dict[str, Any]:
    """Every model's state (weights + optimizer, numpy only) keyed by model name, as checkpoints hold them.

    Args:
        models: The models (built with :func:`fe_ray.build`).
        copy: False returns views of live CPU tensors where the backend can (see ``get_state``).
        buffers: With ``copy``, copy the states that would otherwise be views, and those on an accelerator, into
            these reused buffers (one parallel copy of all models together, device tensors straight into warm
            host memory); states that are host arrays of their own already (TF models) are taken as they are.
    """
    into_buffers = copy and buffers is not None
    states = {model_name(model): get_backend(model).get_state(model, copy=copy and buffers is None,
                                                               deferred=into_buffers)
              for model in models}
    if into_buffers:
        live = {model_name(model): states[model_name(model)] for model in models
                if get_backend(model).state_is_view(model) or _has_deferred(states[model_name(model)])}
        states.update(buffers.copy(live))  # type: ignore[union-attr]
    return states


def model_layout(model: Any) -> dict[str, Any]:
    """What a model's checkpointed state must fit: its optimizers' classes (each scheduled one) and its weights."""
    optimizers = get_current_items([getattr(model, "optimizer", None)])
    return {"optimizers": [type(optimizer).__name__ for optimizer in optimizers],
            "weights": get_backend(model).weight_layout(model)}


def layout_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """One line per model (present on both sides) whose optimizers or weights differ, naming the first difference
    (models added or removed are reported by the fingerprint's model names)."""
    lines = []
    for name in sorted(set(saved) & set(current)):
        before, now = saved[name], current[name]
        if before.get("optimizers") != now.get("optimizers"):
            lines.append(f"model {name!r}'s optimizer: checkpoint has {before.get('optimizers')}, this run has "
                         f"{now.get('optimizers')}")
        old, new = before.get("weights", []), now.get("weights", [])
        if old != new:
            first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
            where = (f"first difference at entry {first}: checkpoint {old[first] if first < len(old) else 'none'}, "
                     f"this run {new[first] if first < len(new) else 'none'}")
            lines.append(f"model {name!r}'s weights: checkpoint has {len(old)} tensors, this run has {len(new)}; "
                         f"{where}")
    return lines


def _has_deferred(state: Any) -> bool:
    found: list[bool] = []
    map_nested(lambda leaf: found.append(True) if isinstance(leaf, DeferredCopy) else None, state)
    return bool(found)


def model_name(model: Any) -> str:
    name = getattr(model, "model_name", None)
    if not name:
        raise ValueError(f"Model {type(model).__name__} has no model_name; build it with fe_ray.build.")
    if "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"Model name {name!r} cannot be used as a checkpoint file name; choose a name without "
                         "path separators or a leading dot (fe_ray.build(..., model_name=...)).")
    return str(name)


def capture_rng(network: Any) -> dict[str, Any]:
    """The driver's generator states, plus each replica's when the network runs on replicas."""
    state = get_rng_state(getattr(network, "models", ()))
    replicas = getattr(network, "replica_rng_states", None)
    if replicas is not None:
        states = replicas()
        if states is not None:
            state["replicas"] = states
    return state


def restore_rng(network: Any, state: Mapping[str, Any]) -> None:
    set_rng_state(state, getattr(network, "models", ()))
    load = getattr(network, "load_replica_rng_states", None)
    if load is not None and state.get("replicas") is not None:
        load(state["replicas"])


def auto_name_hint(saved: Any, current: Any) -> str:
    """Why model names built without ``model_name`` can differ between two runs in one process, and the fix."""
    names = [*(saved or []), *(current or [])]
    if saved == current or not names or not all(re.fullmatch(r"model\d*", str(name)) for name in names):
        return ""
    return (" fe.build names models 'model', 'model1', ... in build order within a process, so a run repeated in "
            "the same process (a rerun notebook cell, a retry loop) gets other names: pass model_name= to fe.build "
            "to restore there.")


def epoch_results(epoch_data: Any) -> dict[str, dict[str, Any]] | None:
    """What the running epoch's traces wrote for ``on_epoch_end`` so far (None outside an epoch)."""
    if epoch_data is None:
        return None
    return {"logged": dict(epoch_data.read_logs()), "unlogged": dict(epoch_data.maps[1])}
