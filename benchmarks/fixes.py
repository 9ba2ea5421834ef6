"""Candidate fe_ray fixes, applied as monkeypatches for before/after measurements (``--try-fix NAME``).

These are experiments that show what a change in fe_ray's own code would gain; they are not part of fe_ray and
change nothing unless a benchmark is run with ``--try-fix``. Each one mirrors a concrete edit proposed in
benchmarks/RESULTS.md. Both below have since been made in fe_ray itself (2026-11-23), so applying them now
measures nothing new; they stay to reproduce the recorded before/after figures on an older checkout.

    step_on_cpu   fe_ray.backend.torch._move_nested: keep Adam's 0-dim ``step`` tensors on the CPU when moving
                  optimizer state to the GPU (torch's non-capturable Adam reads them with ``.item()`` every step,
                  i.e. one device sync per parameter tensor per step).
    no_grad_clone fe_ray.backend.torch.update_model: use the fresh tensors autograd.grad returned as ``p.grad``
                  instead of cloning them (one extra copy of every gradient per step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _step_on_cpu() -> None:
    import torch

    from fe_ray.backend import torch as backend

    def _move_nested(data: Any, device: Any) -> None:
        for key, value in data.items():
            if isinstance(value, dict):
                _move_nested(value, device)
            elif isinstance(value, torch.Tensor):
                if key == "step" and value.dim() == 0:
                    continue  # torch keeps non-capturable step counters on the CPU
                data[key] = value.to(device)

    backend._move_nested = _move_nested


def _no_grad_clone() -> None:
    from fe_ray.backend import torch as backend

    def update_model_exact(model: Any, gradients: Any, defer: bool = False, deferred: Any = None) -> None:
        for param, grad in zip(backend.trainable_variables(model), gradients):
            if param.grad is None:
                param.grad = grad.detach()
            else:
                param.grad += grad.detach()
        if defer:
            deferred[model.model_name] = [lambda: backend._optimizer_step(model)]
            return
        backend._optimizer_step(model)
        if deferred:
            deferred.pop(model.model_name, None)

    backend.update_model = update_model_exact


FIXES: dict[str, Callable[[], None]] = {"step_on_cpu": _step_on_cpu, "no_grad_clone": _no_grad_clone}


def apply(names: str) -> list[str]:
    """Apply the comma-separated fixes ``names``; return the applied names."""
    applied = []
    for name in filter(None, (n.strip() for n in names.split(","))):
        if name not in FIXES:
            raise ValueError(f"unknown fix {name!r}; known: {sorted(FIXES)}")
        FIXES[name]()
        applied.append(name)
    return applied
