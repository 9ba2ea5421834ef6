"""ReduceLROnPlateau on a 2-replica network: the reduced rate reaches the replicas even though a RestoreWizard
checkpoint in the same event copies the replicas' state back to the driver, so the run matches the in-process one;
the classification metrics, computed on the driver from the merged outputs, agree too."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_lr  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.trace import RestoreWizard  # noqa: E402
from fe_ray.trace.adapt import ReduceLROnPlateau  # noqa: E402
from fe_ray.trace.metric import ConfusionMatrix, F1Score  # noqa: E402
from tests.estimator_helpers import Feed, ToyPipeline, digits_arrays, model_weights, torch_mlp  # noqa: E402


def _run(directory: str, **network_kwargs: Any) -> dict[str, Any]:
    train, evaluation = digits_arrays("torch", n_train=40, n_eval=20)
    model = torch_mlp(seed=0, lr=0.05)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                          CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
                          UpdateOp(model=model, loss_name="ce")], **network_kwargs)
    # The score never improves after epoch 1: the rate halves after epochs 2 and 3. The RestoreWizard runs after
    # ReduceLROnPlateau in the same evaluation-end event and copies the replicas' state to the driver.
    traces = [Feed([0.5, 0.6, 0.7]), ReduceLROnPlateau(model, metric="score", patience=1, factor=0.5),
              F1Score("y", "y_pred", average="macro", zero_division=0), ConfusionMatrix("y", "y_pred", 10),
              RestoreWizard(directory, background=False)]
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=10), network, epochs=3, traces=traces,
                             log_steps=None)
    try:
        summary = estimator.fit()
    finally:
        if network_kwargs:
            network.shutdown()
    evaluation = summary.history["eval"]
    return {"weights": model_weights(model), "lr": get_lr(model), "logged": evaluation["mlp_lr"],
            "f1": evaluation["f1_score"], "matrix": evaluation["confusion_matrix"]}


@pytest.mark.timeout(300)
def test_reduce_lr_on_plateau_reaches_the_replicas(ray_session: None, tmp_path: Any) -> None:
    expected = _run(str(tmp_path / "in_process"))
    got = _run(str(tmp_path / "replicas"), num_replicas=2)
    assert got["logged"] == expected["logged"] == {8: float(np.float32(0.025)), 12: float(np.float32(0.0125))}
    assert got["lr"] == expected["lr"] == float(np.float32(0.0125))
    # epoch 3 trained with the rate cut after epoch 2 on the replicas too
    for mine, theirs in zip(got["weights"], expected["weights"]):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert got["f1"].keys() == expected["f1"].keys() == {4, 8, 12}
    for step in expected["f1"]:
        assert got["f1"][step] == pytest.approx(expected["f1"][step])
        np.testing.assert_array_equal(got["matrix"][step], expected["matrix"][step])
        assert got["matrix"][step].sum() == 20
