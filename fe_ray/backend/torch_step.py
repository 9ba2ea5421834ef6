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
    from fe_ray.op.tensorop.tensorop import run_ops  # deferred: the op package imports the backend dispatcher

    batch_in = _inputs(batch, state, gpu_input_keys, device)
    with _grad_mode(state), _autocast(device, mixed_precision):
        run_ops(list(ops), batch_in, state)
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
    from fe_ray.op.tensorop.tensorop import run_ops

    ops = list(ops)
    assert 0 <= tail <= len(ops), f"tail {tail} of {len(ops)} ops"
    head, rest = ops[:len(ops) - tail], ops[len(ops) - tail:]
    batch_in = _inputs(batch, state, gpu_input_keys, device)
    with _grad_mode(state), _autocast(device, mixed_precision):
        run_ops(head, batch_in, state, end_step=False)
    outputs = {key: _to_host(batch_in[key]) for key in output_keys if key in batch_in}

    def finish() -> None:
        # The grad mode and autocast are per thread and were left above: the rest runs under the same ones.
        with _grad_mode(state), _autocast(device, mixed_precision):
            run_ops(rest, batch_in, state)

    return outputs, finish


def _inputs(batch: dict[str, Any], state: dict[str, Any], gpu_input_keys: set[str], device: Any) -> dict[str, Any]:
    """The keys the ops read, as tensors on ``device``; also starts the step's state."""
    # The Network already converted its batch: values that are tensors skip the nested walk.
    batch_in = {key: value if isinstance(value := batch[key], torch.Tensor) else to_tensor(value)
                for key in gpu_input_keys if key in batch}
    if device is not None:
        batch_in = {key: _to_device(value, device) for key, value in batch_in.items()}
    state["tape"] = NonContext()
    return batch_in


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
    return map_nested(_to_host_leaf, data)


def _to_host_leaf(data: Any) -> Any:
    if not isinstance(data, torch.Tensor):
        return data
    data = data.detach()
    return data if data.device.type == "cpu" else data.to("cpu")


def _to_device(data: Any, device: Any) -> Any:
    if isinstance(data, torch.Tensor):
        return data.to(device, non_blocking=True)
    if isinstance(data, dict):
        return {key: _to_device(value, device) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_to_device(value, device) for value in data)
    return data


__all__ = ["run_step", "start_step"]
