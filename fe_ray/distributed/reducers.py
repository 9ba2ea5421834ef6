"""Gradient reducers: the ``grad_reducer`` a replica's Network calls to average gradients across replicas.

They implement ``g_global = allreduce_sum(g_local * n_local) / n_total`` where ``n_local`` is the number of
samples in this replica's slice and ``n_total`` the batch size. Losses are means over samples, so this is
exactly the gradient one process computes on the whole batch, also for uneven slices; an idle replica (batch
smaller than the number of replicas) runs a padding sample with ``n_local = 0`` and contributes nothing.
The all-reduce itself is a :class:`~fe_ray.distributed.collective.Collective`.

Loss scaling (mixed precision) needs the weighting before the backward pass instead: a replica's slice-mean loss
times the loss scale gives float16 gradients up to N times larger than the whole batch's share of them, which can
overflow (and skip the step) where one process on the whole batch does not. So a reducer also offers
:meth:`~_Reducer.loss_share` (``n_local / n_total``): the UpdateOp of a loss-scaled model multiplies its loss by
it before differentiating, and calls the reducer with ``prescaled=True``, which then only sums. Both orders give
the same gradient; the second keeps every replica's backward pass at the magnitudes of the in-process one.
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


GradReducer = Callable[..., list[Any]]


def make_grad_reducer(framework: str, collective: Collective, weights: StepWeights) -> GradReducer:
    """The ``grad_reducer`` to install on a replica's network (see the module docstring for the math).

    Args:
        framework: "torch" or "tf".
        collective: A connected collective (a :class:`TorchCollective` for torch).
        weights: The replica's :class:`StepWeights`, updated by the replica before every step.
    """
    if framework == "torch":
        return _TorchReducer(collective, weights)
    if framework == "tf":
        return _TFReducer(collective, weights)
    raise ValueError(f"Unknown framework {framework!r}; valid choices are ['tf', 'torch'].")


class _Reducer:
    """What the torch and TF reducers share: this step's weights, and the loss share of the prescaled path."""

    def __init__(self, collective: Collective, weights: StepWeights) -> None:
        self._collective = collective
        self._weights = weights

    def loss_share(self) -> float:
        """This replica's share of the step's samples: the factor a loss-scaled UpdateOp puts on its loss."""
        return self._weights.n_local / self._weights.n_total

    def _factors(self, prescaled: bool) -> tuple[float, float]:
        """(multiply before, divide after) the all-reduce sum: none for gradients of an already weighted loss."""
        if prescaled:
            return 1.0, 1.0
        # Read now, at run time (in TF: graph execution time), never values frozen when a graph was traced.
        return self._weights.n_local, self._weights.n_total


class _TorchReducer(_Reducer):
    """The torch ``grad_reducer``: one flat float32 buffer per (dtype, device) bucket, all-reduced in place."""

    def __init__(self, collective: Collective, weights: StepWeights) -> None:
        super().__init__(collective, weights)
        from fe_ray.backend import get_backend

        self._backend = get_backend("torch")
        self._all_reached: dict[tuple[int, str], Any] = {}

    def __call__(self, model: Any, gradients: list[Any], prescaled: bool = False) -> list[Any]:
        import torch

        grads = list(gradients)
        # A weight this step's loss does not reach has no gradient (None). Every rank still sends the same buffer
        # layout (zeros), and one flag per weight travels with it: a weight stays None only if no rank reached it
        # (UpdateOp then leaves it alone), so data-dependent paths (an expert no sample of one slice was routed to)
        # cannot make the replicas' updates differ.
        reached = [g is not None for g in grads]
        if not all(reached):
            params = self._backend.trainable_variables(model)
            if len(params) != len(grads):
                raise ValueError(f"Gradients of model {getattr(model, 'model_name', model)!r} hold None but their "
                                 f"count ({len(grads)}) is not its weight count ({len(params)}): give one gradient "
                                 "per trainable weight, in order (zeros for weights the loss does not reach).")
            grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        multiply, divide = self._factors(prescaled)
        buckets: dict[tuple[Any, Any], list[int]] = {}
        for pos, grad in enumerate(grads):
            buckets.setdefault((grad.dtype, grad.device), []).append(pos)
        with torch.no_grad():
            for number, positions in enumerate(buckets.values()):  # same order on every rank: same model, same ops
                parts = [grads[i].detach().reshape(-1).float() for i in positions]
                total = sum(part.numel() for part in parts)
                if number == 0:  # the flags ride behind the first bucket's gradients, summed and never scaled
                    parts.append(self._flags(reached, parts[0].device))
                flat = torch.cat(parts)
                if multiply != 1.0:
                    flat[:total].mul_(float(multiply))
                if isinstance(self._collective, TorchCollective):
                    self._collective.allreduce_tensor_(flat)
                else:
                    flat = torch.as_tensor(self._collective.allreduce_sum([flat.cpu().numpy()])[0]).to(flat.device)
                if divide != 1.0:
                    flat[:total].div_(float(divide))
                offset = 0
                for i in positions:
                    size = grads[i].numel()
                    grads[i] = flat[offset:offset + size].view_as(grads[i]).to(grads[i].dtype)
                    offset += size
                if number == 0 and not all(reached):
                    # A weight counts as reached if any rank reached it. Where this rank reached every weight, all
                    # are reached and the summed flags need not be read: reading them would make the host wait for
                    # the GPU (backward pass and all-reduce) in the middle of every step.
                    reached = [count > 0.5 for count in flat[total:].tolist()]
        return [grad if hit else None for grad, hit in zip(grads, reached)]

    def _flags(self, reached: list[bool], device: Any) -> Any:
        """``reached`` as float32 on ``device``; the all-True vector of every step is made once."""
        import torch

        if not all(reached):
            return torch.tensor(reached, dtype=torch.float32, device=device)
        key = (len(reached), str(device))
        if key not in self._all_reached:  # torch.cat copies it, so the cached vector itself is never reduced
            self._all_reached[key] = torch.ones(len(reached), dtype=torch.float32, device=device)
        return self._all_reached[key]


class _TFReducer(_Reducer):
    """The TF ``grad_reducer``: gradients as TF tensors in and out (see the module docstring for the math).

    :meth:`reduce_numpy` and :meth:`sum_numpy` are the same reductions on numpy arrays; fe_ray's TF step calls them
    directly from its graph (``fe_ray.backend.tf_step.graph_safe_reducer``), without converting each gradient to an
    eager tensor and back.
    """

    def reduce_numpy(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """All-reduce ``arrays`` (one step's gradients, in the same order on every rank) into their weighted mean."""
        return self._reduce(arrays, prescaled=False)

    def sum_numpy(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """All-reduce the gradients of a loss already weighted by :meth:`loss_share` into their sum."""
        return self._reduce(arrays, prescaled=True)

    def _reduce(self, arrays: tuple[np.ndarray, ...], prescaled: bool) -> list[np.ndarray]:
        multiply, divide = self._factors(prescaled)
        scaled = [np.asarray(a, np.float32) * np.float32(multiply) for a in arrays]
        summed = self._collective.allreduce_sum(scaled)
        return [(s / np.float32(divide)).astype(a.dtype, copy=False) for s, a in zip(summed, arrays)]

    def __call__(self, model: Any, gradients: list[Any], prescaled: bool = False) -> list[Any]:
        import tensorflow as tf

        present = [pos for pos, grad in enumerate(gradients) if grad is not None]
        if not present:
            return list(gradients)
        tensors = [tf.convert_to_tensor(gradients[pos]) for pos in present]  # IndexedSlices -> dense
        out = list(gradients)
        if tf.executing_eagerly():  # e.g. in eager mode, or inside a numpy_function of fe_ray's TF step
            for pos, value in zip(present, self._reduce(tuple(t.numpy() for t in tensors), prescaled)):
                out[pos] = tf.convert_to_tensor(value)
            return out
        reduced = tf.numpy_function(self.sum_numpy if prescaled else self.reduce_numpy, tensors,
                                    Tout=[t.dtype for t in tensors], stateful=True, name="fe_ray_allreduce")
        for pos, tensor, value in zip(present, tensors, reduced):
            value.set_shape(tensor.shape)  # numpy_function loses static shapes; optimizers need them
            out[pos] = value
        return out


__all__ = ["GradReducer", "StepWeights", "make_grad_reducer"]
