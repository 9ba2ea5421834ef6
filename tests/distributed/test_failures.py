"""Failures reach the driver quickly and clearly: user-op errors, dead and hung replicas, bad configuration."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import signal
import threading
import time
import timeit
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.distributed import PlacementError, ReplicaDiedError, ReplicaTimeoutError, cluster
from fe_ray.distributed.step_stream import EARLY_ANSWER_ENV
from fe_ray.op.tensorop import LambdaOp
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from tests.helpers.models import linear
from tests.helpers.processes import pid_alive, wait_for


class PoisonError(Exception):
    """A user exception type that only exists in the test module."""


def check_value(x: Any) -> Any:
    """Fail on the replica whose slice holds the poison value 999; sleep on the one holding -999."""
    data = x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
    if (data == 999).any():
        raise PoisonError("poisoned sample in my slice")
    if (data == -999).any():
        time.sleep(float(os.environ.get("FE_RAY_TEST_SLEEP", "4")))
    return x


class BrokenUpdate(UpdateOp):
    """An UpdateOp whose update fails: with the step stream it runs after the step's answer."""

    def forward(self, data: Any, state: dict[str, Any]) -> None:
        raise PoisonError("the update broke")


#: Set in a replica's environment: the folder its exit hook (record_exit) writes to.
EXIT_DIR_VAR = "FE_RAY_TEST_EXIT_DIR"
_EXIT_HOOKS: list[str] = []


def record_exit(x: Any) -> Any:
    """In a replica given EXIT_DIR_VAR, register (once) an exit hook that leaves a file named after its process."""
    folder = os.environ.get(EXIT_DIR_VAR)
    if folder and not _EXIT_HOOKS:
        _EXIT_HOOKS.append(folder)
        atexit.register(lambda: Path(folder, str(os.getpid())).write_text("exit hooks ran"))
    return x


def wait_until_gone(pids: list[int], timeout_s: float = 30.0) -> None:
    """Wait for the processes (on this machine) to end: after that, whether their exit hooks ran is settled."""
    wait_for(lambda: not any(pid_alive(pid) for pid in pids), timeout_s, f"processes {pids} to end")


def make_network(update: type[UpdateOp] = UpdateOp, **kwargs: Any) -> Any:
    model = linear("torch", lr=0.05)
    ops = [LambdaOp(record_exit, inputs="x", outputs="x"),
           LambdaOp(check_value, inputs="x", outputs="x"),
           ModelOp(model=model, inputs="x", outputs="y_pred"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
           update(model=model, loss_name="mse")]
    return fe.Network(ops, **kwargs)


def batch(poison: float | None = None, size: int = 4) -> dict[str, np.ndarray]:
    x = np.ones((size, 3), np.float32)
    if poison is not None:
        x[-1, 0] = poison  # the last sample goes to the last replica
    return {"x": x, "y": np.ones((size, 1), np.float32)}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["compiled", "calls", "stream"])
def test_user_error_keeps_type_message_and_traceback_then_recovers(ray_session: None, transport: str) -> None:
    network = make_network(num_replicas=2, step_transport=transport)
    try:
        network.start()
        assert network._holder.group.transport == transport
        start = timeit.default_timer()
        with pytest.raises(PoisonError, match="poisoned sample") as info:
            with network(mode="train", epoch=1):
                network.run_step(batch(poison=999))
        # Rank 0 waited for rank 1 in the all-reduce: it was told to leave it (not left to the 300 s timeout).
        assert timeit.default_timer() - start < 20
        err = info.value
        assert err.replica_rank == 1
        assert "check_value" in err.remote_traceback and "PoisonError" in err.remote_traceback
        assert "poisoned sample" in str(err.__cause__) and "Remote traceback" in str(err.__cause__)
        # The failed group was torn down; the next step starts fresh replicas from the driver's models.
        with network(mode="train", epoch=1):
            out = network.run_step(batch())
        assert np.isfinite(out["mse"])
    finally:
        network.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("early", [True, False], ids=["answered before the update", "FE_RAY_EARLY_ANSWER=0"])
def test_an_error_in_the_weight_update_reaches_the_driver_by_the_next_call(ray_session: None, early: bool) -> None:
    env = None if early else {"env_vars": {EARLY_ANSWER_ENV: "0"}}
    network = make_network(BrokenUpdate, num_replicas=2, runtime_env=env)
    try:
        steps_done = 0
        with pytest.raises(PoisonError, match="the update broke") as info:
            with network(mode="train", epoch=1):
                for _ in range(2):
                    network.run_step(batch())
                    steps_done += 1
        # Answered before its update, the first step's outputs arrive and its error comes with the next step.
        assert steps_done == (1 if early else 0)
        assert ("previous step" in info.value.remote_traceback) == early
        # The last step of a context: its error is raised when the context ends (the models are synced then).
        with pytest.raises(PoisonError, match="the update broke"):
            with network(mode="train", epoch=1):
                network.run_step(batch())
        with network(mode="eval", epoch=1):  # fresh replicas, no update: nothing fails
            assert np.isfinite(network.run_step(batch())["mse"])
    finally:
        network.shutdown()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["compiled", "calls", "stream"])
def test_killed_replica_raises_quickly(ray_session: None, transport: str) -> None:
    network = make_network(num_replicas=2, step_transport=transport)
    try:
        victim = network.replica_info()[1]
        timer = threading.Timer(1.0, os.kill, args=(victim["pid"], signal.SIGKILL))
        timer.start()
        start = timeit.default_timer()
        with pytest.raises(ReplicaDiedError) as info:
            with network(mode="train", epoch=1):
                network.run_step(batch(poison=-999))  # rank 1 sleeps; it is killed mid-step
        elapsed = timeit.default_timer() - start
        timer.join()
        assert info.value.rank == 1 and info.value.pid == victim["pid"]
        assert "died" in str(info.value)
        assert elapsed < 20, elapsed
        assert not network.started
    finally:
        network.shutdown()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["calls", "compiled", "stream"])
def test_hung_replica_times_out(ray_session: None, transport: str) -> None:
    os.environ["FE_RAY_TEST_SLEEP"] = "60"
    network = make_network(num_replicas=2, step_timeout_s=3, runtime_env={"env_vars": {"FE_RAY_TEST_SLEEP": "60"}},
                           step_transport=transport)
    try:
        network.start()
        start = timeit.default_timer()
        with pytest.raises(ReplicaTimeoutError, match="within 3s") as info:
            with network(mode="train", epoch=1):
                network.run_step(batch(poison=-999))
        assert timeit.default_timer() - start < 15
        if transport == "stream":  # rank 0 answered (before its update): the hung rank 1 alone is named
            assert info.value.rank == 1 and "also ranks" not in str(info.value)
        else:  # with actor calls rank 0 waits in the all-reduce for rank 1: it cannot be told from it
            assert info.value.rank in (0, 1)
    finally:
        os.environ.pop("FE_RAY_TEST_SLEEP", None)
        network.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["compiled", "stream"])
def test_stopped_replicas_exit_normally_unless_their_group_failed(ray_session: None, tmp_path: Path,
                                                                  transport: str) -> None:
    """A healthy group's replicas end like a program (their atexit hooks run: e.g. TF deletes the modules autograph
    wrote to the temp folder); a failed group's are killed at once."""
    network = make_network(num_replicas=2, step_transport=transport,
                           runtime_env={"env_vars": {EXIT_DIR_VAR: str(tmp_path)}})
    try:
        healthy = [info["pid"] for info in network.replica_info()]
        with network(mode="train", epoch=1):
            network.run_step(batch())
        network.shutdown()
        wait_until_gone(healthy)
        assert sorted(os.listdir(tmp_path)) == sorted(str(pid) for pid in healthy)

        failing = [info["pid"] for info in network.replica_info()]  # a new group
        assert not set(failing) & set(healthy)
        with pytest.raises(PoisonError):
            with network(mode="train", epoch=1):
                network.run_step(batch(poison=999))
        assert not network.started
        wait_until_gone(failing)
        assert sorted(os.listdir(tmp_path)) == sorted(str(pid) for pid in healthy)  # killed: no hook ran
    finally:
        network.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["compiled", "stream"])
def test_an_interrupted_step_is_no_replica_failure_and_its_replicas_exit_normally(
        ray_session: None, tmp_path: Path, transport: str, caplog: pytest.LogCaptureFixture) -> None:
    """Ctrl-C while the replicas compute a step: the KeyboardInterrupt reaches the caller and no failure is counted;
    the group, whose answers are still owed, is replaced, and its replicas finish the step and exit normally."""
    network = make_network(num_replicas=2, step_transport=transport,
                           runtime_env={"env_vars": {EXIT_DIR_VAR: str(tmp_path), "FE_RAY_TEST_SLEEP": "3"}})
    try:
        pids = [info["pid"] for info in network.replica_info()]
        # A real SIGINT to this thread, 1 s into the step that rank 1 spends 3 s in: it interrupts the wait for the
        # answers as Ctrl-C does.
        interrupt = threading.Timer(1.0, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        with caplog.at_level(logging.WARNING, logger="fe_ray"):
            with pytest.raises(KeyboardInterrupt):
                interrupt.start()
                with network(mode="train", epoch=1):
                    network.run_step(batch(poison=-999))
        interrupt.join()
        assert network.failures == 0 and not network.started
        assert "interrupted (KeyboardInterrupt)" in caplog.text
        assert "replica failure" not in caplog.text and "killing them" not in caplog.text
        wait_until_gone(pids)
        assert sorted(os.listdir(tmp_path)) == sorted(str(pid) for pid in pids)  # their exit hooks ran
        with network(mode="train", epoch=1):
            assert np.isfinite(network.run_step(batch())["mse"])
    finally:
        network.shutdown()


@pytest.mark.timeout(60)
def test_exit_actors_counts_the_actors_too_busy_to_exit(ray_session: None) -> None:
    import ray

    @ray.remote(num_cpus=0)
    class Worker:
        def __init__(self, busy_s: float) -> None:
            self.busy_s = busy_s

        def pid(self) -> int:
            return os.getpid()

        def shutdown(self) -> None:
            time.sleep(self.busy_s)

    idle, busy = Worker.remote(0.0), Worker.remote(60.0)
    idle_pid, busy_pid = ray.get([idle.pid.remote(), busy.pid.remote()], timeout=30)
    try:
        start = timeit.default_timer()
        assert cluster.exit_actors([idle, busy], grace_s=2.0) == 1
        assert timeit.default_timer() - start < 20  # the grace bounds the wait, not the busy actor
        wait_until_gone([idle_pid])
        assert pid_alive(busy_pid)  # still busy: the caller kills it
    finally:
        cluster.kill_actor(busy)
    wait_until_gone([busy_pid])
    assert cluster.exit_actors([], grace_s=1.0) == 0


def test_unpicklable_op_is_named_before_any_actor_starts() -> None:
    op = LambdaOp(lambda x: x, inputs="x", outputs="x")
    op.lock = threading.Lock()
    model = linear("torch")
    ops = [op, ModelOp(model=model, inputs="x", outputs="y_pred")]
    with pytest.raises(TypeError, match=r"op #0 \(LambdaOp\).*'lock'"):
        fe.Network(ops, num_replicas=2)


@pytest.mark.timeout(60)
def test_unplaceable_request_fails_fast(ray_session: None) -> None:
    network = make_network(num_replicas=2, resources_per_replica={"GPU": 1}, placement_timeout_s=5)
    start = timeit.default_timer()
    with pytest.raises(PlacementError, match=r"resources_per_replica=\{'GPU': 1.0\}.*Available now"):
        network.start()
    assert timeit.default_timer() - start < 5
    lower = make_network(num_replicas=1, resources_per_replica={"cpu": 1}, placement_timeout_s=5)
    with pytest.raises(PlacementError, match=r"Resource names are case-sensitive: did you mean 'CPU' for 'cpu'\?"):
        lower.start()
    spread = make_network(num_replicas=2, placement_strategy="STRICT_SPREAD", placement_timeout_s=30)
    with pytest.raises(PlacementError, match=r"'STRICT_SPREAD' puts each replica on a node of its own and the cluster "
                                             r"has 1 node\(s\).*use placement_strategy='SPREAD'"):
        spread.start()  # at once, not after placement_timeout_s
    nccl = make_network(num_replicas=2, collective_backend="nccl")  # the CPU bundle here: no GPU for NCCL
    with pytest.raises(ValueError, match=r"collective_backend='nccl' needs a whole GPU per replica, but each replica "
                                         r"gets \{'CPU': 1.0\}.*collective_backend='gloo'"):
        nccl.start()
    assert timeit.default_timer() - start < 15  # refused before any actor started


@pytest.mark.timeout(60)
def test_a_placement_that_waits_says_so(ray_session: None, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """Resources held elsewhere: the wait prints what it waits for until placement_timeout_s, then names it."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    from fe_ray.distributed import cluster

    holder = placement_group([{"CPU": 4}])  # the session's 4 CPUs, held by "another job"
    ray.get(holder.ready(), timeout=30)
    monkeypatch.setattr(cluster, "PLACEMENT_PROGRESS_S", 1.0)
    try:
        with caplog.at_level(logging.WARNING, logger="fe_ray"):
            with pytest.raises(PlacementError, match=r"not placed within 3.5s.*Available now: \{'CPU': 0.0"):
                cluster.reserve(1, {"CPU": 1.0}, timeout_s=3.5)
    finally:
        remove_placement_group(holder)
    waits = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    assert len(waits) >= 2, waits
    assert "1 replica(s) with resources_per_replica={'CPU': 1.0}" in waits[0] and "placement_timeout_s=3.5s" in waits[0]


@pytest.mark.timeout(120)
def test_a_dropped_network_frees_its_replicas_and_a_held_one_is_named(ray_session: None) -> None:
    """A sweep that builds one network per run: the previous, unreferenced one must not hold the cluster."""
    bundle = {"CPU": 2}  # two replicas take the session's 4 CPUs
    first = make_network(num_replicas=2, resources_per_replica=bundle)
    first.start()
    first.cycle = first  # like an Estimator <-> System <-> Network cycle: only the cyclic collector frees it
    del first
    collecting = gc.isenabled()
    gc.disable()  # no automatic collection may free it by chance
    try:
        second = make_network(num_replicas=2, resources_per_replica=bundle, placement_timeout_s=20)
        second.start()  # without collecting the first network, this waited out its 20 s and raised
        third = make_network(num_replicas=1, resources_per_replica={"CPU": 1}, placement_timeout_s=2)
        with pytest.raises(PlacementError, match=r"holds replicas of 1 other fe_ray network\(s\) "
                                                 r"\(2 x \{'CPU': 2.0\}\): call shutdown\(\)"):
            third.start()
        second.shutdown()
        third.start()
        assert third.started
        third.shutdown()
    finally:
        if collecting:
            gc.enable()


def test_the_collective_outlasts_the_step_timeout_unless_set() -> None:
    # A hung replica must be reported by the step timeout (ReplicaTimeoutError naming the silent ranks), not by a
    # peer's all-reduce timing out at the same moment.
    assert make_network(num_replicas=2, step_timeout_s=6).collective_timeout_s == 12
    assert make_network(num_replicas=2, step_timeout_s=6, collective_timeout_s=5).collective_timeout_s == 5


def test_bad_options_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_RAY_STREAM_SPIN_US", "fast")  # read by every replica: checked before any starts
    with pytest.raises(ValueError, match="FE_RAY_STREAM_SPIN_US must be an integer number of microseconds"):
        make_network(num_replicas=2)
    make_network(num_replicas=2, step_transport="calls")  # only the stream reads it
    monkeypatch.delenv("FE_RAY_STREAM_SPIN_US")
    with pytest.raises(ValueError, match="FE_RAY_STREAM_SPIN_US must be an integer.*'-5'"):  # the replicas' own
        make_network(num_replicas=2, runtime_env={"env_vars": {"FE_RAY_STREAM_SPIN_US": "-5"}})
    monkeypatch.setenv(EARLY_ANSWER_ENV, "yes")
    with pytest.raises(ValueError, match=f"{EARLY_ANSWER_ENV} must be 1 .* or 0 .*'yes'"):
        make_network(num_replicas=2)
    make_network(num_replicas=2, runtime_env={"env_vars": {EARLY_ANSWER_ENV: "0"}})  # theirs wins over ours
    monkeypatch.delenv(EARLY_ANSWER_ENV)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        make_network(num_replicas=2, max_failures=1)
    with pytest.raises(ValueError, match=r"step_transport must be one of \['stream', 'calls', 'compiled'\], "
                                         r"got 'grpc'"):
        make_network(num_replicas=2, step_transport="grpc")
    with pytest.raises(ValueError, match="step_timeout_s"):
        make_network(num_replicas=2, step_timeout_s=0)
    with pytest.raises(ValueError, match="resources_per_replica"):
        make_network(num_replicas=2, resources_per_replica={"CPU": -1})
    # Values that passed before and failed only later, inside the replicas or after the placement timeout.
    for timeout in (float("inf"), 1e12, float("nan")):
        with pytest.raises(ValueError, match=r"step_timeout_s must be a positive number of seconds up to 10000000"):
            make_network(num_replicas=2, step_timeout_s=timeout)
    with pytest.raises(ValueError, match=r"finite number >= 0, got 'CPU': nan"):
        make_network(num_replicas=2, resources_per_replica={"CPU": float("nan")})
    with pytest.raises(ValueError, match=r"asks for nothing .*at least one resource"):
        make_network(num_replicas=2, resources_per_replica={"CPU": 0})
    network = make_network(num_replicas=np.int64(2))  # a numpy integer (a sweep's grid value) is an int
    assert network.num_replicas == 2 and type(network.num_replicas) is int
    with pytest.raises(TypeError, match=r"checkpoint_dir must be a path or an fsspec URL string .*got int: 123"):
        make_network(num_replicas=2, checkpoint_dir=123)
    with pytest.raises(TypeError, match=r"runtime_env must be a dict of Ray's runtime environment fields .*got str"):
        make_network(num_replicas=2, runtime_env="env.yaml")
    with pytest.raises(TypeError, match=r"runtime_env\['env_vars'\] must be a dict of strings .*got \['A=1'\]"):
        make_network(num_replicas=2, runtime_env={"env_vars": ["A=1"]})


@pytest.mark.timeout(90)
def test_unreachable_step_streams_fall_back_to_actor_calls(ray_session: None, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """A driver that cannot connect to the replicas (e.g. Ray Client from outside the cluster) still trains."""
    from fe_ray.distributed.step_stream import StepStream

    def unreachable(*args: Any, **kwargs: Any) -> None:
        raise ConnectionRefusedError("no route to the replica")

    monkeypatch.setattr(StepStream, "__init__", unreachable)
    network = make_network(num_replicas=2)
    try:
        with caplog.at_level("WARNING", logger="fe_ray.distributed.supervisor"):
            network.start()
        assert network._holder.group.transport == "calls"
        assert "cannot connect to the replicas' step streams" in caplog.text
        with network(mode="train", epoch=1):
            first = network.run_step(batch())["mse"]
            second = network.run_step(batch())["mse"]
        assert np.isfinite(first) and second < first  # the replicas train (their calls run on their one thread)
    finally:
        network.shutdown()


@pytest.mark.timeout(180)
def test_the_user_restarting_ray_between_runs_gets_fresh_replicas(ray_session: None,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """After ray.shutdown() (and a new ray.init()), the replicas are gone with their connection: the next run starts
    new ones instead of failing on the old actors (counted as a replica failure before)."""
    import ray

    network = make_network(num_replicas=2)
    try:
        with network(mode="train", epoch=1):
            network.run_step(batch())
        ray.shutdown()
        assert not network.started
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)  # as ray_session does
        with caplog.at_level("WARNING", logger="fe_ray.distributed"):
            with network(mode="train", epoch=2):
                assert np.isfinite(network.run_step(batch())["mse"])
        assert "the replicas' Ray connection has ended" in caplog.text and network.failures == 0
        ray.shutdown()
        caplog.clear()
        with caplog.at_level("WARNING", logger="fe_ray.distributed"):
            network.shutdown()  # nothing to ask: no warning about replicas that did not exit
        assert "had not begun to exit" not in caplog.text and not ray.is_initialized()
    finally:
        network.shutdown()
        if not ray.is_initialized():  # the module's later tests and its fixture expect a session
            ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)


@pytest.mark.timeout(120)
def test_memory_in_resources_per_replica_reaches_ray_as_its_own_option(ray_session: None) -> None:
    # Ray refuses "memory" among an actor's custom resources (it was passed there and failed at actor start).
    network = make_network(num_replicas=1, resources_per_replica={"CPU": 1, "memory": 64 * 2**20})
    try:
        with network(mode="train", epoch=1):
            assert np.isfinite(network.run_step(batch())["mse"])
    finally:
        network.shutdown()
