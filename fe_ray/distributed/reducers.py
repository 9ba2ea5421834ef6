"""Gradient reducers: the ``grad_reducer`` a replica's Network calls to average gradients across replicas.

They implement ``g_global = allreduce_sum(g_local * n_local) / n_total`` where ``n_local`` is the number of
samples in this replica's slice and ``n_total`` the batch size. Losses are means over samples, so this is
exactly the gradient one process computes on the whole batch, also for uneven slices; an idle replica (batch
smaller than the number of replicas) runs a padding sample with ``n_local = 0`` and contributes nothing.
The all-reduce itself is a :class:`~fe_ray.distributed.collective.Collective`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fe_ray.distributed.collective import Collective, TorchCollective


@dataclass
class StepWeights:
    """This replica's share of the current step: ``n_local`` of the ``n_total`` samples (read when reducing)."""

    n_local: float = 1.0
    n_total: float = 1.0


GradReducer = Callable[[Any, list[Any]], list[Any]]


def make_grad_reducer(framework: str, collective: Collective, weights: StepWeights) -> GradReducer:
    """The ``grad_reducer`` to install on a replica's network (see the module docstring for the math).

    Args:
        framework: "torch" or "tf".
        collective: A connected collective (a :class:`TorchCollective` for torch).
        weights: The replica's :class:`StepWeights`, updated by the replica before every step.
    """
    if framework == "torch":
        return _torch_reducer(collective, weights)
    if framework == "tf":
        return _TFReducer(collective, weights)
    raise ValueError(f"Unknown framework {framework!r}; valid choices are ['tf', 'torch'].")


def _torch_reducer(collective: Collective, weights: StepWeights) -> GradReducer:
    import torch

    from fe_ray.backend import get_backend

    backend = get_backend("torch")

    def reduce(model: Any, gradients: list[Any]) -> list[Any]:
        grads = list(gradients)
        if any(g is None for g in grads):  # only a `gradients` key can hold None (autograd's come zero-filled)
            params = backend.trainable_variables(model)
            if len(params) == len(grads):
                # A weight unused in this step has no gradient; every rank must still send the same buffer layout.
                grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        buckets: dict[tuple[Any, Any], list[int]] = {}
        for pos, grad in enumerate(grads):
            buckets.setdefault((grad.dtype, grad.device), []).append(pos)
        with torch.no_grad():
            for positions in buckets.values():  # same insertion order on every rank: same model, same ops
                flat = torch.cat([grads[i].detach().reshape(-1).float() for i in positions])
                flat.mul_(float(weights.n_local))
                if isinstance(collective, TorchCollective):
                    collective.allreduce_tensor_(flat)
                else:
                    flat = torch.as_tensor(collective.allreduce_sum([flat.cpu().numpy()])[0]).to(flat.device)
                flat.div_(float(weights.n_total))
                offset = 0
                for i in positions:
                    size = grads[i].numel()
                    grads[i] = flat[offset:offset + size].view_as(grads[i]).to(grads[i].dtype)
                    offset += size
        return grads

    return reduce


class _TFReducer:
    """The TF ``grad_reducer``: gradients as TF tensors in and out (see the module docstring for the math).

    :meth:`reduce_numpy` is the same reduction on numpy arrays; fe_ray's TF step calls it directly from its graph
    (``fe_ray.backend.tf_step.graph_safe_reducer``), without converting each gradient to an eager tensor and back.
    """

    def __init__(self, collective: Collective, weights: StepWeights) -> None:
        self._collective = collective
        self._weights = weights

    def reduce_numpy(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """All-reduce ``arrays`` (one step's gradients, in the same order on every rank) into their weighted mean."""
        # Runs at graph execution time, so it reads this step's weights (never values frozen at tracing time).
        weights = self._weights
        scaled = [np.asarray(a, np.float32) * np.float32(weights.n_local) for a in arrays]
        summed = self._collective.allreduce_sum(scaled)
        return [(s / np.float32(weights.n_total)).astype(a.dtype, copy=False) for s, a in zip(summed, arrays)]

    def __call__(self, model: Any, gradients: list[Any]) -> list[Any]:
        import tensorflow as tf

        present = [pos for pos, grad in enumerate(gradients) if grad is not None]
        if not present:
            return list(gradients)
        tensors = [tf.convert_to_tensor(gradients[pos]) for pos in present]  # IndexedSlices -> dense
        out = list(gradients)
        if tf.executing_eagerly():  # e.g. in eager mode, or inside a numpy_function of fe_ray's TF step
            for pos, value in zip(present, self.reduce_numpy(*[t.numpy() for t in tensors])):
                out[pos] = tf.convert_to_tensor(value)
            return out
        reduced = tf.numpy_function(self.reduce_numpy, tensors, Tout=[t.dtype for t in tensors], stateful=True,
                                    name="fe_ray_allreduce")
        for pos, tensor, value in zip(present, tensors, reduced):
            value.set_shape(tensor.shape)  # numpy_function loses static shapes; optimizers need them
            out[pos] = value
        return out


__all__ = ["GradReducer", "StepWeights", "make_grad_reducer"]
