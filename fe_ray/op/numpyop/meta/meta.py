"""What the NumpyOp meta ops (Sometimes, OneOf) share: checking the ops they wrap (their state and Sometimes' keys
are handled as for TensorOps, in :mod:`fe_ray.op.meta_common`)."""

from __future__ import annotations

from typing import Any

from fe_ray.op.numpyop.numpyop import Delete, NumpyOp


def check_wrapped(op: Any, meta: str) -> NumpyOp:
    """Return ``op`` if a meta op can run it, else raise TypeError saying what it accepts."""
    if not isinstance(op, NumpyOp):
        raise TypeError(f"{meta} wraps NumpyOps, got {type(op).__name__}; TensorOps belong in Network(ops=...).")
    if isinstance(op, Delete):
        raise TypeError(f"{meta} cannot wrap Delete (the Pipeline removes its keys itself, never calling forward); "
                        "delete the keys with an unconditional Delete op instead.")
    return op

