"""Package attributes loaded on first access (PEP 562 ``__getattr__``): subpackages and classes whose modules pull
in heavy or optional dependencies (torch, TensorFlow, Ray, matplotlib) are imported only when a program uses them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, targets: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for attributes loaded on first access.

    Args:
        package: The package's ``__name__``.
        targets: Attribute -> what it is: ``"module.path"`` (the module itself, e.g. a subpackage) or
            ``"module.path:name"`` (an attribute of that module). Each is stored in the package once loaded, so
            later look-ups skip the hook.

    Use: ``__getattr__, __dir__ = lazy_attributes(__name__, {"pytorch": "fe_ray.layers.pytorch"})``.
    """

    def __getattr__(name: str) -> Any:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = target.partition(":")
        value = importlib.import_module(module_name)
        if attribute:
            value = getattr(value, attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *targets})

    return __getattr__, __dir__
