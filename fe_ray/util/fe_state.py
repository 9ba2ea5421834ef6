"""FastEstimator's checkpoint protocol for user classes: a ``__getstate__`` of their own.

FastEstimator 1.7 saves an op's, slicer's or trace's ``__getstate__()`` in its checkpoints and restores it with
``__setstate__(state)`` (or ``__dict__.update(state)`` when the class has none). fe_ray checkpoints each object's
``state_dict()`` instead, and its own classes define ``__getstate__`` for copies only (what a replica receives).
So an object takes its checkpoint state from ``__getstate__`` exactly when a class outside fe_ray defines that
method below the class that provides ``state_dict``: a FastEstimator op, trace or slicer ported with its own
``__getstate__`` resumes as it did there, and one that defines ``state_dict`` is checkpointed through that. Python
3.11's ``object.__getstate__`` does not count.
"""

from __future__ import annotations

import copy
from typing import Any

_PACKAGE = __name__.split(".")[0]


def _defining_class(cls: type, name: str) -> type | None:
    """The first class of ``cls``'s MRO whose own namespace defines ``name``."""
    return next((klass for klass in cls.__mro__ if name in vars(klass)), None)


def is_fe_ray_class(cls: type) -> bool:
    """Whether ``cls`` is one of fe_ray's own classes (rather than the user's)."""
    return cls.__module__ == _PACKAGE or cls.__module__.startswith(_PACKAGE + ".")


def uses_getstate(obj: Any) -> bool:
    """Whether ``obj``'s checkpoint state is its ``__getstate__()`` (a user class's own, FastEstimator's protocol)
    rather than its ``state_dict()``."""
    cls = type(obj)
    getstate = _defining_class(cls, "__getstate__")
    if getstate is None or getstate is object or is_fe_ray_class(getstate):
        return False
    state_dict = _defining_class(cls, "state_dict")
    return state_dict is None or (is_fe_ray_class(state_dict) and issubclass(getstate, state_dict))


def getstate_for_checkpoint(obj: Any) -> dict[str, Any]:
    """``obj.__getstate__()``, deep-copied: a checkpoint must not change as the object goes on training.

    Raises:
        TypeError: If it is not a dict (FastEstimator restores it into the object's attributes).
    """
    state = obj.__getstate__()
    if not isinstance(state, dict):
        raise TypeError(f"{type(obj).__name__}.__getstate__() returned a {type(state).__name__}; for checkpoints it "
                        "must return a dict of the attributes to restore (or define state_dict / load_state_dict).")
    return copy.deepcopy(state)


def setstate_from_checkpoint(obj: Any, state: dict[str, Any]) -> None:
    """Restore :func:`getstate_for_checkpoint`'s state: ``obj.__setstate__(state)`` if its class has that method,
    else its attributes are updated from ``state``, as FastEstimator does."""
    state = copy.deepcopy(state)  # the checkpoint's copy may be loaded again (a recovery, a second resume)
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
    else:
        obj.__dict__.update(state)


def needs_full_pickle(obj: Any) -> bool:
    """Whether ``obj`` must be copied (to a replica) from its whole ``__dict__`` instead of its ``__getstate__``: a
    FastEstimator-style ``__getstate__`` returns the checkpoint state only, without the attributes every op has
    (``inputs``, ``outputs``), and an object rebuilt from it would lack them."""
    if not uses_getstate(obj):
        return False
    try:
        state = obj.__getstate__()
    except Exception:  # noqa: BLE001 - let the normal pickling path report it, naming the op
        return False
    return isinstance(state, dict) and not {"inputs", "outputs"} <= state.keys()


def rebuild(cls: type, attributes: dict[str, Any]) -> Any:
    """An instance of ``cls`` with ``attributes`` as its ``__dict__``, without ``__init__`` or ``__setstate__`` (the
    other end of :func:`needs_full_pickle`)."""
    obj = cls.__new__(cls)
    obj.__dict__.update(attributes)
    return obj


__all__ = ["getstate_for_checkpoint", "is_fe_ray_class", "needs_full_pickle", "rebuild", "setstate_from_checkpoint",
           "uses_getstate"]
