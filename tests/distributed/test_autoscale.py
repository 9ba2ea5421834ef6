"""Replicas on clusters of several nodes, and ``wait_for_nodes``: replicas wait for nodes that join the cluster later
(what an autoscaler does). On a real Ray cluster started in this process (``ray.cluster_utils.Cluster``) that begins
with one 1-CPU node."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.distributed import PlacementError
from fe_ray.distributed.options import NODE_WAIT_TIMEOUT_S, PLACEMENT_TIMEOUT_S
from fe_ray.op.tensorop.loss import MeanSquaredError
from fe_ray.op.tensorop.model import ModelOp, UpdateOp
from tests.helpers.models import linear, weights

ray = pytest.importorskip("ray")


def make_network(**kwargs: Any) -> Any:
    model = linear("torch", lr=0.05)
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse")]
    return fe.Network(ops, **kwargs)


def test_placement_timeout_defaults_to_longer_when_waiting_for_nodes() -> None:
    assert make_network(num_replicas=2).placement_timeout_s == PLACEMENT_TIMEOUT_S == 60
    assert make_network(num_replicas=2, wait_for_nodes=True).placement_timeout_s == NODE_WAIT_TIMEOUT_S
    assert make_network(num_replicas=2, wait_for_nodes=True, placement_timeout_s=5).placement_timeout_s == 5
    with pytest.raises(TypeError, match=r"wait_for_nodes must be True .* or False .*got 'yes'"):
        make_network(num_replicas=2, wait_for_nodes="yes")
    with pytest.raises(ValueError, match=r"need num_replicas"):
        make_network(wait_for_nodes=True)


def test_a_node_without_fe_ray_is_named_with_the_fix() -> None:
    from fe_ray.distributed.supervisor import ReplicaGroup

    group = ReplicaGroup(2, "torch", b"", {"CPU": 1.0}, 1.0, 1.0, 1.0, None)
    err = group._died_error(1, "setting up", RuntimeError("The actor died: ModuleNotFoundError: No module named "
                                                          "'fe_ray'"))
    assert err.rank == 1 and err.cause_type == "ModuleNotFoundError" and not group.alive
    assert "could not import fe_ray on its node while setting up" in str(err) and "--working-dir" in str(err)
    other = group._died_error(0, "stepping", RuntimeError("killed"))
    assert "could not import" not in str(other) and "ran out of memory" in str(other)


@pytest.fixture(scope="module")
def one_node_cluster() -> Iterator[Any]:
    """A Ray cluster of one 1-CPU node, this process its driver; tests add nodes to it."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, connect=True,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.timeout(60)
def test_a_cluster_too_small_fails_fast_and_names_wait_for_nodes(one_node_cluster: Any) -> None:
    from fe_ray.distributed import cluster

    start = time.monotonic()
    with pytest.raises(PlacementError, match=r"the cluster has only 1 CPU in total.*pass wait_for_nodes=True"):
        cluster.reserve(2, {"CPU": 1.0}, timeout_s=30)
    assert time.monotonic() - start < 10


@pytest.mark.timeout(60)
def test_waiting_for_nodes_that_do_not_come_times_out_naming_the_shortfall(
        one_node_cluster: Any, caplog: pytest.LogCaptureFixture) -> None:
    from fe_ray.distributed import cluster

    with caplog.at_level(logging.WARNING, logger="fe_ray"):
        with pytest.raises(PlacementError, match=r"not placed within 2s while waiting for nodes, and the cluster has "
                                                 r"only 1 CPU in total.*raise placement_timeout_s"):
            cluster.reserve(2, {"CPU": 1.0}, timeout_s=2, wait_for_nodes=True)
    assert any("waiting up to 2s (placement_timeout_s) for nodes to join" in r.getMessage() for r in caplog.records)
    assert not ray.util.placement_group_table() or all(
        group["state"] == "REMOVED" for group in ray.util.placement_group_table().values())


@pytest.mark.timeout(180)
def test_replicas_wait_for_a_node_that_joins_then_train(one_node_cluster: Any,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Two 1-CPU replicas on a one-CPU cluster: they start once a second node joins, on one node each, and train."""
    network = make_network(num_replicas=2, resources_per_replica={"CPU": 1}, wait_for_nodes=True,
                           placement_timeout_s=120)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            network.start()
        except BaseException as err:  # noqa: BLE001 - re-raised by the test below
            errors.append(err)

    # The driver waits in a thread; the node joins from this (main) thread, as Ray's node start-up requires.
    starter = threading.Thread(target=start, daemon=True)
    with caplog.at_level(logging.WARNING, logger="fe_ray"):
        starter.start()
        try:
            deadline = time.monotonic() + 60
            while not any("nodes to join" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline and not errors, ("the network never said it waits for nodes", errors)
                time.sleep(0.2)
            time.sleep(1.0)
            assert starter.is_alive() and not network.started  # still waiting: the request does not fit one node
            one_node_cluster.add_node(num_cpus=1)
            starter.join(timeout=120)
            assert not errors, errors
            assert network.started
            group = network._holder.group._placement
            nodes = ray.util.placement_group_table(group)["bundles_to_node_id"]
            assert len(set(nodes.values())) == 2, nodes  # one bundle on each node: the new one is used
            before = weights(network.models[0])
            x = np.ones((4, 3), np.float32)
            with network(mode="train", epoch=1):
                out = network.run_step({"x": x, "y": np.zeros((4, 1), np.float32)})
            # The [1, 2, 3] model on ones predicts 6: MSE 36, and the step moved the driver's copy of the weights.
            assert float(out["mse"]) == pytest.approx(36.0)
            network.sync_models_to_driver()
        finally:
            network.shutdown()
    assert not np.allclose(weights(network.models[0]), before)


@pytest.mark.timeout(180)
def test_replicas_start_on_a_cluster_of_several_nodes(one_node_cluster: Any) -> None:
    """A multi-node cluster takes the remote path: replicas import fe_ray themselves (here from the driver's working
    directory, which Ray puts on their import path; on a real cluster the job's working_dir or an install). Ray
    refuses a local directory as an actor's py_modules, which that path passed until 2026-11-26."""
    from fe_ray.distributed import cluster

    if len([node for node in ray.nodes() if node.get("Alive")]) < 2:
        one_node_cluster.add_node(num_cpus=1)
        one_node_cluster.wait_for_nodes()
    assert not cluster._is_local_cluster()
    assert cluster.actor_runtime_env({"env_vars": {"A": "1"}}) == {"env_vars": {"A": "1"}}
    network = make_network(num_replicas=2, resources_per_replica={"CPU": 1}, placement_strategy="STRICT_SPREAD")
    try:
        network.start()
        with network(mode="eval", epoch=1):
            out = network.run_step({"x": np.ones((4, 3), np.float32), "y": np.zeros((4, 1), np.float32)})
        assert float(out["mse"]) == pytest.approx(36.0)
        assert {info["rank"] for info in network.replica_info()} == {0, 1}
    finally:
        network.shutdown()
