"""Stopping replica groups, in process: which replicas may exit normally, one grace period for all, kills."""

from __future__ import annotations

import logging
import weakref
from typing import Any

import pytest

from fe_ray.distributed import cluster, supervisor
from fe_ray.distributed.supervisor import ReplicaGroup, stop_groups


class Calls:
    """Stands in for the cluster's actor calls: records the exits asked for and the kills."""

    def __init__(self, late: int = 0) -> None:
        self.late = late
        self.exits: list[tuple[list[str], float]] = []
        self.killed: list[str] = []

    def exit_actors(self, actors: list[str], grace_s: float) -> int:
        self.exits.append((list(actors), grace_s))
        return self.late


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    recorder = Calls()
    monkeypatch.setattr(cluster, "exit_actors", recorder.exit_actors)
    monkeypatch.setattr(cluster, "kill_actor", recorder.killed.append)
    monkeypatch.setattr(cluster, "release", lambda group: None)
    monkeypatch.setattr(cluster, "ray_session", lambda: ("job", "node"))  # one live Ray connection throughout
    # Only this test's groups: a real one an earlier test left running must not meet the stand-ins.
    monkeypatch.setattr(supervisor, "_HOLDING", weakref.WeakSet())
    return recorder


def group(name: str, size: int, alive: bool) -> ReplicaGroup:
    """A group whose actors are names (nothing started); held by this process, as a started group is."""
    made = ReplicaGroup(size, "torch", b"", {"CPU": 1.0}, 1.0, 1.0, 1.0, None)
    made.actors = [f"{name}{rank}" for rank in range(size)]
    made.alive = alive
    supervisor._HOLDING.add(made)
    return made


def test_healthy_groups_share_one_grace_period_and_failed_ones_are_only_killed(calls: Calls) -> None:
    first, failed, second = group("a", 2, alive=True), group("f", 2, alive=False), group("b", 1, alive=True)
    stop_groups([first, failed, second], grace_s=5.0)
    assert calls.exits == [(["a0", "a1", "b0"], 5.0)]  # one wait for every healthy replica, none for the failed
    assert sorted(calls.killed) == ["a0", "a1", "b0", "f0", "f1"]
    for stopped in (first, failed, second):
        assert stopped.actors == [] and not stopped.alive and stopped not in supervisor._HOLDING
    stop_groups([first, failed, second], grace_s=5.0)  # again: nothing left to do
    assert len(calls.exits) == 1 and len(calls.killed) == 5


def test_groups_of_an_ended_ray_connection_are_only_forgotten(monkeypatch: pytest.MonkeyPatch, calls: Calls) -> None:
    # After the user's ray.shutdown() (and ray.init()) the old actors are gone: asking them to exit would fail (or
    # start a new Ray) and report them all as busy.
    old = group("o", 2, alive=True)
    monkeypatch.setattr(cluster, "ray_session", lambda: ("job", "new node"))
    current = group("c", 1, alive=True)
    assert not old.of_this_session() and current.of_this_session()
    stop_groups([old, current], grace_s=5.0)
    assert calls.exits == [(["c0"], 5.0)] and calls.killed == ["c0"]
    assert old.actors == [] and not old.alive and old not in supervisor._HOLDING


def test_without_a_grace_period_every_replica_is_killed_at_once(calls: Calls) -> None:
    healthy = group("a", 2, alive=True)
    healthy.stop()
    assert calls.exits == [] and calls.killed == ["a0", "a1"]


def test_replicas_still_busy_after_the_grace_period_are_named_in_a_warning(calls: Calls,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    calls.late = 1
    with caplog.at_level(logging.WARNING, logger=supervisor.__name__):
        stop_groups([group("a", 2, alive=True), group("b", 1, alive=True)], grace_s=5.0)
    assert "1 of 3 replicas had not begun to exit 5 s after being asked to" in caplog.text
    assert sorted(calls.killed) == ["a0", "a1", "b0"]


def test_a_failed_exit_request_still_kills_every_replica(monkeypatch: pytest.MonkeyPatch, calls: Calls,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    def broken(actors: Any, grace_s: float) -> int:
        raise RuntimeError("Ray is shutting down")

    monkeypatch.setattr(cluster, "exit_actors", broken)
    with caplog.at_level(logging.WARNING, logger=supervisor.__name__):
        group("a", 2, alive=True).stop(grace_s=5.0)
    assert calls.killed == ["a0", "a1"]
    assert "2 of 2 replicas had not begun to exit" in caplog.text


def test_the_exit_hook_stops_every_held_group_with_one_grace_period(calls: Calls) -> None:
    held = [group("a", 1, alive=True), group("b", 2, alive=True)]
    supervisor._stop_all_at_exit()
    assert len(calls.exits) == 1
    assert sorted(calls.exits[0][0]) == ["a0", "b0", "b1"] and calls.exits[0][1] == supervisor.EXIT_GRACE_S
    assert all(stopped.actors == [] for stopped in held) and not supervisor._HOLDING


def test_an_interrupted_wait_still_kills_every_replica(monkeypatch: pytest.MonkeyPatch, calls: Calls) -> None:
    def interrupted(actors: Any, grace_s: float) -> int:
        raise KeyboardInterrupt  # a second Ctrl-C while the replicas exit

    monkeypatch.setattr(cluster, "exit_actors", interrupted)
    groups = [group("a", 1, alive=True), group("b", 1, alive=False)]
    with pytest.raises(KeyboardInterrupt):
        stop_groups(groups, grace_s=5.0)
    assert sorted(calls.killed) == ["a0", "b0"] and not supervisor._HOLDING


class UpdateFailed(Exception):
    """The weight update of a replica's previous step failed (raised there after the step had answered)."""


class Ref:
    """An actor call's result: ``value``, or never ready (a replica blocked in an all-reduce)."""

    def __init__(self, value: Any = None, ready: bool = True) -> None:
        self.value, self.ready = value, ready


class FakeActor:
    """Answers the methods in ``answers`` (name -> Ref) and records what was called."""

    def __init__(self, answers: dict[str, Ref], called: list[str]) -> None:
        self.answers, self.called = answers, called

    def __getattr__(self, method: str) -> Any:
        def remote(*args: Any) -> Ref:
            self.called.append(method)
            return self.answers[method]

        return type("Method", (), {"remote": staticmethod(remote)})()


def test_pulling_rank0s_state_raises_a_peers_failed_update_at_once(monkeypatch: pytest.MonkeyPatch,
                                                                   calls: Calls) -> None:
    """A step stream answers a torch step before its update; rank 1's update fails and rank 0 waits for it in the
    (unwakeable) gloo all-reduce. The epoch's end then pulls rank 0's state: the driver must raise rank 1's error
    now, not rank 0's collective timeout (default 600 s) or a ReplicaTimeoutError of the pull (measured before: a
    gloo "Timed out waiting 40000ms" RuntimeError of rank 0, 40 s late, with step_timeout_s=20)."""
    import fe_ray.distributed.group_waits as group_waits
    from fe_ray.distributed.errors import capture_failure
    from fe_ray.distributed.state_transfer import pull_rank0

    try:
        raise UpdateFailed("backward failed on rank 1")
    except UpdateFailed as exc:
        failure = capture_failure(exc, rank=1, node_ip="10.0.0.2", pid=42)
    called: list[str] = []
    made = group("g", 2, alive=True)
    made.infos = [{"node_ip": "10.0.0.1", "pid": 41}, {"node_ip": "10.0.0.2", "pid": 42}]
    made.actors = [FakeActor({"get_state": Ref(ready=False), "step_settled": Ref(ready=False)}, called),  # blocked
                   FakeActor({"step_settled": Ref(failure)}, called)]
    made._unsettled = True  # a step ran on the step stream (run_steps sets it)

    def wait(refs: list[Ref], num_returns: int = 1, timeout: float | None = None) -> tuple[list[Ref], list[Ref]]:
        return [ref for ref in refs if ref.ready], [ref for ref in refs if not ref.ready]

    def get(ref: Ref, timeout: float | None = None) -> Any:
        return ref.value

    fake_ray = type("FakeRay", (), {"wait": staticmethod(wait), "get": staticmethod(get),
                                    "exceptions": group_waits.ray.exceptions})
    monkeypatch.setattr(group_waits, "ray", fake_ray)
    with pytest.raises(UpdateFailed, match="backward failed on rank 1") as raised:
        pull_rank0(made, [], "torch", timeout_s=0.2)
    assert raised.value.replica_rank == 1 and "get_state" not in called and not made.alive


def test_settling_is_skipped_when_no_step_ran_on_a_step_stream(calls: Calls) -> None:
    made = group("g", 2, alive=True)
    made.actors = []  # any call would fail
    made.settle_steps(1.0)  # nothing to settle: no round trip
