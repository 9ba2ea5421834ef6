"""FastEstimator's module path ``fastestimator.util.cli_util``: ``parse_string_to_python``, which turns a command
line string into the Python value it spells (the ``fastestimator train --hyperparameters`` parser)."""

from __future__ import annotations

from fe_ray.util.text import parse_string_to_python

__all__ = ["parse_string_to_python"]
