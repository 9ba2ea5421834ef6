"""Comparing nested training states (dicts / lists / tuples of arrays and scalars) in tests."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_same_state(a: Any, b: Any) -> None:
    """Assert two nested states have the same structure and exactly equal leaves."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same_state(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_state(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
