"""What a Network's ops use: their models, and so which framework (torch or TF) runs them, and the keys they read
and write (and the check that a batch holds the keys they read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fe_ray.backend import get_framework
from fe_ray.op.numpyop.numpyop import Delete as NumpyDelete
from fe_ray.op.tensorop.tensorop import Delete as TensorDelete
from fe_ray.schedule import get_current_items
from fe_ray.util import drop_nones, to_list

OpsArg = Any  # TensorOp | Scheduler[TensorOp] | Sequence of them (kept loose for FastEstimator compatibility)


def collect_models(ops: Sequence[Any]) -> list[Any]:
    """Models used by ``ops`` (scheduled ones included), in first-use order, without duplicates."""
    return unique_by_identity([model for op in get_current_items(ops) for model in _models_of(op)])


def _models_of(op: Any) -> list[Any]:
    getter = getattr(op, "get_fe_models", None)
    return list(getter()) if getter is not None else []


def unique_by_identity(items: Iterable[Any]) -> list[Any]:
    """``items`` without repeats of the same object, in first-seen order (models need not be hashable)."""
    seen: set[int] = set()
    out = []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


def detect_framework(ops: OpsArg) -> str:
    """The framework ('torch' or 'tf') of the models in ``ops``.

    Raises:
        ValueError: If models of both frameworks are mixed, a model is of an unknown type, or two models share a
            name (case-insensitively).
    """
    models = collect_models(drop_nones(to_list(ops)))
    by_framework: dict[str, list[str]] = {}
    for model in models:
        by_framework.setdefault(get_framework(model), []).append(getattr(model, "model_name", type(model).__name__))
    if "np" in by_framework:
        raise ValueError(f"Models {by_framework['np']} are neither torch nn.Modules nor Keras Models.")
    if len(by_framework) > 1:
        raise ValueError(f"A Network cannot mix frameworks: torch models {by_framework.get('torch')} and TensorFlow "
                         f"models {by_framework.get('tf')}. Use one framework per Network.")
    names = [str(getattr(m, "model_name", "")).lower() for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"All models in a Network need unique names (case-insensitive); duplicated: {duplicates}. "
                         "Pass model_name=... to fe_ray.build.")
    if by_framework:
        return next(iter(by_framework))
    return _default_framework()


def _default_framework() -> str:
    import importlib.util

    # FastEstimator defaults to TensorFlow for model-free networks; fall back to torch where TF is absent.
    return "tf" if importlib.util.find_spec("tensorflow") is not None else "torch"


def io_keys(ops: Sequence[Any], pops: Sequence[Any], slicers: Sequence[Any], desired_keys: set[str] | None = None,
            where: str = "") -> tuple[set[str], set[str], set[str]]:
    """Return (inputs the network needs, inputs the TensorOps need, outputs it returns) for one context's items.

    Args:
        ops: The context's TensorOps, in order.
        pops: The context's post-processing NumpyOps, in order.
        slicers: The context's slicers.
        desired_keys: The outputs wanted (by traces); None or empty for every output.
        where: The context, for the error (``{'mode': ..., 'epoch': ..., 'ds_id': ...}``).

    Raises:
        ValueError: If slicers are active and a wanted output key is sliced but never un-sliced.
    """
    needed: set[str] = set()
    tensor_inputs: set[str] = set()
    produced: set[str] = set()
    sliced: set[str] = set()
    unsliced: set[str] = set()
    for slicer in slicers:
        sliced.update(slicer.slice_inputs)
        unsliced.update(slicer.unslice_inputs)
    needed.update(sliced)
    for op in ops:
        unmet = {key for key in op.inputs if key not in produced}
        needed |= unmet
        tensor_inputs |= unmet
        produced.update(op.outputs)
        if isinstance(op, TensorDelete):
            produced.difference_update(op.inputs)
    needed |= unsliced - produced
    pop_inputs: set[str] = set()
    pop_produced: set[str] = set()
    for op in pops:
        needed |= {key for key in op.inputs if key not in produced}
        pop_inputs |= {key for key in op.inputs if key not in pop_produced}
        produced.update(op.outputs)
        pop_produced.update(op.outputs)
        if isinstance(op, NumpyDelete):
            produced.difference_update(op.inputs)
            pop_produced.difference_update(op.inputs)
    # The keys the pops read leave the ops' step even when a pop deletes them later (numpy Delete).
    outputs = set(produced) | pop_inputs
    if desired_keys:
        # Keys the pops read must survive even if no trace asked for them, and so must the keys slicers un-slice
        # (each minibatch must hold them, as FastEstimator's keep every op output).
        outputs = (outputs & set(desired_keys)) | pop_inputs | (unsliced & produced)
    if sliced:
        dangling = (outputs & (sliced | produced)) - unsliced
        if dangling:
            raise ValueError("Since you are using Slicers, you must specify how these keys are un-sliced during "
                             f"{where}: {sorted(dangling)}. "
                             "Add them to a slicer's `unslice` argument.")
    return needed, tensor_inputs, outputs


__all__ = ["OpsArg", "collect_models", "detect_framework", "io_keys", "unique_by_identity"]


def check_batch(batch: Mapping[str, Any], needed: set[str], ops: Sequence[Any], mode: str) -> None:
    """Check that ``batch`` holds every key in ``needed`` (the keys ``ops`` read).

    The arrays need not share a batch size: as in FastEstimator, a batch may carry per-batch constants (a class
    weight vector, say) next to its per-sample arrays, and a distributed run hands such arrays whole to every replica.

    Raises:
        KeyError: Naming the first missing key, the op that needs it and the keys the batch has.
    """
    missing = needed - set(batch)
    if missing:
        key = sorted(missing)[0]
        needing = [type(op).__name__ for op in ops if key in op.inputs]
        raise KeyError(f"Key {key!r} needed by {needing[0] if needing else 'an op'} is missing from the batch in "
                       f"mode {mode!r}; available keys: {sorted(batch)}. Produce it in the Pipeline or an earlier "
                       "op.")
