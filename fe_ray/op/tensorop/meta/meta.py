"""What the TensorOp meta ops share: checking and running the ops they wrap, passing on their state, and a
checkpointable random stream for the ops that choose at random (Sometimes, OneOf)."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

import numpy as np

from fe_ray.op.meta_common import load_wrapped_state, wrapped_state
from fe_ray.op.op import get_inputs_by_op, write_outputs_by_op
from fe_ray.op.tensorop.tensorop import TensorOp


def check_wrapped(op: Any, meta: str) -> TensorOp:
    """Return ``op`` if a meta op can run it, else raise a TypeError saying what it accepts."""
    if not isinstance(op, TensorOp):
        hint = " NumpyOps have their own meta ops in fe_ray.op.numpyop.meta." if hasattr(op, "forward_batch") else ""
        raise TypeError(f"{meta} wraps TensorOps, got {type(op).__name__}.{hint}")
    return op


def check_shared(ops: Sequence[TensorOp], attrs: Sequence[str], meta: str) -> None:
    """Raise a ValueError unless all ``ops`` agree with the first on each of ``attrs`` (e.g. mode and ds_id)."""
    first = ops[0]
    for pos, op in enumerate(ops[1:], start=1):
        for attr in attrs:
            if getattr(op, attr) != getattr(first, attr):
                raise ValueError(f"All ops of a {meta} must share {attr}: op #0 ({type(first).__name__}) has "
                                 f"{getattr(first, attr)!r} but op #{pos} ({type(op).__name__}) has "
                                 f"{getattr(op, attr)!r}.")


def forward_ops(ops: Sequence[TensorOp], store: MutableMapping[str, Any], state: dict[str, Any]) -> None:
    """Run ``ops`` in order on ``store`` (in place).

    Unlike :func:`fe_ray.op.tensorop.tensorop.run_ops` the updates UpdateOps defer are left in ``state`` for the end
    of the whole step, where the Network applies them.
    """
    for op in ops:
        data = op.forward(get_inputs_by_op(op, store), state)
        if op.outputs:
            write_outputs_by_op(op, store, data)


class SingleOpMeta(TensorOp):
    """A meta op wrapping one TensorOp, ``self.op``: the Network's questions about the models it uses, its loss keys
    and keeping the autograd graph are answered by the wrapped op."""

    op: TensorOp

    def get_fe_models(self) -> set[Any]:
        return self.op.get_fe_models()

    def get_fe_loss_keys(self) -> set[str]:
        return self.op.get_fe_loss_keys()

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        return self.op.fe_retain_graph(retain)


def random_meta_state(ops: Sequence[TensorOp], stream: RandomStream) -> dict[str, Any]:
    """The state of a meta op choosing at random: its stream's position (under 'rng') and the wrapped ops' states
    (under 'ops', if any)."""
    state = wrapped_state(ops)
    rng = stream.state()
    if rng is not None:
        state["rng"] = rng
    return state


def load_random_meta_state(ops: Sequence[TensorOp], stream: RandomStream, state: dict[str, Any], meta: str) -> None:
    """Restore :func:`random_meta_state` into ``ops`` and ``stream``.

    Raises:
        ValueError: If the state holds unknown keys or another number of wrapped ops.
    """
    load_wrapped_state(ops, state, meta, valid=("ops", "rng"))
    if "rng" in state:
        stream.load_state(state["rng"])


class RandomStream:
    """A private uniform [0, 1) random stream of one meta op, in the framework of its Network.

    The seed is drawn from numpy's global generator when the op is created, so ``fe.enable_deterministic`` (which
    seeds numpy) makes the choices repeat from run to run, and no other stream (model initialisation, the
    frameworks' global generators) is consumed or shifted by the op. The generator (a CPU ``torch.Generator``, or a
    ``tf.random.Generator``, whose state is a variable, so a traced TF step advances it) carries its position in
    :meth:`state`, so a resumed run continues with the draws the uninterrupted one would have made. Copies (Ray
    replicas) start from the position of the original when it was copied, so every replica makes the same choice
    for its slice of a batch, as one in-process step would for the whole batch.
    """

    def __init__(self) -> None:
        self.seed = int(np.random.randint(0, 2**31 - 1))
        self.framework: str | None = None
        self.generator: Any = None
        self._pending: np.ndarray | None = None

    def build(self, framework: str) -> None:
        """Create the generator for ``framework`` ('torch' or 'tf'); a rebuilt stream keeps its position."""
        if self.framework == framework and self.generator is not None:
            return
        if framework == "torch":
            import torch

            self.generator = torch.Generator(device="cpu")
            self.generator.manual_seed(self.seed)
        elif framework == "tf":
            import tensorflow as tf

            self.generator = tf.random.Generator.from_seed(self.seed)
        else:
            raise ValueError(f"TensorOp meta ops support frameworks 'torch' and 'tf', got {framework!r}.")
        self.framework = framework
        if self._pending is not None:
            self.load_state(self._pending)

    def uniform(self) -> Any:
        """One draw in [0, 1): a CPU torch scalar tensor, or a TF scalar (symbolic inside a traced step)."""
        if self.generator is None:
            raise ValueError("The meta op must be built (op.build(framework)) before it runs; the Network does this.")
        if self.framework == "torch":
            import torch

            return torch.rand((), generator=self.generator)
        return self.generator.uniform([])

    def state(self) -> np.ndarray | None:
        """The generator's position as a numpy array; None before :meth:`build` unless a position is waiting."""
        if self.generator is None:
            return None if self._pending is None else self._pending.copy()
        if self.framework == "torch":
            return self.generator.get_state().numpy().copy()
        return np.array(self.generator.state.numpy())

    def load_state(self, saved: np.ndarray) -> None:
        """Move the generator to a position from :meth:`state` (kept until :meth:`build` if not built yet)."""
        saved = np.asarray(saved)
        if self.generator is None:
            self._pending = saved.copy()
            return
        if self.framework == "torch":
            import torch

            current = self.generator.get_state()
            if tuple(saved.shape) != tuple(current.shape):
                raise ValueError(f"The checkpointed random state has shape {saved.shape} but a torch generator's "
                                 f"has {tuple(current.shape)}; the checkpoint is from a TF run or another op.")
            self.generator.set_state(torch.from_numpy(saved.astype(np.uint8)))
        else:
            if tuple(saved.shape) != tuple(self.generator.state.shape):
                raise ValueError(f"The checkpointed random state has shape {saved.shape} but a TF generator's has "
                                 f"{tuple(self.generator.state.shape)}; the checkpoint is from a torch run or "
                                 "another op.")
            self.generator.state.assign(saved.astype(np.int64))
        self._pending = None

    def __getstate__(self) -> dict[str, Any]:
        # A generator does not pickle (TF's is a variable); its position does, and build() restores it.
        pending = self.state() if self.generator is not None else self._pending
        return {"seed": self.seed, "framework": None, "generator": None, "_pending": pending}
