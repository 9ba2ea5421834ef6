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


def _class_defines_getstate(cls: type) -> bool:
    """Whether a class outside fe_ray defines ``__getstate__`` below the class that provides ``state_dict``."""
    getstate = _defining_class(cls, "__getstate__")
    if getstate is None or getstate is object or is_fe_ray_class(getstate):
        return False
    state_dict = _defining_class(cls, "state_dict")
    return state_dict is None or (is_fe_ray_class(state_dict) and issubclass(getstate, state_dict))


def checkpoint_getstate(obj: Any) -> dict[str, Any] | None:
    """``obj.__getstate__()``, deep-copied (a checkpoint must not change as the object goes on training), when it is
    ``obj``'s checkpoint state; else None.

    It is when a class of the user's own defines ``__getstate__`` (and not ``state_dict``) and it returns a dict
    without ``mode``, which every op, trace and slicer has: a ``__getstate__`` written for copies (every attribute but
    a lock, say) is left to pickling, as are non-dict states, and such an object keeps no checkpoint state.
    """
    state = _own_state(obj)
    return None if state is None else copy.deepcopy(state)


def uses_getstate(obj: Any) -> bool:
    """Whether ``obj``'s checkpoint state is its ``__getstate__()`` (FastEstimator's protocol) rather than its
    ``state_dict()``; such an object also travels to replicas from its attributes (see :func:`rebuild`)."""
    return _own_state(obj) is not None


def _own_state(obj: Any) -> dict[str, Any] | None:
    """:func:`checkpoint_getstate` without the copy."""
    if not _class_defines_getstate(type(obj)):
        return None
    state = obj.__getstate__()
    return state if isinstance(state, dict) and "mode" not in state else None


def setstate_from_checkpoint(obj: Any, state: dict[str, Any]) -> None:
    """Restore :func:`checkpoint_getstate`'s state: ``obj.__setstate__(state)`` if its class has that method, else
    its attributes are updated from ``state``, as FastEstimator does."""
    state = copy.deepcopy(state)  # the checkpoint's copy may be loaded again (a recovery, a second resume)
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
    else:
        obj.__dict__.update(state)


def rebuild(cls: type, attributes: dict[str, Any]) -> Any:
    """An instance of ``cls`` with ``attributes`` as its ``__dict__``, without ``__init__`` or ``__setstate__``: how
    an object whose ``__getstate__`` gives its checkpoint state only (:func:`uses_getstate`) is copied to a replica."""
    obj = cls.__new__(cls)
    obj.__dict__.update(attributes)
    return obj


__all__ = ["checkpoint_getstate", "is_fe_ray_class", "rebuild", "setstate_from_checkpoint", "uses_getstate"]
