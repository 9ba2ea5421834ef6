"""Helpers shared by the tests that run ``fe.backend`` functions on torch, TF and numpy inputs (test_tensor_ops,
test_tensor_math, test_tensor_layout, test_backend_losses): building inputs, reading results back as numpy, and the
checks every helper family repeats (unsupported input types, numpy use importing neither framework)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

FRAMEWORKS = ["torch", "tf", "np"]
ROOT = Path(__file__).resolve().parents[2]
CUBE = [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
KINDS: dict[str, Any] = {"torch": torch.Tensor, "tf": tf.Tensor, "np": (np.ndarray, np.generic)}
# Inputs no fe.backend helper accepts, with their test ids; add more (e.g. a dict) with ``+``.
UNSUPPORTED_VALUES: list[Any] = [[1.0, 2.0], 3.0, "text", torch.nn.Linear(1, 1)]
UNSUPPORTED_IDS = ["list", "float", "str", "module"]


def make(framework: str, values: Any, dtype: str | None = None) -> Any:
    """``values`` as a tensor of ``framework`` ("torch", "tf" or "np"), of ``dtype`` when given."""
    array = np.asarray(values, dtype=dtype)
    if framework == "torch":
        return torch.tensor(array)
    if framework == "tf":
        return tf.constant(array)
    return array


def to_numpy(result: Any, framework: str) -> np.ndarray:
    """The values of ``result``, which must be a tensor of ``framework`` (torch tensors may require grad)."""
    assert isinstance(result, KINDS[framework]), type(result)
    if framework == "torch":
        return np.asarray(result.detach().numpy())
    return np.asarray(result.numpy() if framework == "tf" else result)


def check(result: Any, framework: str, expected: Any, dtype: str | None = None, rtol: float = 0.0,
          atol: float = 0.0) -> None:
    """``result`` is a tensor of ``framework`` holding ``expected`` (same shape; ``dtype`` when given): exactly,
    unless a tolerance is given."""
    got = to_numpy(result, framework)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), got.dtype
    if rtol or atol:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, expected)


def assert_unsupported_type_error(name: str, call: Callable[[Any], Any], value: Any) -> None:
    """``call(value)`` raises fe.backend's TypeError naming the helper ``name``, the type and the supported ones."""
    with pytest.raises(TypeError, match=rf"^{name}: .* unsupported type .*{type(value).__name__}.*; supported types "
                                        r"are torch\.Tensor, tf\.Tensor / tf\.Variable, np\.ndarray"):
        call(value)


def assert_numpy_use_imports_neither_framework(code: str) -> None:
    """Run ``code`` (after ``import sys, numpy as np, fe_ray as fe``) in a fresh interpreter; it must leave torch
    and tensorflow unimported."""
    program = ("import sys, numpy as np, fe_ray as fe\n" + code +
               "print(sorted({'torch', 'tensorflow'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"
