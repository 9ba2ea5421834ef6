"""Traces that drive models on a 2-replica network: LRScheduler's rates, BestModelSaver's final restore,
EarlyStopping's restore of the best weights and a user's trace changing the weights mid-epoch reach the replicas,
and each run matches the in-process one."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_lr  # noqa: E402
from fe_ray.backend.optimizers import scheduled_optimizers  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.trace import BestModelSaver, EarlyStopping, LRScheduler  # noqa: E402
from tests.estimator_helpers import Feed, ToyPipeline, digits_arrays, model_weights, tf_mlp  # noqa: E402


def _run(traces: Callable[[Any], list[Any]], epochs: int = 3, make_model: Callable[[], Any] = tf_mlp,
         **network_kwargs: Any) -> dict[str, Any]:
    train, evaluation = digits_arrays("tf", n_train=40, n_eval=20)
    model = make_model()
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")], **network_kwargs)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=10, test=evaluation), network, epochs=epochs,
                             traces=traces(model), log_steps=None)
    try:
        estimator.fit()
        result = {"weights": model_weights(model), "lr": get_lr(model), "epochs": estimator.system.epoch_idx,
                  "scheduled_lrs": [float(optimizer.learning_rate) for optimizer in scheduled_optimizers(model)],
                  "test_ce": estimator.test().history["test"]["ce"]}  # scored by the replicas, if any
    finally:
        if network_kwargs:
            network.shutdown()
    return result


def _assert_same_run(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert got["epochs"] == expected["epochs"]
    for mine, theirs in zip(got["weights"], expected["weights"]):  # the best epoch's weights, restored
        np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert got["test_ce"].keys() == expected["test_ce"].keys()
    np.testing.assert_allclose(list(got["test_ce"].values()), list(expected["test_ce"].values()), rtol=1e-4)


@pytest.mark.timeout(300)
def test_lr_scheduler_and_best_model_restore_on_replicas(ray_session: None, tmp_path: Any,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    def traces(directory: Any) -> Callable[[Any], list[Any]]:
        # Rates that float32 cannot hold exactly; the best epoch (2) is not the last one.
        return lambda model: [Feed([0.5, 0.9, 0.3]), LRScheduler(model, lambda step: 0.05 / step),
                              BestModelSaver(model, str(directory), metric="score", save_best_mode="max",
                                             load_best_final=True)]

    expected = _run(traces(tmp_path / "in_process"))
    with caplog.at_level(logging.INFO, logger="fe_ray.distributed"):
        got = _run(traces(tmp_path / "replicas"), num_replicas=2)
    # Every rate went through set_lr: none is reported as set behind it (and re-applied a step late).
    assert "without fe_ray.backend.set_lr" not in caplog.text
    # Rates and BestModelSaver's reads are no weight writes on the driver: no context sent the models again.
    assert "weights changed since the replicas last had them" not in caplog.text
    assert got["lr"] == expected["lr"] == float(np.float32(0.05 / 12))
    _assert_same_run(got, expected)


def _scheduled_mlp() -> Any:
    """The Keras MLP with a RepeatScheduler of Adam and SGD: one optimizer per epoch, taking turns."""
    import keras

    from fe_ray.schedule import RepeatScheduler

    keras.utils.set_random_seed(0)
    return fe.build(lambda: keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                              keras.layers.Dense(16, "relu"), keras.layers.Dense(10, "softmax")]),
                    optimizer_fn=RepeatScheduler([lambda: keras.optimizers.Adam(0.05),
                                                  lambda: keras.optimizers.SGD(0.3)]), model_name="mlp")


@pytest.mark.timeout(300)
def test_lr_scheduler_sets_each_scheduled_optimizers_rate_on_replicas(ray_session: None) -> None:
    """LRScheduler.on_epoch_begin sets the rate of the optimizer current in the previous epoch (the next epoch's
    context switches after it, as in FastEstimator): Adam's rate set before epoch 2 is the one it trains epoch 3
    with. The replicas used to receive only the current optimizer's rate, so they trained epoch 3 at Adam's rate
    of epoch 1, and an epoch's end put that old rate back on the driver."""
    def traces(model: Any) -> list[Any]:
        return [LRScheduler(model, lambda epoch: 0.04 / epoch)]

    expected = _run(traces, epochs=4, make_model=_scheduled_mlp)
    got = _run(traces, epochs=4, make_model=_scheduled_mlp, num_replicas=2)
    # SGD (current in epoch 2) was given 0.04/3 before epoch 3, Adam (current in epoch 3) 0.04/4 before epoch 4.
    assert expected["scheduled_lrs"] == pytest.approx([0.04 / 4, 0.04 / 3], rel=1e-6)
    np.testing.assert_allclose(got["scheduled_lrs"], expected["scheduled_lrs"], rtol=1e-6)
    _assert_same_run(got, expected)


@pytest.mark.timeout(300)
def test_early_stopping_restores_the_best_weights_on_replicas(ray_session: None) -> None:
    def traces(model: Any) -> list[Any]:
        # Epoch 2 scores best; epochs 3 and 4 do not improve, so the run stops after epoch 4 and goes back to
        # epoch 2's weights, which the replicas then test with.
        return [Feed([0.5, 0.9, 0.3, 0.2, 0.8]),
                EarlyStopping("score", patience=2, compare="max", restore_best_weights=True)]

    expected = _run(traces, epochs=5)
    got = _run(traces, epochs=5, num_replicas=2)
    assert expected["epochs"] == 4
    _assert_same_run(got, expected)
    # Without the restore the replicas would test epoch 4's weights: a different loss.
    last = _run(lambda model: [Feed([0.5, 0.9, 0.3, 0.2, 0.8]), EarlyStopping("score", patience=2, compare="max")],
                epochs=5)
    assert not np.allclose(list(last["test_ce"].values()), list(got["test_ce"].values()), rtol=1e-4)


class HalveWeights(fe.trace.Trace):
    """A user's trace that reads the model's weights after training step 3 and then halves them (as the README
    asks: ``system.sync_models()`` before, ``system.push_models()`` after)."""

    def __init__(self, model: Any, seen: list[Any]) -> None:
        super().__init__(mode="train")
        self.model, self.seen = model, seen

    def on_batch_end(self, data: Any) -> None:
        if self.system.global_step == 3:
            self.system.sync_models()
            self.seen.extend(model_weights(self.model))
            self.model.set_weights([weight * 0.5 for weight in self.model.get_weights()])
            self.system.push_models()


@pytest.mark.timeout(300)
def test_a_trace_reads_and_changes_the_weights_mid_epoch_on_replicas(ray_session: None) -> None:
    runs = []
    for network_kwargs in ({}, {"num_replicas": 2}):
        seen: list[Any] = []
        result = _run(lambda model, seen=seen: [HalveWeights(model, seen)], epochs=1, **network_kwargs)
        runs.append((seen, result))
    (expected_seen, expected), (seen, got) = runs
    for mine, theirs in zip(seen, expected_seen):  # the weights after step 3, mid-epoch (4 steps an epoch)
        np.testing.assert_allclose(mine, theirs, atol=1e-6)
    _assert_same_run(got, expected)  # the replicas trained on from the halved weights
