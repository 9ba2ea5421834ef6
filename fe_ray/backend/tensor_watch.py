"""``watch``: mark a tensor for gradient computation, under FastEstimator's name.

Nothing here imports torch or TensorFlow: a tensor of either can only exist once its framework is loaded.
"""

from __future__ import annotations

from typing import Any

from fe_ray.backend.tensor_ops import Tensor, _ops


def watch(tensor: Tensor, tape: Any = None) -> Tensor:
    """Return ``tensor`` in a form that later gradient computations can differentiate with respect to.

    torch: a tensor that already requires grad is returned as is; any other is replaced by a detached copy that
    requires grad (so the original, which may share memory with a numpy array, stays untouched). Use the returned
    tensor from then on. TF: ``tape`` (the GradientTape recording the computation) watches the tensor, which is
    returned unchanged.

    FastEstimator 1.7's ``watch`` takes torch tensors only; the optional ``tape`` extends it to TF tensors, as
    FastEstimator's earlier releases did.

    Args:
        tensor: A floating-point torch / TF tensor.
        tape: TF only: the ``tf.GradientTape`` that should watch ``tensor``.

    Raises:
        TypeError: If ``tensor`` is no torch / TF tensor, or a torch tensor of a non-floating dtype (only those can
            carry gradients).
        ValueError: If a TF tensor comes without a tape to watch it.
    """
    from fe_ray.backend import get_framework

    framework = get_framework(tensor)
    if framework == "torch":
        if tensor.requires_grad:
            return tensor
        if not (tensor.is_floating_point() or tensor.is_complex()):
            raise TypeError(f"watch: only floating-point tensors can carry gradients, got dtype {tensor.dtype}; cast "
                            "it first, e.g. fe_ray.backend.cast(tensor, 'float32').")
        return tensor.detach().requires_grad_(True)
    if framework == "tf" and _ops(tensor, "watch").is_tensor(tensor):
        if tape is None or not hasattr(tape, "watch"):
            raise ValueError("watch: a TF tensor is watched by the GradientTape that records the computation; pass "
                             "it as tape= (inside a Network op: state['tape']).")
        tape.watch(tensor)
        return tensor
    raise TypeError(f"watch: tensor has unsupported type {type(tensor).__module__}.{type(tensor).__qualname__}; "
                    "supported types are torch.Tensor and tf.Tensor (numpy arrays carry no gradients).")
