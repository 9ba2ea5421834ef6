"""enable_deterministic seeds every generator reproducibly."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend.determinism import enable_deterministic  # noqa: E402


def draw() -> tuple[float, float, float, float]:
    import tensorflow as tf
    import torch

    return random.random(), float(np.random.rand()), float(torch.rand(1)), float(tf.random.uniform(()))


def test_same_seed_same_numbers() -> None:
    import torch

    enable_deterministic(7)
    first = draw()
    enable_deterministic(7)
    assert draw() == first
    assert torch.are_deterministic_algorithms_enabled()


def test_seed_must_be_int() -> None:
    with pytest.raises(TypeError, match="int seed"):
        enable_deterministic("7")  # type: ignore[arg-type]
