"""Persistence for torch models: weight files, checkpoints, and in-memory snapshots of weights + optimizer."""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

import numpy as np
import torch

from fe_ray.backend.optimizers import (
    SCHEDULED_KEY,
    model_optimizers,
    restore_scheduled,
    scheduled_states,
)
from fe_ray.io.snapshot import DeferredCopy

#: Key under which :func:`save_model` stores a GradScaler's state inside the optimizer's own state dict; torch's
#: ``Optimizer.load_state_dict`` ignores keys it does not know, so FastEstimator still reads the file.
_SCALER_KEY = "fe_ray_grad_scaler"
_DATA_PARALLEL_PREFIX = "module."


def load_weights(model: torch.nn.Module, path: str) -> None:
    """Load a ``state_dict`` file (as written by :func:`save_model`) into ``model``.

    Weights saved from a ``torch.nn.DataParallel`` / ``DistributedDataParallel`` wrapper (every key prefixed with
    ``module.``) load too, as FastEstimator loads them.
    """
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state and all(key.startswith(_DATA_PARALLEL_PREFIX) for key in state) and not any(
            key.startswith(_DATA_PARALLEL_PREFIX) for key in model.state_dict()):
        state = {key[len(_DATA_PARALLEL_PREFIX):]: value for key, value in state.items()}
    model.load_state_dict(state)


def save_model(model: torch.nn.Module, save_dir: str, model_name: str | None = None,
               save_optimizer: bool = False, save_architecture: bool = False) -> str:
    """Write ``<name>.pt`` (the model's state_dict) and optionally ``<name>_opt.pt`` into ``save_dir``.

    Both files have FastEstimator's layout (the optimizer file is the optimizer's ``state_dict``, with a GradScaler's
    state under one extra key), so either library loads what the other saved.

    Args:
        model: A model built with fe_ray.build.
        save_dir: Target folder (created if missing).
        model_name: File stem; defaults to ``model.model_name``.
        save_optimizer: Also save the current optimizer (and its GradScaler) state.
        save_architecture: Not available for torch (as in FastEstimator): a ValueError says so.

    Returns:
        The path of the weights file.

    Raises:
        ValueError: If ``save_architecture`` is set, or ``save_optimizer`` is set but the model has no optimizer.
        TypeError: If the model has no name (it was not built with fe_ray.build) and ``model_name`` is not given.
    """
    name = model_name or getattr(model, "model_name", None)
    if not name:
        raise TypeError(f"save_model needs a model built with fe_ray.build (which names it), got an unbuilt "
                        f"{type(model).__name__}. Build it with fe_ray.build(model_fn=..., optimizer_fn=...), or pass "
                        "model_name=... for the file name.")
    if save_architecture:
        raise ValueError(f"save_architecture=True cannot save torch model {name!r}: torch models are saved as weights "
                         "only (rebuild the model in code and load them). Pass save_architecture=False.")
    if save_optimizer and getattr(model, "current_optimizer", None) is None:
        raise ValueError(f"Cannot save the optimizer of model {name!r}: it has none. Pass save_optimizer=False, or "
                         "build the model with an optimizer_fn.")
    os.makedirs(save_dir, exist_ok=True)
    path = os.path.join(save_dir, f"{name}.pt")
    torch.save(model.state_dict(), path)
    optimizer = getattr(model, "current_optimizer", None)
    if save_optimizer and optimizer is not None:
        torch.save(_optimizer_file_payload(optimizer), _optimizer_path(path))
    return path


def load_model(model: torch.nn.Module, weights_path: str, load_optimizer: bool = False) -> None:
    """Load weights written by :func:`save_model`, and the optimizer state next to them when asked.

    The optimizer state is read from ``<weights path without extension>_opt.pt`` (FastEstimator's name), written by
    fe_ray or by FastEstimator.

    Raises:
        FileNotFoundError: If ``load_optimizer`` is set but ``<name>_opt.pt`` does not exist.
        ValueError: If ``load_optimizer`` is set but the model has no optimizer.
    """
    load_weights(model, weights_path)
    if not load_optimizer:
        return
    optimizer = getattr(model, "current_optimizer", None)
    if optimizer is None:
        raise ValueError(f"Cannot load optimizer state into model {model.model_name!r}: it has no optimizer.")
    opt_path = _optimizer_path(weights_path)
    if not os.path.exists(opt_path):
        raise FileNotFoundError(f"Optimizer state {opt_path!r} not found; save it with save_optimizer=True or load "
                                "with load_optimizer=False.")
    _load_optimizer_file_payload(optimizer, torch.load(opt_path, map_location="cpu", weights_only=True))


def _optimizer_path(weights_path: str) -> str:
    # FastEstimator's rule: the weights file's extension, whatever it is (".pt", ".pth"), gives way to "_opt.pt".
    return f"{os.path.splitext(weights_path)[0]}_opt.pt"


def _optimizer_file_payload(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What an ``_opt.pt`` file holds: the optimizer's state dict, plus the GradScaler's state where there is one."""
    payload = optimizer.state_dict()
    scaler = getattr(optimizer, "scaler", None)
    if scaler is not None:
        payload = {**payload, _SCALER_KEY: scaler.state_dict()}
    return payload


def _load_optimizer_file_payload(optimizer: torch.optim.Optimizer, payload: dict[str, Any]) -> None:
    """Restore an ``_opt.pt`` file's contents: FastEstimator's layout (a bare optimizer state dict, perhaps with
    :data:`_SCALER_KEY`) or the ``{"optimizer", "scaler"}`` layout that earlier fe_ray versions wrote."""
    if "param_groups" not in payload and "optimizer" in payload:
        _load_optimizer_payload(optimizer, payload)
        return
    scaler_state = payload.get(_SCALER_KEY)
    optimizer.load_state_dict({key: value for key, value in payload.items() if key != _SCALER_KEY})
    scaler = getattr(optimizer, "scaler", None)
    if scaler is not None and scaler_state:
        scaler.load_state_dict(scaler_state)


def _optimizer_payload(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    scaler = getattr(optimizer, "scaler", None)
    return {"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict() if scaler is not None else None}


def _load_optimizer_payload(optimizer: torch.optim.Optimizer, payload: dict[str, Any]) -> None:
    optimizer.load_state_dict(payload["optimizer"])
    scaler = getattr(optimizer, "scaler", None)
    if scaler is not None and payload.get("scaler"):
        scaler.load_state_dict(payload["scaler"])


def get_state(model: torch.nn.Module, copy: bool = True, deferred: bool = False,
              weights_only: bool = False) -> dict[str, Any]:
    """An in-memory, picklable (numpy-only) snapshot of the weights and the current optimizer's state (with a
    Scheduler of optimizers, every scheduled optimizer's: :mod:`fe_ray.backend.optimizers`).

    Used for weight sync between replicas and fast checkpoints; :func:`set_state` restores it exactly.

    Args:
        model: The model.
        copy: False returns views of CPU tensors instead of copies: only for a consumer that is done with the
            snapshot before the model changes again (a synchronous checkpoint write, ``ray.put``).
        deferred: Tensors on an accelerator come back as :class:`~fe_ray.io.snapshot.DeferredCopy` leaves instead
            of fresh host arrays, for :class:`~fe_ray.io.snapshot.SnapshotBuffers` to copy into kept host buffers
            (not picklable: copy them before anything else).
        weights_only: Leave the optimizer out (its entry is None): :func:`set_state` of such a snapshot restores
            the weights and keeps the optimizer's state as it is.
    """
    optimizer = None if weights_only else getattr(model, "current_optimizer", None)

    def optimizer_state(each: torch.optim.Optimizer) -> dict[str, Any]:
        return _nested_to_numpy(_optimizer_payload(each), copy, deferred)

    state = {"model": {key: _to_numpy(value, copy, deferred) for key, value in model.state_dict().items()},
             "optimizer": optimizer_state(optimizer) if optimizer is not None else None}
    scheduled = None if weights_only else scheduled_states(model, optimizer, optimizer_state)
    if scheduled is not None:
        state[SCHEDULED_KEY] = scheduled
    return state


def get_buffers(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """Copies of the model's buffers (BatchNorm running statistics and the like): its state outside gradients."""
    return {name: _to_numpy(buffer, True) for name, buffer in model.named_buffers()}


def set_buffers(model: torch.nn.Module, buffers: dict[str, Any]) -> None:
    """Copy :func:`get_buffers`' arrays into the model's own buffers (an unknown or missing name is an error).

    Raises:
        ValueError: If the names differ from the model's buffers.
    """
    own = dict(model.named_buffers())
    if set(own) != set(buffers):
        raise ValueError(f"Buffers {sorted(buffers)} do not match model {getattr(model, 'model_name', '')!r}'s "
                         f"{sorted(own)}; they belong to a different architecture.")
    with torch.no_grad():
        for name, value in buffers.items():
            own[name].copy_(_tensor_to_read(value))


def weights_fingerprint(model: torch.nn.Module) -> tuple[Any, ...]:
    """What identifies the values of the model's parameters and buffers and its optimizers' states, without reading
    them: each tensor's identity, storage and version counter, which every in-place write moves
    (``load_state_dict``'s copies too), and each optimizer's state entries (a cleared or reloaded state has other
    tensors, or none). Equal fingerprints mean nothing was written in between."""
    weights = tuple((id(tensor), tensor.data_ptr(), tensor._version)
                    for tensor in (*model.parameters(), *model.buffers()))
    optimizers = model_optimizers(model)
    states = tuple((id(optimizer), len(optimizer.state),
                    tuple((id(value), value.data_ptr(), value._version) if isinstance(value, torch.Tensor) else value
                          for entry in optimizer.state.values() for value in entry.values()))
                   for optimizer in optimizers)
    return weights + states


def weight_layout(model: torch.nn.Module) -> list[list[Any]]:
    """The model's state entries as ``[name, *shape]`` lists, in order (JSON-ready): equal layouts mean a snapshot of
    one model loads into the other."""
    return [[name, *map(int, value.shape)] for name, value in model.state_dict().items()]


def state_is_view(model: torch.nn.Module) -> bool:
    """Whether :func:`get_state` with ``copy=False`` returns views of live tensors (any CPU tensor except bfloat16,
    which is converted, hence copied); a model on a GPU yields host arrays of its own."""
    tensors = list(model.state_dict().values())
    optimizers = model_optimizers(model)
    for optimizer in optimizers:
        tensors += [value for entry in optimizer.state.values() for value in entry.values()
                    if isinstance(value, torch.Tensor)]
    return any(t.device.type == "cpu" and t.dtype != torch.bfloat16 for t in tensors)


def set_state(model: torch.nn.Module, state: dict[str, Any], copy: bool = True) -> None:
    """Restore a :func:`get_state` snapshot (weights, and optimizer state if both sides have an optimizer: each
    scheduled optimizer's into its own, whichever is current).

    Args:
        model: The model.
        state: The snapshot; with ``copy`` its arrays may be read-only (e.g. views of Ray's object store).
        copy: True copies the snapshot, into the optimizer's own state tensors when it already holds a state of
            the same layout (same parameters, keys, shapes and dtypes, CPU: e.g. from the previous sync), so no
            memory is allocated, else into new ones. False lets the optimizer adopt the snapshot's writable
            arrays as its state (torch's ``load_state_dict`` keeps the tensors it is given), saving a copy and its
            memory; the caller must not use the snapshot afterwards. Weights are always copied into the model's
            own parameters.
    """
    model.load_state_dict({key: _tensor_to_read(value) for key, value in state["model"].items()})

    def load(optimizer: torch.optim.Optimizer, payload: dict[str, Any]) -> None:
        if not (copy and _load_optimizer_in_place(optimizer, payload)):
            _load_optimizer_payload(optimizer, _nested_to_torch(payload, copy))

    if restore_scheduled(model, state, load):
        return
    optimizer = getattr(model, "current_optimizer", None)
    if optimizer is not None and state.get("optimizer") is not None:
        load(optimizer, state["optimizer"])


def _tensor_to_read(value: Any) -> Any:
    """A tensor over ``value``'s memory that is only read (``load_state_dict`` copies from it), so a read-only
    array needs no copy and no warning."""
    if not isinstance(value, np.ndarray) or value.flags.writeable:
        return torch.as_tensor(value)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.as_tensor(value)


def _load_optimizer_in_place(optimizer: torch.optim.Optimizer, payload: dict[str, Any]) -> bool:
    """Copy a snapshot's optimizer state into the optimizer's existing state tensors (warm memory: a fresh copy of a
    large state costs more in page faults than in copying on some machines). Only when every state tensor has a
    counterpart of the same shape and dtype on the CPU; returns False, having changed nothing, otherwise."""
    saved = payload["optimizer"]
    groups = optimizer.param_groups
    if len(saved["param_groups"]) != len(groups):
        return False
    params = [param for group in groups for param in group["params"]]
    indices = [index for group in saved["param_groups"] for index in group["params"]]
    if len(indices) != len(params) or len(saved["state"]) != len(optimizer.state):
        return False
    by_index = dict(zip(indices, params))
    copies: list[tuple[torch.Tensor, np.ndarray]] = []
    for index, entry in saved["state"].items():
        live = optimizer.state.get(by_index.get(index))  # type: ignore[arg-type]
        if not live or live.keys() != entry.keys():
            return False
        for key, value in entry.items():
            target = live[key]
            if isinstance(target, torch.Tensor) != isinstance(value, np.ndarray):
                return False
            if isinstance(target, torch.Tensor):
                if (target.device.type != "cpu" or target.dtype == torch.bfloat16 or tuple(target.shape) != value.shape
                        or target.numpy().dtype != value.dtype):
                    return False
                copies.append((target, value))
    # Everything matches: copy the tensors, then set what load_state_dict would set besides them.
    for target, value in copies:
        np.copyto(target.numpy(), value, casting="no")
    for index, entry in saved["state"].items():
        live = optimizer.state[by_index[index]]
        for key, value in entry.items():
            if not isinstance(value, np.ndarray):
                live[key] = value
    for group, saved_group in zip(groups, saved["param_groups"]):
        group.update({key: _nested_to_torch(value) for key, value in saved_group.items() if key != "params"})
    scaler = getattr(optimizer, "scaler", None)
    if scaler is not None and payload.get("scaler"):
        scaler.load_state_dict(payload["scaler"])
    return True


class _DeviceTensor(DeferredCopy):
    """A tensor on an accelerator, to be copied into a host buffer (bfloat16 as float32, exactly, as
    :func:`_to_numpy` converts it)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor.detach()
        self.shape = tuple(tensor.shape)
        host = torch.float32 if tensor.dtype == torch.bfloat16 else tensor.dtype
        self.dtype = torch.empty(0, dtype=host).numpy().dtype
        # The copy may run on another thread (SnapshotBuffers' pool), whose current stream is the default one: it
        # must queue behind the work training queued on this thread's stream (the last optimizer step included).
        self.stream = torch.cuda.current_stream(tensor.device) if tensor.is_cuda else None

    def copy_to(self, out: np.ndarray) -> None:
        # A blocking copy: when it returns the host buffer holds the value, and the device tensor may change.
        with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
            torch.from_numpy(out).copy_(self.tensor)


def _to_numpy(tensor: torch.Tensor, copy: bool = True, deferred: bool = False) -> np.ndarray | _DeviceTensor:
    on_cpu = tensor.device.type == "cpu"
    if deferred and not on_cpu:
        return _DeviceTensor(tensor)
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()  # exact; load_state_dict casts back to the parameter dtype
        on_cpu = False  # .float() made a copy already
    # A snapshot must not alias live weights; a device-to-host copy (or the bfloat16 cast) already is a new buffer.
    return tensor.numpy().copy() if on_cpu and copy else tensor.numpy()


def _nested_to_numpy(data: Any, copy: bool = True, deferred: bool = False) -> Any:
    if isinstance(data, torch.Tensor):
        return _to_numpy(data, copy, deferred)
    if isinstance(data, dict):
        return {key: _nested_to_numpy(value, copy, deferred) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_nested_to_numpy(value, copy, deferred) for value in data)
    return data


def _nested_to_torch(data: Any, copy: bool = True) -> Any:
    if isinstance(data, np.ndarray):
        # A read-only array (an object-store view) is copied either way: the optimizer updates its state in place.
        return torch.as_tensor(data.copy() if copy or not data.flags.writeable else data)
    if isinstance(data, dict):
        return {key: _nested_to_torch(value, copy) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_nested_to_torch(value, copy) for value in data)
    return data
