"""Estimator warmup visits every combination of scheduled ops, including ones that first appear late in the run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import NumpyDataset
from fe_ray.network import BaseNetwork
from fe_ray.op.numpyop.numpyop import LambdaOp
from fe_ray.op.tensorop.loss import CrossEntropy
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from fe_ray.schedule import EpochScheduler, RepeatScheduler
from tests.estimator_helpers import model_weights


def _estimator(epochs: int) -> tuple[fe.Estimator, Any]:
    """Key "y2" exists only in even epochs (RepeatScheduler) and is needed from epoch 4 on (EpochScheduler).

    Each schedule alone changes at epochs 1, 2 and 4, all of which are fine; only their combination at epoch 5
    (odd, so no "y2", but the loss already wants it) is broken.
    """
    import torch

    rng = np.random.default_rng(0)
    data = NumpyDataset({"x": rng.random((8, 4), dtype=np.float32), "y": rng.integers(0, 2, 8)})
    pipeline = fe.Pipeline(train_data=data, batch_size=4,
                           ops=[RepeatScheduler([None, LambdaOp(fn=lambda y: y, inputs="y", outputs="y2")])])
    torch.manual_seed(0)
    model = fe.build(lambda: torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Softmax(dim=-1)), "adam")
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="p"),
                              EpochScheduler({1: CrossEntropy(inputs=("p", "y"), outputs="ce"),
                                              4: CrossEntropy(inputs=("p", "y2"), outputs="ce")}),
                              UpdateOp(model=model, loss_name="ce")])
    return fe.Estimator(pipeline=pipeline, network=network, epochs=epochs, log_steps=None), model


@pytest.fixture
def warmed_epochs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the epoch of every warmup step the Estimator runs on the network."""
    epochs: list[int] = []
    original = BaseNetwork.__call__

    def spy(self: BaseNetwork, mode: str, epoch: int, *args: Any, **kwargs: Any) -> BaseNetwork:
        if kwargs.get("warmup"):
            epochs.append(epoch)
        return original(self, mode, epoch, *args, **kwargs)

    monkeypatch.setattr(BaseNetwork, "__call__", spy)
    return epochs


def test_warmup_reports_key_missing_only_in_a_combined_schedule_epoch(warmed_epochs: list[int]) -> None:
    estimator, model = _estimator(epochs=6)
    before = model_weights(model)
    with pytest.raises(KeyError, match=r"Key 'y2'.*\(warm-up of mode 'train', epoch 5\)"):
        estimator.fit()
    # The failure came from the warmup of epoch 5, before any training epoch ran or any weight moved.
    assert warmed_epochs == [1, 2, 4, 5]
    assert estimator.system.epoch_idx == 0
    for old, new in zip(before, model_weights(model)):
        np.testing.assert_array_equal(old, new)


def test_warmup_passes_when_every_combination_has_its_keys(warmed_epochs: list[int]) -> None:
    estimator, _ = _estimator(epochs=4)  # epoch 5's broken combination is never reached
    summary = estimator.fit()
    assert warmed_epochs == [1, 2, 4]
    assert summary.history["train"]["epoch"][max(summary.history["train"]["epoch"])] == 4
