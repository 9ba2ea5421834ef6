"""A driver script run with RAY_ADDRESS (as `ray job submit` runs it) joins that cluster instead of starting its own."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.processes import ray_head

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import numpy as np, ray, torch
import fe_ray as fe
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp

model = fe.build(lambda: torch.nn.Linear(3, 1), "sgd")
network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred"),
                      MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"), UpdateOp(model=model, loss_name="mse")],
                     num_replicas=2)
with network(mode="train", epoch=1):
    out = network.run_step({"x": np.ones((4, 3), np.float32), "y": np.zeros((4, 1), np.float32)})
assert np.isfinite(float(out["mse"]))
print("ranks", sorted(info["rank"] for info in network.replica_info()))
print("gcs", ray.get_runtime_context().gcs_address)
network.shutdown()
"""


@pytest.mark.timeout(150)
def test_driver_joins_the_cluster_named_by_ray_address() -> None:
    pytest.importorskip("ray")
    # Ray >= 2.59 authenticates every client of a local cluster with a token: both processes share one, as the
    # nodes and job drivers of a real cluster do (RAY_AUTH_TOKEN or `ray get-auth-token`'s default file).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_DEDUP_LOGS": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    env.pop("RAY_ADDRESS", None)
    with ray_head(env, str(ROOT), num_cpus=3, include_dashboard=False) as address:
        driver = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], cwd=ROOT,
                                env={**env, "RAY_ADDRESS": address}, capture_output=True, text=True, timeout=120)
    output = driver.stdout + driver.stderr
    assert driver.returncode == 0, output
    assert "ranks [0, 1]" in driver.stdout, output
    assert f"gcs {address}" in driver.stdout, output  # the existing cluster, not an embedded one
