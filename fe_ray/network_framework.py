"""Which models a Network's ops use, and so which framework (torch or TF) runs them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fe_ray.backend import get_framework
from fe_ray.schedule import get_current_items
from fe_ray.util import filter_nones, to_list

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
    models = collect_models(filter_nones(to_list(ops)))
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


__all__ = ["OpsArg", "collect_models", "detect_framework", "unique_by_identity"]
