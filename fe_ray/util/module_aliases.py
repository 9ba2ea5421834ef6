"""FastEstimator's one-module-per-op import paths, served by fe_ray's grouped modules.

FastEstimator keeps each NumpyOp in a module of its own (``fastestimator.op.numpyop.univariate.expand_dims``); fe_ray
groups related ops into fewer modules (``ExpandDims`` lives in ``univariate/basic.py``). Programs written against the
long paths (``from fastestimator.op.numpyop.univariate.expand_dims import ExpandDims``) keep working once
``fastestimator`` is replaced by ``fe_ray``: each such path is registered as a small module holding the op's class.

Only the names listed are registered, so a misspelled path still raises ``ModuleNotFoundError``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import ModuleType


def register_module_aliases(package: str, aliases: Mapping[str, str]) -> None:
    """Register ``package.<module>`` for each ``{module: class name}`` of ``aliases``, holding that class.

    The class is read from ``package`` itself (which must be imported, with the class among its attributes), so
    ``package.<module>.<Class> is package.<Class>``. A module name that is already a submodule or attribute of
    ``package`` is left alone: fe_ray's own module of that name wins.

    Args:
        package: The dotted name of an imported package, e.g. ``"fe_ray.op.numpyop.univariate"``.
        aliases: FastEstimator's module name (the last part of its path) -> the name of the class it defines.

    Raises:
        AttributeError: If ``package`` lacks a class named in ``aliases`` (an internal error in the table).
    """
    parent = sys.modules[package]
    for module_name, class_name in aliases.items():
        full_name = f"{package}.{module_name}"
        if full_name in sys.modules or hasattr(parent, module_name):
            continue
        cls = getattr(parent, class_name)
        module = ModuleType(full_name, f"FastEstimator's module path for ``{class_name}`` ({package}).")
        setattr(module, class_name, cls)
        module.__all__ = [class_name]
        sys.modules[full_name] = module
        # As an attribute too: ``fe.op.numpyop.univariate.expand_dims.ExpandDims`` works as in FastEstimator.
        setattr(parent, module_name, module)


__all__ = ["register_module_aliases"]
