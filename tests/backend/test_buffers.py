"""get_buffers / set_buffers: the state outside gradients (BatchNorm statistics) copied between model copies."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend import get_backend  # noqa: E402


def test_torch_buffers_round_trip_only_the_running_statistics() -> None:
    torch = pytest.importorskip("torch")
    backend = get_backend("torch")
    first, second = (torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)) for _ in range(2))
    first.train()
    first(torch.randn(8, 3) * 5)  # moves first's running statistics
    weights = second[0].weight.detach().clone()
    buffers = backend.get_buffers(first)
    assert sorted(buffers) == ["1.num_batches_tracked", "1.running_mean", "1.running_var"]
    backend.set_buffers(second, buffers)
    assert torch.equal(second[1].running_mean, first[1].running_mean)
    assert torch.equal(second[1].running_var, first[1].running_var)
    assert torch.equal(second[0].weight, weights)  # weights are not buffers: untouched
    buffers["1.running_mean"][:] = 0  # a copy, not a view of first's statistics
    assert not torch.equal(first[1].running_mean, torch.zeros(4))
    with pytest.raises(ValueError, match="different architecture"):
        backend.set_buffers(torch.nn.Linear(3, 4), buffers)


def test_tf_buffers_round_trip_the_moving_statistics() -> None:
    pytest.importorskip("tensorflow")
    import keras

    backend = get_backend("tf")

    def model() -> keras.Model:
        inputs = keras.Input((3,))
        return keras.Model(inputs, keras.layers.BatchNormalization()(keras.layers.Dense(4)(inputs)))

    first, second = model(), model()
    first(np.random.default_rng(0).normal(5, 2, (8, 3)).astype("float32"), training=True)
    buffers = backend.get_buffers(first)
    assert len(buffers) == 2  # moving mean and variance
    kernel = np.array(second.weights[0])
    backend.set_buffers(second, buffers)
    for mine, theirs in zip(second.non_trainable_weights, first.non_trainable_weights):
        np.testing.assert_array_equal(np.array(mine), np.array(theirs))
    np.testing.assert_array_equal(np.array(second.weights[0]), kernel)
    with pytest.raises(ValueError, match="different architecture"):
        backend.set_buffers(second, buffers[:1])
