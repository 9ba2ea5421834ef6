"""A run submitted as a Ray job (``ray job submit --working-dir``, the README's cluster path) and stopped with ``ray job
stop`` (SIGTERM to the driver, then SIGKILL if it lingers) leaves no replica behind and keeps its committed
checkpoint; the resubmitted job resumes from it and ends with the weights of an uninterrupted run."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.processes import ray_head
from tests.reliability.helpers import build_run, pid_alive, wait_for, weights_of

ROOT = str(Path(__file__).resolve().parents[2])

# The job's driver: the reliability tests' 2-epoch, 12-step run on two replicas with a RestoreWizard. With a ready
# file it tells the test at step 8 (epoch 1's checkpoint is at step 6) and waits there to be stopped.
DRIVER = """
import json, os, sys, time
import numpy as np
from fe_ray.trace import Trace
from tests.reliability.helpers import RestoreWizard, build_run, weights_of

checkpoint_dir, ready, weights_file = sys.argv[1:4]


class WaitAt(Trace):
    checkpointed = False

    def __init__(self):
        super().__init__(mode="train")

    def on_batch_end(self, data):
        if self.system.global_step == 8 and ready != "-":
            pids = [info["pid"] for info in self.system.network.replica_info()]
            with open(ready + ".tmp", "w") as file:
                json.dump(pids, file)
            os.replace(ready + ".tmp", ready)  # the test reads it whole or not at all
            time.sleep(600)


estimator, model = build_run(traces=[RestoreWizard(checkpoint_dir), WaitAt()], num_replicas=2)
estimator.fit()
np.savez(weights_file, *weights_of(model))
"""


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_a_job_stopped_with_ray_job_stop_leaves_no_replica_and_its_resubmission_resumes_exactly(
        tmp_path: Path) -> None:
    pytest.importorskip("ray.dashboard")
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    if not os.path.exists(ray_cli):
        pytest.skip("the ray command line is not installed beside this Python")
    # Ray >= 2.59 authenticates every client of a cluster (the job CLI included) with a token.
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16), "RAY_DEDUP_LOGS": "0"}
    env.pop("RAY_ADDRESS", None)
    from fe_ray.distributed.collective import free_port

    port = free_port("127.0.0.1")
    address = f"http://127.0.0.1:{port}"
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    checkpoint_dir, ready = tmp_path / "ckpt", tmp_path / "ready.json"

    def api(path: str, method: str = "GET") -> dict:
        """A call to the job server's REST API (what Ray's job CLI and SDK call), with the cluster's token."""
        request = urllib.request.Request(f"{address}/api/{path}", method=method,
                                         headers={"Authorization": f"Bearer {env['RAY_AUTH_TOKEN']}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def answers() -> bool:
        try:
            return bool(api("version"))
        except OSError:
            return False

    def status(job_id: str) -> str:
        return str(api(f"jobs/{job_id}")["status"])

    def logs(job_id: str) -> str:
        return str(api(f"jobs/{job_id}/logs")["logs"])

    def submit(job_id: str, ready_file: str, weights_file: str) -> None:
        # The job CLI, as the README runs it: it packs the working directory and uploads it.
        done = subprocess.run([ray_cli, "job", "submit", "--address", address, "--no-wait", "--submission-id", job_id,
                               "--working-dir", ROOT, "--", sys.executable, str(script), str(checkpoint_dir),
                               ready_file, weights_file], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    with ray_head(env, ROOT, num_cpus=3, include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=port):
        wait_for(answers, 60, "the job server to answer")

        submit("first", str(ready), str(tmp_path / "unused.npz"))
        wait_for(lambda: ready.exists() or status("first") == "FAILED", 180, "the job to reach step 8")
        assert ready.exists(), logs("first")[-3000:]
        replicas = json.loads(ready.read_text())
        assert len(replicas) == 2 and all(pid_alive(pid) for pid in replicas)
        assert api("jobs/first/stop", method="POST")["stopped"]  # what `ray job stop` asks for
        wait_for(lambda: status("first") == "STOPPED", 60, "the job to be stopped")
        wait_for(lambda: not any(pid_alive(pid) for pid in replicas), 60, "the stopped job's replicas to exit")
        from fe_ray.io import CheckpointStore

        store = CheckpointStore(str(checkpoint_dir), keep=None)
        assert [store.manifest(url)["info"]["global_step"] for url in store.committed()] == [6]

        weights_file = tmp_path / "resumed.npz"
        submit("second", "-", str(weights_file))
        wait_for(lambda: status("second") in ("SUCCEEDED", "FAILED", "STOPPED"), 180, "the resubmitted job to end")
        text = logs("second")
        assert status("second") == "SUCCEEDED", text[-3000:]
        assert "Restored from" in text and "ckpt-000001 (epoch 1, step 6)" in text, text[-3000:]
    # The resumed job ends where an uninterrupted in-process run does.
    estimator, model = build_run()
    estimator.fit()
    with np.load(weights_file) as saved:
        resumed = [saved[f"arr_{index}"] for index in range(len(saved.files))]
    for mine, reference in zip(resumed, weights_of(model), strict=True):
        np.testing.assert_allclose(mine, reference, atol=1e-5, rtol=0)
