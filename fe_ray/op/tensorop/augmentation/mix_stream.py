"""The random draws of the batch-mixing ops (MixUpBatch, CutMixBatch): Beta and uniform tensors from one
checkpointable stream per op."""

from __future__ import annotations

from typing import Any

import numpy as np

from fe_ray.op.tensorop.meta.meta import RandomStream, load_random_meta_state, random_meta_state
from fe_ray.op.tensorop.tensorop import TensorOp


class MixStream:
    """Beta and uniform float32 draws from a :class:`~fe_ray.op.tensorop.meta.meta.RandomStream`.

    The stream brings what the meta ops rely on: a seed taken from numpy's global generator when the op is created
    (so ``fe.enable_deterministic`` makes runs repeat), a private generator (no other stream is consumed), its
    position in checkpoints, and copies (Ray replicas) that continue from the original's position.

    Beta draws: TF computes ``g1 / (g1 + g2)`` of two Gamma(alpha) draws with ``tf.random.stateless_gamma``, seeded
    from the stream's ``tf.random.Generator`` (a variable, so a traced step advances it). torch has no seeded Beta
    sampler, so a 63-bit seed drawn from the stream's ``torch.Generator`` seeds a numpy Generator for the draw; each
    Beta draw moves the torch stream by exactly one such seed. Either way a draw is a function of the stream's
    position alone. Draws are on the CPU; the ops move them to the data's device.
    """

    def __init__(self) -> None:
        self.stream = RandomStream()

    @property
    def framework(self) -> str | None:
        """'torch' or 'tf' once built."""
        return self.stream.framework

    def build(self, framework: str) -> None:
        """Create the generator for ``framework`` ('torch' or 'tf'); a rebuilt stream keeps its position."""
        self.stream.build(framework)

    def _generator(self) -> Any:
        if self.stream.generator is None:
            raise ValueError("The op must be built (op.build(framework)) before it runs; the Network does this.")
        return self.stream.generator

    def uniform(self, count: Any = None) -> Any:
        """Draws in [0, 1): a scalar, or a vector of ``count`` (an int; a TF scalar tensor in a traced step)."""
        generator = self._generator()
        if self.framework == "torch":
            import torch

            return torch.rand(() if count is None else (int(count),), generator=generator)
        return generator.uniform([] if count is None else [count])

    def beta(self, alpha: float, count: Any = None) -> Any:
        """Beta(alpha, alpha) draws in [0, 1]: a scalar, or a vector of ``count`` (as for :meth:`uniform`)."""
        generator = self._generator()
        if self.framework == "torch":
            import torch

            seed = int(torch.randint(0, 2**63 - 1, (), generator=generator, dtype=torch.int64))
            draws = np.random.default_rng(seed).beta(alpha, alpha, size=None if count is None else int(count))
            return torch.as_tensor(np.asarray(draws, dtype=np.float32))
        import tensorflow as tf

        seed = generator.make_seeds(1)[:, 0]
        shape = [2] if count is None else [2, count]
        gammas = tf.random.stateless_gamma(shape, seed=seed, alpha=tf.constant(alpha, tf.float32), dtype=tf.float32)
        # Both gammas underflow to 0 only for a tiny alpha; 0 then means 'no mixing' once the ops take max(l, 1 - l).
        return tf.math.divide_no_nan(gammas[0], gammas[0] + gammas[1])

    def state(self) -> np.ndarray | None:
        """The stream's position (see :meth:`RandomStream.state`)."""
        return self.stream.state()

    def load_state(self, saved: np.ndarray) -> None:
        """Move the stream to a position from :meth:`state`."""
        self.stream.load_state(saved)


class RandomMixOp(TensorOp):
    """Base of the batch-mixing ops: a :class:`MixStream` built with the op, saved in its checkpoints.

    Subclasses set ``self.mix = MixStream()`` in ``__init__``.
    """

    mix: MixStream

    def build(self, framework: str, device: Any = None) -> None:
        if framework not in ("torch", "tf"):
            raise ValueError(f"{type(self).__name__} runs in torch or TF Networks, got framework {framework!r}.")
        self.mix.build(framework)

    def state_dict(self) -> dict[str, Any]:
        """The random stream's position (under 'rng')."""
        return random_meta_state([], self.mix.stream)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys.
        """
        load_random_meta_state([], self.mix.stream, state, type(self).__name__)


def on_device_of(draws: Any, tensor: Any) -> Any:
    """torch draws (made on the CPU) moved to ``tensor``'s device; TF draws as they are."""
    from fe_ray.backend import get_framework

    if get_framework(tensor) == "torch" and draws.device != tensor.device:
        return draws.to(tensor.device)
    return draws


def check_alpha(alpha: Any, op: str) -> float:
    """``alpha`` as a float; a ValueError unless it is a number > 0."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
        raise ValueError(f"{op} alpha must be a number greater than 0 (the Beta(alpha, alpha) parameter; 1.0 draws "
                         f"uniformly), got {alpha!r}.")
    return float(alpha)


def check_outputs(op: TensorOp, name: str) -> None:
    """A ValueError unless ``op`` has at least one input and one output per input, plus (optionally) one for lambda:
    FastEstimator 1.7's form is ``inputs=("x", "y"), outputs=("x", "y")``, the mixed images and labels."""
    if not op.inputs or len(op.outputs) not in (len(op.inputs), len(op.inputs) + 1):
        raise ValueError(f"{name} writes one mixed tensor per input, then optionally lambda: with inputs={op.inputs} "
                         f"it needs {len(op.inputs)} or {len(op.inputs) + 1} output keys, got outputs={op.outputs}.")


def writes_lambda(op: TensorOp) -> bool:
    """Whether the op's last output is lambda (one output more than inputs)."""
    return len(op.outputs) == len(op.inputs) + 1


def float_weight(lam: Any, tensor: Any, key: str) -> Any:
    """``lam`` in ``tensor``'s floating dtype (float16 in mixed precision); a TypeError for non-float data."""
    from fe_ray.backend import cast, get_framework

    dtype = tensor.dtype
    floating = dtype.is_floating_point if get_framework(tensor) == "torch" else dtype.is_floating
    if not floating:
        raise TypeError(f"Mixing needs floating-point data, but key {key!r} holds {dtype}; one-hot encode labels "
                        "as floats (e.g. in the Pipeline) or cast the key to float first.")
    return lam if lam.dtype == dtype else cast(lam, tensor)  # a reference tensor: its dtype (and device)
