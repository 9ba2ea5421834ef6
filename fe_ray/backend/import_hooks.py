"""Run a callback as soon as a module is imported, by whoever imports it, without importing it ourselves.

:func:`fe_ray.enable_deterministic` seeds torch and TensorFlow. Importing a framework only to seed it would make
every torch program load TensorFlow too (seconds of start-up and hundreds of MB per process, plus a second set of
OpenMP/oneDNN thread pools), so the seeding of a framework that is installed but not yet imported waits here until
the program imports it, and then runs before any of the program's code can draw from it.

The hook is a :data:`sys.meta_path` finder consulted only for the module names that have callbacks waiting. It
finds the real spec with the other finders and wraps the loader's ``exec_module``; once the module has run, the
module's ``__loader__`` and ``__spec__.loader`` are put back to the real loader (tools that inspect a module's
loader see the one that loaded it) and the callbacks run. With nothing waiting, the finder leaves ``sys.meta_path``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import random
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]

_lock = threading.Lock()
#: module name -> {key: callback}; a later callback with the same key replaces the earlier one.
_pending: dict[str, dict[str, Callback]] = {}
#: Modules whose import must not move Python's and numpy's global generators.
_keep_random: set[str] = set()


def when_imported(name: str, key: str, callback: Callback, keep_global_random: bool = False) -> bool:
    """Call ``callback(module)`` now if ``name`` is imported, else right after its first import.

    Args:
        name: A top-level module name, e.g. ``"torch"``.
        key: Identifies the callback: registering another one under the same key replaces it (e.g. a second
            ``enable_deterministic`` before the framework is imported keeps only the latest seed).
        callback: Called with the module. An exception it raises at import time is turned into a RuntimeWarning,
            so the program's import itself never fails because of it.
        keep_global_random: Make that import leave Python's and numpy's global generators as they were (importing
            TensorFlow draws from Python's): a seeded program then draws the same numbers whether it imported the
            module before or after seeding.

    Returns:
        True if the callback ran now, False if it waits for the import.

    Raises:
        ValueError: If ``name`` is a submodule (only top-level imports are watched).
    """
    if "." in name:
        raise ValueError(f"when_imported watches top-level modules only, got {name!r}; pass {name.split('.')[0]!r}.")
    module = sys.modules.get(name)
    if module is not None:
        with _lock:
            _pending.get(name, {}).pop(key, None)
        callback(module)
        return True
    with _lock:
        _pending.setdefault(name, {})[key] = callback
        if keep_global_random:
            _keep_random.add(name)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    return False


def pending(name: str) -> list[str]:
    """The keys of the callbacks waiting for ``name``'s import (empty once it was imported)."""
    with _lock:
        return sorted(_pending.get(name, {}))


def cancel(name: str, key: str) -> None:
    """Drop the callback registered for ``name`` under ``key``, if it is still waiting."""
    with _lock:
        _pending.get(name, {}).pop(key, None)
        _drop_empty(name)


def _drop_empty(name: str) -> None:
    """Forget ``name`` without callbacks, and leave sys.meta_path when nothing waits (caller holds _lock)."""
    if not _pending.get(name):
        _pending.pop(name, None)
        _keep_random.discard(name)
    if not _pending and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds the watched modules with the other finders and hands their specs a loader that runs the callbacks."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _pending:
            return None
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None  # a namespace package or a legacy loader: imported as usual, without the callbacks
            spec.loader = _CallbackLoader(spec.loader, fullname)
            return spec
        return None


class _CallbackLoader(importlib.abc.Loader):
    """Runs the real loader, restores it on the module, then runs (and forgets) the module's callbacks."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        restore = _random_snapshot() if self._name in _keep_random else None
        try:
            self._loader.exec_module(module)
        finally:
            module.__loader__ = self._loader
            if module.__spec__ is not None:
                module.__spec__.loader = self._loader
            if restore is not None:
                restore()
        # Only after a successful import: a failed one leaves the callbacks waiting for the next attempt.
        with _lock:
            callbacks = _pending.pop(self._name, {})
            _drop_empty(self._name)
        for key, callback in callbacks.items():
            try:
                callback(module)
            except Exception as err:  # noqa: BLE001 - the user's import must not fail because of it
                warnings.warn(f"fe_ray: {key!r}, run when {self._name!r} was imported, failed: "
                              f"{type(err).__name__}: {err}", RuntimeWarning, stacklevel=2)

    def __getattr__(self, attr: str) -> Any:
        # Optional loader protocols (get_resource_reader, is_package, get_code, ...) during the module's own run.
        if attr == "_loader":  # not set yet (e.g. an instance made without __init__): no recursion
            raise AttributeError(attr)
        return getattr(self._loader, attr)


def _random_snapshot() -> Callable[[], None]:
    """A function that puts Python's and (if imported) numpy's global generators back to their present state."""
    python_state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None

    def restore() -> None:
        random.setstate(python_state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)

    return restore


_FINDER = _PostImportFinder()

__all__ = ["cancel", "pending", "when_imported"]
