"""Data-parallel steps on 2 replicas equal in-process steps on the same full batches (torch and TF)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import to_number  # noqa: E402
from fe_ray.op.numpyop import LambdaOp as NumpyLambda  # noqa: E402
from fe_ray.op.tensorop import LambdaOp as TensorLambda  # noqa: E402
from fe_ray.op.tensorop.gradient import GradientOp  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, weights  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
# Even (4), uneven (5: slices of 3 and 2), smaller than the number of replicas (1), and odd again (3).
BATCH_SIZES = (4, 5, 1, 3)


def make_network(framework: str, merge_grad: int = 1, **kwargs: Any) -> tuple[Any, Any]:
    model = linear(framework, lr=0.05)
    ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
           MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse", merge_grad=merge_grad)]
    pops = NumpyLambda(lambda pred: pred * 2.0, inputs="y_pred", outputs="y_double")
    return fe.Network(ops, pops=pops, **kwargs), model


def make_batches(sizes: tuple[int, ...] = BATCH_SIZES, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(size, 3)).astype(np.float32), "y": rng.normal(size=(size, 1)).astype(np.float32)}
            for size in sizes]


def train_step_both(local: Any, dist: Any, batch: dict[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One training step of the in-process and of the distributed network on the same batch: (expected, got)."""
    with local(mode="train", epoch=1):
        expected = local.run_step(batch)
    with dist(mode="train", epoch=1):
        got = dist.run_step(batch)
    return expected, got


def assert_replicas_match(dist: Any, local_model: Any, step: int) -> None:
    """The replicas' weights are bit-identical, and those of the in-process model after the same steps."""
    replicas = replica_weights(dist)
    np.testing.assert_array_equal(replicas[0], replicas[1])
    np.testing.assert_allclose(replicas[0], weights(local_model), atol=1e-5, err_msg=f"step {step}")


def replica_weights(network: Any) -> list[np.ndarray]:
    """The first weight tensor of every replica, read from their exact state snapshots."""
    group = network._holder.group
    states = group.call("get_state")
    out = []
    for state in states:
        snapshot = next(iter(state["models"].values()))["model"]
        first = snapshot[next(iter(snapshot))] if isinstance(snapshot, dict) else snapshot[0]
        out.append(np.asarray(first).reshape(-1))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("framework, transport", [("torch", "compiled"), ("torch", "inline"), ("torch", "object_store"),
                                                  ("torch", "stream"), ("tf", "compiled"), ("tf", "inline"),
                                                  ("tf", "stream")])
def test_training_steps_equal_in_process(ray_session: None, monkeypatch: pytest.MonkeyPatch, framework: str,
                                         transport: str) -> None:
    """Every way a step's slices can travel: a compiled graph's channels, a step stream, or actor calls with the
    slices inline or (above Ray's inline size) through the object store."""
    if transport == "object_store":  # every slice through ray.put (the path of slices above Ray's inline size)
        from fe_ray.distributed import coordinator

        monkeypatch.setattr(coordinator, "INLINE_SLICE_BYTES", -1)
    local, local_model = make_network(framework)
    dist, dist_model = make_network(framework, num_replicas=2,
                                    step_transport=transport if transport in ("compiled", "stream") else "calls")
    try:
        dist.start()
        # No silent fallback to actor calls.
        assert dist._holder.group.transport == (transport if transport in ("compiled", "stream") else "calls")
        for step, batch in enumerate(make_batches()):
            expected, got = train_step_both(local, dist, batch)
            size = len(batch["x"])
            # Outputs in input order, pops run on the merged batch, and the loss is the slice-weighted mean.
            np.testing.assert_allclose(got["y_pred"], to_number(expected["y_pred"]), atol=1e-5)
            np.testing.assert_allclose(got["y_double"], to_number(expected["y_double"]), atol=1e-5)
            np.testing.assert_allclose(got["mse"], to_number(expected["mse"]), rtol=1e-5, atol=1e-5)
            assert tuple(got["mse"].shape) == tuple(expected["mse"].shape) == ()  # a scalar stays one (not (1,))
            # Traces get what in-process traces get: the framework's tensors (numpy before).
            for key in ("y_pred", "mse"):
                assert type(got[key]).__module__.split(".")[0] == type(expected[key]).__module__.split(".")[0], key
            if size < 4:  # no replica takes a single sample of a larger batch: one replica runs it all
                assert dist.replica_outputs == {}
            else:
                per_replica = dist.replica_outputs["mse"]
                n0 = (size + 1) // 2
                weighted = (per_replica[0] * n0 + per_replica[1] * (size - n0)) / size
                np.testing.assert_allclose(got["mse"], weighted, rtol=1e-6)
            assert_replicas_match(dist, local_model, step)
        # The driver's model is synced at the end of every training epoch.
        np.testing.assert_allclose(weights(dist_model), weights(local_model), atol=1e-5)
        # transform (no update) matches too, in order, for a single batch and a list of batches.
        batches = make_batches((5, 2, 3), seed=1)
        expected_list = local.transform(batches, mode="infer")
        got_list = dist.transform(batches, mode="infer")
        for exp, out in zip(expected_list, got_list):
            np.testing.assert_allclose(out["y_pred"], to_number(exp["y_pred"]), atol=1e-5)
        single = dist.transform(batches[0], mode="infer")
        np.testing.assert_allclose(single["y_double"], to_number(expected_list[0]["y_double"]), atol=1e-5)
    finally:
        dist.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_merge_grad_and_lr_change_equal_in_process(ray_session: None, framework: str) -> None:
    local, local_model = make_network(framework, merge_grad=2)
    dist, dist_model = make_network(framework, merge_grad=2, num_replicas=2)
    try:
        for step, batch in enumerate(make_batches((4, 5, 3, 1, 6), seed=2)):
            if step == 3:  # a trace changing the learning rate on the driver reaches the replicas
                for model in (local_model, dist_model):
                    fe.backend.set_lr(model, 0.2)
            train_step_both(local, dist, batch)
            assert_replicas_match(dist, local_model, step)
        # The merge_grad accumulator (an op state) lives on the replicas; state_dict reads it from rank 0.
        np.testing.assert_allclose(dist.state_dict()["ops"][2]["state"]["step"],
                                   local.state_dict()["ops"][2]["state"]["step"])
    finally:
        dist.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("framework, transport", [("torch", "calls"), ("tf", "calls"), ("torch", "compiled"),
                                                  ("torch", "stream")])
def test_single_replica_equals_in_process(ray_session: None, framework: str, transport: str) -> None:
    """One replica runs without a gradient reducer (its weighted mean is the identity) and stays exact."""
    local, local_model = make_network(framework, merge_grad=2)
    dist, dist_model = make_network(framework, merge_grad=2, num_replicas=1, step_transport=transport)
    try:
        for batch in make_batches():
            expected, got = train_step_both(local, dist, batch)
            np.testing.assert_allclose(got["mse"], to_number(expected["mse"]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(weights(dist_model), weights(local_model), atol=1e-6)
        assert dist.replica_info()[0]["rank"] == 0
    finally:
        dist.shutdown()



@pytest.mark.timeout(120)
def test_user_slicers_on_replicas_equal_in_process(ray_session: None) -> None:
    """The user's slicers run on the driver as in process; each of their minibatches is then split across the
    replicas, and the unsliced outputs and the weights are the in-process Network's."""
    from fe_ray.slicer import ChunkSlicer, MeanUnslicer

    def slicers() -> list[Any]:
        return [ChunkSlicer(n_chunks=2, slice=["x", "y"], unslice="y_pred"), MeanUnslicer(unslice="mse")]

    local, local_model = make_network("torch", slicers=slicers())
    dist, _ = make_network("torch", slicers=slicers(), num_replicas=2)
    try:
        for step, batch in enumerate(make_batches((8, 6, 5), seed=3)):  # minibatches of 4, 3 and 3 + 2 samples
            with local(mode="train", epoch=1, desired_output_keys={"y_pred", "mse"}):
                expected = local.run_step(batch)
            with dist(mode="train", epoch=1, desired_output_keys={"y_pred", "mse"}):
                got = dist.run_step(batch)
            np.testing.assert_allclose(got["y_pred"], to_number(expected["y_pred"]), atol=1e-5)
            np.testing.assert_allclose(got["mse"], to_number(expected["mse"]), rtol=1e-5)
            assert_replicas_match(dist, local_model, step)
    finally:
        dist.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gradients_clipped_between_gradient_op_and_update_op_equal_in_process(ray_session: None,
                                                                               framework: str) -> None:
    """A GradientOp's gradients w.r.t. the weights are the whole batch's on replicas too, so clipping them before
    ``UpdateOp(gradients=...)`` updates as one process does (clipping each slice's gradients before averaging
    them did not)."""
    def network(**kwargs: Any) -> tuple[Any, Any]:
        model = linear(framework, lr=0.05)
        ops = [ModelOp(model=model, inputs="x", outputs="y_pred"),
               MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
               GradientOp(finals="mse", model=model, outputs="grads"),
               TensorLambda(lambda grads: [fe.backend.clip_by_value(g, -1.0, 1.0) for g in grads], inputs="grads",
                            outputs="clipped"),
               UpdateOp(model=model, loss_name="mse", gradients="clipped")]
        return fe.Network(ops, **kwargs), model

    local, local_model = network()
    dist, _ = network(num_replicas=2)
    try:
        for step, batch in enumerate(make_batches((4, 5, 1, 6, 3), seed=4)):
            train_step_both(local, dist, batch)
            assert_replicas_match(dist, local_model, step)
    finally:
        dist.shutdown()


def _ones_dense() -> Any:
    import keras

    return keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones"),
                             keras.layers.Activation("linear", dtype="float32")])


@pytest.mark.timeout(120)
def test_loss_scaled_steps_equal_in_process(ray_session: None) -> None:
    """TF mixed precision on 2 replicas takes the steps one process takes. The first batch (errors 1.5, 1.5, 0, 0;
    slices of 2) gives each sample a float16 gradient of 0.75 x 2**15 in-process, and the kernel's sums 49,152;
    a replica differentiating its own slice's mean loss doubles that to 98,304, past float16's 65,504, and skipped
    the step (halving the loss scale) before replicas weighted their losses by their share of the batch."""
    rng = np.random.default_rng(3)
    batches = [{"x": np.ones((4, 1), np.float32), "y": np.array([[-0.5], [-0.5], [1.0], [1.0]], np.float32)},
               # Uneven slices (3 + 2), then a batch one replica runs; values small enough to stay finite in-process.
               *({"x": rng.uniform(0.5, 1.0, (size, 1)).astype(np.float32),
                  "y": rng.uniform(0.0, 0.5, (size, 1)).astype(np.float32)} for size in (5, 3))]
    results = []
    for num_replicas in (None, 2):
        model = fe.build(model_fn=_ones_dense, optimizer_fn="sgd", model_name="mp", mixed_precision=True)
        ops = [ModelOp(model=model, inputs="x", outputs="y_pred"), MeanSquaredError(inputs=("y_pred", "y"),
                                                                                    outputs="mse"),
               UpdateOp(model=model, loss_name="mse")]
        network = fe.Network(ops, num_replicas=num_replicas)
        try:
            for batch in batches:
                with network(mode="train", epoch=1):
                    network.run_step(batch)
            if num_replicas:
                network.sync_models_to_driver()
            optimizer = model.current_optimizer
            results.append((weights(model), int(optimizer.iterations.numpy()), float(optimizer.dynamic_scale.numpy())))
        finally:
            if num_replicas:
                network.shutdown()
    (local_w, local_iterations, local_scale), (dist_w, dist_iterations, dist_scale) = results
    assert (local_iterations, local_scale) == (3, 2.0 ** 15)  # no overflow in-process
    assert (dist_iterations, dist_scale) == (local_iterations, local_scale)
    np.testing.assert_allclose(dist_w, local_w, atol=1e-4)
