"""A replica's steps answered before their weight update, without Ray: a plain Replica object stands in for the
actor (the step stream's thread calls ``StepReply.then`` right after sending; here the test calls it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fe_ray.distributed.errors import RemoteFailure
from fe_ray.distributed.replica import Replica
from fe_ray.distributed.step_stream import StepReply
from tests.estimator_helpers import digits_arrays
from tests.helpers.ops import BrokenUpdate
from tests.helpers.replicas import configured_replica


def weights(replica: Replica) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in replica.network.models[0].parameters()]


def test_a_step_answers_with_its_outputs_and_leaves_the_update_to_its_follow_up() -> None:
    early, late = configured_replica(), configured_replica()
    train, _ = digits_arrays(n_train=16, n_eval=0)
    for _ in range(2):
        before = weights(early)
        reply = early.step_early((train, 16, 16, None))
        assert isinstance(reply, StepReply) and reply.then is not None
        answer = late.step((train, 16, 16, None))
        assert set(reply.value) == set(answer) == {"ce"}
        np.testing.assert_array_equal(reply.value["ce"], answer["ce"])
        for got, want in zip(weights(early), before):
            np.testing.assert_array_equal(got, want)  # the answer came before the update
        reply.then()
        for got, want in zip(weights(early), weights(late)):
            np.testing.assert_array_equal(got, want)
    assert early.step_early(None) is True  # the stream's warm-up message


def test_a_failed_update_is_returned_by_every_later_call_until_shutdown() -> None:
    replica = configured_replica(BrokenUpdate)
    train, _ = digits_arrays(n_train=16, n_eval=0)
    reply = replica.step_early((train, 16, 16, None))
    assert np.isfinite(reply.value["ce"])
    reply.then()  # must not raise: the stream's thread runs it after sending
    for call in (lambda: replica.step_early((train, 16, 16, None)), lambda: replica.run_step(train, 16, 16),
                 replica.get_state, replica.exit_context):
        failure = call()
        assert isinstance(failure, RemoteFailure) and failure.cause_type == "RuntimeError"
        err = failure.to_exception()
        assert isinstance(err, RuntimeError) and "the update broke" in str(err)
        assert 'raise RuntimeError("the update broke")' in err.remote_traceback  # the failing line
        assert "previous step" in err.remote_traceback
    assert replica.info()["rank"] == 0
    assert replica.shutdown() is True


def test_a_step_without_an_update_to_leave_answers_after_it() -> None:
    replica = configured_replica()
    assert replica.configure("eval", 1, "", {"ce"}, False, False, None) is True
    train, _ = digits_arrays(n_train=16, n_eval=0)
    before = weights(replica)
    reply = replica.step_early((train, 16, 16, None))
    assert isinstance(reply, StepReply) and "ce" in reply.value
    reply.then()
    for got, want in zip(weights(replica), before):
        assert torch.equal(torch.from_numpy(got), torch.from_numpy(want))


@pytest.mark.parametrize(("visible_gpus", "lowered"), [("", True), ("0", False)])
def test_a_replica_without_a_gpu_yields_its_cores_when_it_exits(visible_gpus: str, lowered: bool) -> None:
    """The exit hook each replica registers; run in a process of its own, whose priority it changes."""
    code = ("import os\nfrom fe_ray.distributed.replica import yield_cores_at_exit\n"
            "before = os.getpriority(os.PRIO_PROCESS, 0)\nyield_cores_at_exit()\n"
            "print(before, os.getpriority(os.PRIO_PROCESS, 0))\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible_gpus}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    before, after = map(int, result.stdout.split())
    assert after == (19 if lowered else before)
