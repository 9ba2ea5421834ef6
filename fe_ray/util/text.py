"""String helpers of FastEstimator's ``fe.util``: metric-name prettifying, prefix / suffix stripping, number and
literal parsing."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

# A lower-case letter directly followed by an upper-case one: the boundary of two camelCase words.
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])")


def prettify_metric_name(metric: str) -> str:
    """Turn a metric key into a title: camelCase words and ``_`` become separate, capitalised words.

    ``prettify_metric_name("myUgly_loss")`` is ``"My Ugly Loss"``; runs of spaces collapse to one.

    Args:
        metric: The key to format.

    Returns:
        The formatted name.

    Raises:
        TypeError: If ``metric`` is not a str.
    """
    if not isinstance(metric, str):
        raise TypeError(f"prettify_metric_name needs a str, got {type(metric).__name__} {metric!r}.")
    words = _CAMEL_BOUNDARY.sub(" ", metric).replace("_", " ").split()
    # capitalize(), not title(): only the first letter of each word is raised, the rest lowered ("ROC" -> "Roc"),
    # which is what FastEstimator prints.
    return " ".join(word.capitalize() for word in words)


def strip_suffix(target: str | None, suffix: str | None) -> str | None:
    """Return ``target`` without ``suffix`` at its end (unchanged if it does not end with it).

    ``strip_suffix("astring.json", ".json")`` is ``"astring"``; a None ``target`` or ``suffix`` returns ``target``
    as it is, and so does an empty ``suffix``.
    """
    if target is None or not suffix:
        return target
    return target[:-len(suffix)] if target.endswith(suffix) else target


def strip_prefix(target: str | None, prefix: str | None) -> str | None:
    """Return ``target`` without ``prefix`` at its start (unchanged if it does not start with it).

    ``strip_prefix("astring.json", "ast")`` is ``"ring.json"``; a None ``target`` or ``prefix`` returns ``target``
    as it is.
    """
    if target is None or not prefix:
        return target
    return target[len(prefix):] if target.startswith(prefix) else target


def is_number(arg: Any) -> bool:
    """Whether ``float(arg)`` succeeds: ``"13.7"``, ``"1e-3"``, ``"nan"``, ``7`` are numbers; ``"ae13.7"`` and
    ``None`` are not."""
    try:
        float(arg)
    except (TypeError, ValueError):
        return False
    return True


def parse_string_to_python(val: str | None) -> Any:
    """Read a command-line value as the Python object it spells, else keep it as a string.

    ``"5"`` gives ``5``, ``"[5, 4, 0.3]"`` a list, ``"{'a': 5}"`` a dict (Python literals first), ``'{"a": true}'``
    a dict through JSON (``true``/``false``/``null``), and anything else (``"adam"``, a path) the string itself.
    None and ``""`` give ``""``.
    """
    if not val:
        return ""
    try:
        return ast.literal_eval(val)
    except (ValueError, SyntaxError, MemoryError, RecursionError):  # not a Python literal: try JSON next
        pass
    try:
        return json.loads(val)
    except (json.JSONDecodeError, RecursionError):
        return val
