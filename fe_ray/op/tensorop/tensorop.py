"""TensorOps: ops that run inside a Network on framework tensors (torch or TF)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fe_ray.op.op import Op, get_inputs_by_op, write_outputs_by_op


class TensorOp(Op):
    """An op executed by a Network on batched framework tensors.

    Subclasses that own models or compute gradients override the ``get_fe_*`` hooks so the Network can find
    models, loss keys and gradient ops without knowing the concrete op types.
    """

    def build(self, framework: str, device: Any = None) -> None:
        """Prepare framework-specific state once the Network knows its framework ('torch' or 'tf') and device."""

    def get_fe_models(self) -> set[Any]:
        """Models this op uses (ModelOp, UpdateOp)."""
        return set()

    def get_fe_loss_keys(self) -> set[str]:
        """Keys this op treats as losses (UpdateOp)."""
        return set()

    def fe_retain_graph(self, retain: bool | None = None) -> bool | None:
        """For gradient ops: set/return whether the autograd graph must be kept. None for other ops."""
        return None


class LambdaOp(TensorOp):
    """A TensorOp running an arbitrary function ``fn(*inputs)`` on tensors.

    Args:
        fn: The function; it receives one positional argument per input key.
        inputs: Input key(s); None for an op that reads nothing.
        outputs: Output key(s).
        mode: Mode(s) in which to run.
        ds_id: Dataset id(s) in which to run.
    """

    def __init__(self, fn: Callable[..., Any], inputs: None | str | Iterable[str] = None,
                 outputs: None | str | Iterable[str] = None, mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        if not callable(fn):
            raise TypeError(f"LambdaOp needs a callable fn, got {type(fn).__name__}.")
        self.fn = fn
        self.in_list = True

    def forward(self, data: list[Any], state: dict[str, Any]) -> Any:
        return self.fn(*data)


class Delete(TensorOp):
    """Remove key(s) from the batch inside the Network: later ops cannot read them and the step does not return them
    (FastEstimator's ``fe.op.tensorop.Delete``), e.g. to drop a large intermediate before outputs leave the device.

    Args:
        keys: The key(s) to remove; they must be in the batch when the op runs.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.
    """

    def __init__(self, keys: str | Iterable[str], mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(inputs=keys, mode=mode, ds_id=ds_id)

    def forward(self, data: Any, state: dict[str, Any]) -> None:
        return None


def check_one_output_each(op: TensorOp, name: str) -> None:
    """Raise a ValueError unless ``op`` has at least one input key and as many output keys as input keys."""
    if not op.inputs or len(op.outputs) != len(op.inputs):
        raise ValueError(f"{name} writes one output per input: got inputs={op.inputs} and outputs={op.outputs}; give "
                         "as many output keys as input keys.")


def run_ops(ops: list[TensorOp], batch: dict[str, Any], state: dict[str, Any], end_step: bool = True) -> None:
    """Run ``ops`` in order on ``batch`` (in place), then apply the updates UpdateOps deferred to step end.

    Framework-neutral: the torch and TF backends call this inside their own grad / graph contexts.

    Args:
        ops: The ops to run.
        batch: The step's data, read and written in place.
        state: The context state.
        end_step: Whether these ops end the step. False runs only the ops and leaves the deferred updates for a
            later call with the step's remaining ops (a step run in two parts, see the torch backend's
            ``start_step``).
    """
    for op in ops:
        data = get_inputs_by_op(op, batch)
        data = op.forward(data, state)
        if isinstance(op, Delete):
            for key in op.inputs:
                del batch[key]
        elif op.outputs:
            write_outputs_by_op(op, batch, data)
    if not end_step:
        return
    deferred = state.get("deferred", {})
    for fn_list in deferred.values():
        for fn in fn_list:
            fn()
    deferred.clear()
