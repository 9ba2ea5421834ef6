"""GPU path of the replica and the torch gradient reducer, without Ray (skipped where CUDA is absent).

Two :class:`Replica` objects run in two spawned processes on the same GPU, joined by gloo on CUDA tensors (NCCL
refuses two ranks on one device; fractional-GPU replicas use gloo for the same reason), and must make the same
updates as one in-process CUDA network on the whole batches, in float32 and in mixed precision, whether each step
runs whole or is answered before its weight update (as the step stream runs it: outputs read back to the host after
the forward pass, the backward pass and the update afterwards).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
# FE_RAY_GPU_TEST_ON_CPU=1 runs the same code on the CPU, to debug the test itself on a machine without a GPU.
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() and not os.environ.get("FE_RAY_GPU_TEST_ON_CPU"),
                                reason="needs a CUDA GPU")


def _ops(mixed_precision: bool) -> list[Any]:
    from fe_ray.op.tensorop.loss import MeanSquaredError
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp
    from tests.helpers.models import torch_linear, torch_sgd

    model = torch_linear(torch_sgd(0.05), mixed_precision=mixed_precision)
    if getattr(model.current_optimizer, "scaler", None) is not None:
        # Whether a float16 backward overflows depends on the slice size (a replica's loss is a mean over its slice),
        # so with the default scale of 2**16 the skipped steps differ from one process's; a small scale never skips.
        model.current_optimizer.scaler = torch.amp.GradScaler("cuda", init_scale=8.0)
    return [ModelOp(model=model, inputs="x", outputs="y_pred"), MeanSquaredError(inputs=("y_pred", "y"), outputs="mse"),
            UpdateOp(model=model, loss_name="mse")]


def _batches() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"x": rng.normal(size=(n, 3)).astype(np.float32), "y": rng.normal(size=(n, 1)).astype(np.float32)}
            for n in (4, 5, 1)]


def _check(result: Any) -> Any:
    from fe_ray.distributed.errors import RemoteFailure

    if isinstance(result, RemoteFailure):
        raise result.to_exception()
    return result


def _worker(rank: int, payload: bytes, early: bool, address_out: Any, address_in: Any, out: Any) -> None:
    from fe_ray.distributed.replica import Replica
    from fe_ray.slicer import split_bounds

    try:
        replica = Replica(rank, 2, "torch", payload, 60.0, "gloo")
        info = _check(replica.setup())
        if rank == 0:
            address_out.put(_check(replica.collective_address()))
        _check(replica.init_collective(address_in.get(timeout=120)))  # the driver's role: hand out the address
        _check(replica.configure("train", 1, "", None, False, False))
        for batch in _batches():
            size = len(batch["x"])
            bounds = split_bounds(size, 2)
            start, stop = bounds[rank] if rank < len(bounds) else (0, 1)
            n_local = stop - start if rank < len(bounds) else 0
            piece = {k: v[start:stop] for k, v in batch.items()}
            if early:
                reply = _check(replica.start_run_step(piece, n_local, size))
                assert np.isfinite(reply.value["mse"]).all()
                reply.then()  # what the stream's thread runs once the answer is sent
            else:
                _check(replica.run_step(piece, n_local, size))
        state = _check(replica.get_state())
        out.put((rank, info["device"], state["models"]["linear"]["model"]["weight"]))
    except BaseException as err:  # noqa: BLE001 - report to the parent instead of hanging it
        out.put((rank, "error", repr(err)))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("early", [False, True], ids=["whole steps", "answered before the update"])
@pytest.mark.parametrize("mixed_precision", [False, True])
def test_two_replicas_on_cuda_match_in_process(mixed_precision: bool, early: bool) -> None:
    from fe_ray.distributed.serialization import dumps_ops
    from fe_ray.network import TorchNetwork, collect_models

    ops = _ops(mixed_precision)
    payload = dumps_ops(ops, collect_models(ops))
    ctx = mp.get_context("spawn")
    address_out, out = ctx.Queue(), ctx.Queue()
    address_in = [ctx.Queue(), ctx.Queue()]
    procs = [ctx.Process(target=_worker, args=(rank, payload, early, address_out, address_in[rank], out))
             for rank in range(2)]
    for proc in procs:
        proc.start()
    address = address_out.get(timeout=120)
    for queue in address_in:
        queue.put(address)
    results = {}
    while len(results) < 2:
        item = out.get(timeout=150)
        results[item[0]] = item
    for proc in procs:
        proc.join(timeout=30)
    for _rank, device, weight in results.values():
        assert device != "error", weight
        assert device.startswith("cuda") or not torch.cuda.is_available(), device
    local = TorchNetwork(_ops(mixed_precision))
    for batch in _batches():
        with local(mode="train", epoch=1):
            local.run_step(batch)
    expected = local.models[0].weight.detach().cpu().numpy()
    np.testing.assert_array_equal(results[0][2], results[1][2])
    np.testing.assert_allclose(results[0][2], expected, atol=1e-3 if mixed_precision else 1e-5)
