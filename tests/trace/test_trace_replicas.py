"""Traces that drive models on a 2-replica network: LRScheduler's rates and BestModelSaver's final restore reach the
replicas, and the run matches the in-process one."""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_lr  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.trace import BestModelSaver, LRScheduler  # noqa: E402
from tests.estimator_helpers import Feed, ToyPipeline, digits_arrays, model_weights, tf_mlp  # noqa: E402


def _run(tmp_path: Any, **network_kwargs: Any) -> dict[str, Any]:
    train, evaluation = digits_arrays("tf", n_train=40, n_eval=20)
    model = tf_mlp(seed=0)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")], **network_kwargs)
    # Rates that float32 cannot hold exactly; the best epoch (2) is not the last one.
    traces = [Feed([0.5, 0.9, 0.3]), LRScheduler(model, lambda step: 0.05 / step),
              BestModelSaver(model, str(tmp_path), metric="score", save_best_mode="max", load_best_final=True)]
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=10, test=evaluation), network, epochs=3,
                             traces=traces, log_steps=None)
    try:
        estimator.fit()
        result = {"weights": model_weights(model), "lr": get_lr(model),
                  "test_ce": estimator.test().history["test"]["ce"]}  # scored by the replicas, if any
    finally:
        if network_kwargs:
            network.shutdown()
    return result


@pytest.mark.timeout(300)
def test_lr_scheduler_and_best_model_restore_on_replicas(ray_session: None, tmp_path: Any,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    expected = _run(tmp_path / "in_process")
    with caplog.at_level(logging.WARNING, logger="fe_ray.distributed"):
        got = _run(tmp_path / "replicas", num_replicas=2)
    # Every rate went through set_lr: none is reported as set behind it (and re-applied a step late).
    assert "without fe_ray.backend.set_lr" not in caplog.text
    assert got["lr"] == expected["lr"] == float(np.float32(0.05 / 12))
    for mine, theirs in zip(got["weights"], expected["weights"]):  # the best epoch's weights, restored
        np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert got["test_ce"].keys() == expected["test_ce"].keys()
    np.testing.assert_allclose(list(got["test_ce"].values()), list(expected["test_ce"].values()), rtol=1e-4)
