"""The torch step executor: runs a Network's ops on one (mini)batch, whole or in two parts.

:func:`run_step` runs every op and then reads the outputs back to the host. :func:`start_step` reads them back
after all but the step's trailing weight updates, and returns the updates as a function to call later: a replica
answers the driver with the outputs first and computes the backward pass and the update while its answer travels
and the driver merges it and sends the next batch (see :meth:`fe_ray.network.BaseNetwork.start_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch

from fe_ray.backend.torch_tensors import to_tensor
from fe_ray.util import NonContext, map_nested

_CPU = torch.device("cpu")
#: :func:`fe_ray.op.tensorop.tensorop.run_ops`, imported on the first step rather than at import time (the op package
#: imports the backend dispatcher, which imports this module) and kept: a function-level import costs 0.6 us a step.
_RUN_OPS: Callable[..., None] | None = None


def _run_ops() -> Callable[..., None]:
    global _RUN_OPS
    if _RUN_OPS is None:
        from fe_ray.op.tensorop.tensorop import run_ops

        _RUN_OPS = run_ops
    return _RUN_OPS


def run_step(ops: Sequence[Any], batch: dict[str, Any], state: dict[str, Any], gpu_input_keys: set[str],
             output_keys: set[str], device: Any = None, mixed_precision: bool = False) -> dict[str, Any]:
    """Run one forward (and, in training, backward) pass of ``ops``; return detached CPU outputs.

    Args:
        ops: The TensorOps of the current context.
        batch: The (mini)batch; only ``gpu_input_keys`` are converted and moved to ``device``.
        state: The context state; ``state["req_grad"]`` enables autograd.
        gpu_input_keys: Keys the ops read from the batch.
        output_keys: Keys to return.
        device: Where to run (None keeps tensors where they are).
        mixed_precision: Run under ``torch.autocast``.
    """
    batch_in = _inputs(batch, state, gpu_input_keys, device)
    _run_ops_in_modes(list(ops), batch_in, state, device, mixed_precision)
    return {key: _to_host(batch_in[key]) for key in output_keys if key in batch_in}


def start_step(ops: Sequence[Any], batch: dict[str, Any], state: dict[str, Any], gpu_input_keys: set[str],
               output_keys: set[str], device: Any = None, mixed_precision: bool = False,
               tail: int = 0) -> tuple[dict[str, Any], Callable[[], None]]:
    """Run all but the last ``tail`` ops; return the outputs and a function that runs the rest of the step.

    The rest is those ops and the updates deferred to the step's end. The caller picks ``tail`` so that those ops
    write no key (UpdateOps), which makes the outputs final before they run; it must call the function before
    anything else uses the step's models. Outputs on the CPU share memory with the step's tensors, so read or
    copy them first if an output is a tensor the update changes in place (a weight).

    Args:
        ops, batch, state, gpu_input_keys, output_keys, device, mixed_precision: As for :func:`run_step`.
        tail: How many of the last ops to leave for the returned function, from 0 to ``len(ops)``.
    """
    ops = list(ops)
    assert 0 <= tail <= len(ops), f"tail {tail} of {len(ops)} ops"
    head, rest = ops[:len(ops) - tail], ops[len(ops) - tail:]
    batch_in = _inputs(batch, state, gpu_input_keys, device)
    _run_ops_in_modes(head, batch_in, state, device, mixed_precision, end_step=False)
    outputs = {key: _to_host(batch_in[key]) for key in output_keys if key in batch_in}

    def finish() -> None:
        # The grad mode and autocast are per thread and were left above: the rest runs under the same ones.
        _run_ops_in_modes(rest, batch_in, state, device, mixed_precision)

    return outputs, finish


def _inputs(batch: dict[str, Any], state: dict[str, Any], gpu_input_keys: set[str], device: Any) -> dict[str, Any]:
    """The keys the ops read, as tensors on ``device``; also starts the step's state."""
    # On the CPU, a plain CPU tensor's .to(device) is the tensor itself: that call (0.4 us a key) is skipped. Only
    # for torch.device("cpu") itself: .to("cpu:0") makes a new tensor.
    on_cpu = isinstance(device, torch.device) and device == _CPU
    batch_in = {}
    for key in gpu_input_keys:
        if key not in batch:
            continue
        value = batch[key]
        if not isinstance(value, torch.Tensor):  # the Network already converted its batch: tensors skip the walk
            value = to_tensor(value)
        if device is not None and not (on_cpu and type(value) is torch.Tensor and value.is_cpu):
            value = _to_device(value, device)
        batch_in[key] = value
    state["tape"] = NonContext()
    return batch_in


def _run_ops_in_modes(ops: list[Any], batch_in: dict[str, Any], state: dict[str, Any], device: Any,
                      mixed_precision: bool, end_step: bool = True) -> None:
    """``run_ops`` under the step's grad mode and autocast."""
    run_ops = _RUN_OPS or _run_ops()
    if state.get("req_grad") and not mixed_precision:
        # A full-precision training step, the usual one, needs neither context: entering and leaving two no-op
        # ones would cost it 0.5 us.
        run_ops(ops, batch_in, state, end_step)
        return
    with _grad_mode(state), _autocast(device, mixed_precision):
        run_ops(ops, batch_in, state, end_step)


def _grad_mode(state: dict[str, Any]) -> AbstractContextManager[Any]:
    return torch.no_grad() if not state.get("req_grad") else NonContext()


def _autocast(device: Any, mixed_precision: bool) -> AbstractContextManager[Any]:
    if not mixed_precision:
        return NonContext()
    return torch.autocast(device_type=torch.device(device).type if device is not None else "cpu")


def _to_host(data: Any) -> Any:
    """Detached CPU versions of (nested) tensors.

    The copy from an accelerator blocks on purpose: a ``non_blocking`` device-to-host copy lands in pinned memory
    and returns before the data is there, so numpy could read it unfinished.
    """
    if isinstance(data, torch.Tensor):  # the usual output: no nested walk
        return _to_host_leaf(data)
    return map_nested(_to_host_leaf, data)


def _to_host_leaf(data: Any) -> Any:
    if not isinstance(data, torch.Tensor):
        return data
    data = data.detach()
    return data if data.is_cpu else data.to("cpu")  # is_cpu: device.type == "cpu" without making a device object


def _to_device(data: Any, device: Any) -> Any:
    if isinstance(data, torch.Tensor):
        return data.to(device, non_blocking=True)
    if isinstance(data, dict):
        return {key: _to_device(value, device) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_to_device(value, device) for value in data)
    return data


__all__ = ["run_step", "start_step"]
