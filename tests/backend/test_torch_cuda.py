"""Torch backend on a CUDA device: device moves, GradScaler mixed precision, accumulators, snapshots.

Skipped on machines without CUDA.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

from fe_ray.backend import get_backend  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import torch_linear, torch_sgd, weights  # noqa: E402

BACKEND = get_backend("torch")
DEVICE = BACKEND.get_device()
W0 = np.array([1.0, 2.0, 3.0])


def state() -> dict:
    return {"mode": "train", "epoch": 1, "ds_id": "", "warmup": False, "req_grad": True, "deferred": {},
            "eager": False, "grad_reducer": None}


def chain(model, **kwargs):
    ops = [ModelOp(model=model, inputs="x", outputs="pred"), MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
           UpdateOp(model=model, loss_name="mse", **kwargs)]
    for op in ops:
        op.build("torch", DEVICE)
    return ops


def data(x, y):
    return {"x": np.array([x], dtype=np.float32), "y": np.array([[y]], dtype=np.float32)}


def test_context_moves_model_and_optimizer_state() -> None:
    model = torch_linear("adam")
    BACKEND.update_model(model, [torch.ones(1, 3)])  # create Adam state on the CPU
    BACKEND.enter_context([model], "train", DEVICE)
    assert model.weight.device.type == "cuda"
    assert all(v.device.type == "cuda" for s in model.current_optimizer.state.values() for v in s.values()
               if isinstance(v, torch.Tensor) and v.dim() > 0)
    BACKEND.run_step(chain(model), data([1, 1, 1], 1), state(), {"x", "y"}, {"pred"}, device=DEVICE)
    BACKEND.exit_context([model], "train", DEVICE)
    assert model.weight.device.type == "cpu"


def test_grad_scaler_mixed_precision_step() -> None:
    model = torch_linear(torch_sgd(0.1), mixed_precision=True)
    assert isinstance(model.current_optimizer.scaler, torch.amp.GradScaler)
    BACKEND.enter_context([model], "train", DEVICE)
    # Small values: the initial 2**16 loss scale must not overflow float16 gradients (that step would be skipped).
    out = BACKEND.run_step(chain(model), data([0.01, 0.01, 0.01], 0), state(), {"x", "y"}, {"pred"}, device=DEVICE,
                           mixed_precision=True)
    BACKEND.exit_context([model], "train", DEVICE)
    assert out["pred"].device.type == "cpu"
    assert model.current_optimizer.scaler.get_scale() == 2.0 ** 16  # finite gradients: not skipped
    expected = W0 - 0.1 * 2 * (W0 @ np.full(3, 0.01)) * np.full(3, 0.01)
    np.testing.assert_allclose(weights(model), expected, atol=1e-6)  # the update is unscaled


def test_merge_grad_accumulates_on_device_and_snapshots() -> None:
    model = torch_linear(torch_sgd(0.1))
    ops = chain(model, merge_grad=2)
    BACKEND.enter_context([model], "train", DEVICE)
    BACKEND.run_step(ops, data([1, 1, 1], 1), state(), {"x", "y"}, {"pred"}, device=DEVICE)
    snapshot = ops[2].state_dict()
    assert snapshot["step"] == 1 and isinstance(snapshot["grad_sum"][0], np.ndarray)
    BACKEND.run_step(ops, data([1, 0, 2], 0), state(), {"x", "y"}, {"pred"}, device=DEVICE)
    BACKEND.exit_context([model], "train", DEVICE)
    mean = (10 * np.array([1, 1, 1]) + 14 * np.array([1, 0, 2])) / 2
    np.testing.assert_allclose(weights(model), W0 - 0.1 * mean, atol=1e-5)
    ops[2].load_state_dict(snapshot)
    assert ops[2].state_dict()["step"] == 1


def test_state_snapshot_from_device_restores_on_cpu() -> None:
    model = torch_linear("adam")
    model.to(DEVICE)
    BACKEND.update_model(model, [torch.ones(1, 3, device=DEVICE)])
    snapshot = BACKEND.get_state(model)
    other = torch_linear("adam", weights=(0.0, 0.0, 0.0))
    BACKEND.set_state(other, snapshot)
    np.testing.assert_array_equal(weights(other), weights(model))
    exp_avg = other.current_optimizer.state[other.weight]["exp_avg"]
    np.testing.assert_array_equal(exp_avg.numpy(), model.current_optimizer.state[model.weight]["exp_avg"].cpu())


def test_outputs_are_complete_when_returned() -> None:
    """The outputs' copy to the host finishes before run_step returns: a non_blocking device-to-host copy would
    hand numpy pinned memory the GPU is still writing (the long matmul chain keeps the GPU busy past the return)."""
    from fe_ray.op.tensorop.tensorop import LambdaOp

    x = np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32)

    def chained(a):
        start = a
        for _ in range(30):
            a = torch.tanh(a @ a.T / a.shape[0] ** 0.5) + start  # stays finite and varied (x +- 1)
        return a

    op = LambdaOp(fn=chained, inputs="x", outputs="y")
    op.build("torch", DEVICE)
    out = BACKEND.run_step([op], {"x": x}, {**state(), "req_grad": False}, {"x"}, {"y"}, device=DEVICE)
    got = out["y"].numpy().copy()  # read at once, as a trace would
    expected = chained(torch.from_numpy(x).to(DEVICE)).cpu().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)


def test_snapshot_into_kept_buffers_copies_device_state_straight_into_warm_host_memory() -> None:
    from fe_ray.io.snapshot import SnapshotBuffers
    from fe_ray.summary.state_parts import snapshot_models

    model = torch_linear("adam")
    model.to(DEVICE)
    BACKEND.update_model(model, [torch.ones(1, 3, device=DEVICE)])
    buffers = SnapshotBuffers(2)
    first = snapshot_models([model], buffers=buffers)[model.model_name]
    expected = BACKEND.get_state(model)
    np.testing.assert_array_equal(first["model"]["weight"], expected["model"]["weight"])
    BACKEND.update_model(model, [torch.ones(1, 3, device=DEVICE)])
    second = snapshot_models([model], buffers=buffers)[model.model_name]
    assert np.shares_memory(first["model"]["weight"], second["model"]["weight"])  # the kept buffer, refilled
    other = torch_linear("adam", weights=(0.0, 0.0, 0.0))
    BACKEND.set_state(other, second)
    np.testing.assert_array_equal(weights(other), weights(model))
    side = torch.cuda.Stream()  # training on a stream of its own: the pool threads' copies queue behind its work
    with torch.cuda.stream(side):
        for _ in range(20):
            BACKEND.update_model(model, [torch.ones(1, 3, device=DEVICE)])
        third = snapshot_models([model], buffers=buffers)[model.model_name]
        np.testing.assert_array_equal(third["model"]["weight"], model.weight.detach().cpu().numpy())


def test_a_step_answered_before_its_update_matches_the_whole_step() -> None:
    """start_step on the GPU (as a replica answers the driver): its outputs are on the host and final while the update
    has not run; the update it leaves then makes the same weights and loss scale as run_step, in mixed precision."""
    whole, early = (torch_linear(torch_sgd(0.1), mixed_precision=True) for _ in range(2))
    BACKEND.enter_context([whole, early], "train", DEVICE)
    batch, keys, outputs = data([0.01, 0.02, 0.03], 0.5), {"x", "y"}, {"pred", "mse"}
    expected = BACKEND.run_step(chain(whole), batch, state(), keys, outputs, device=DEVICE, mixed_precision=True)
    out, finish = BACKEND.start_step(chain(early), batch, state(), keys, outputs, device=DEVICE, mixed_precision=True,
                                     tail=1)
    assert {value.device.type for value in out.values()} == {"cpu"}
    np.testing.assert_array_equal(weights(early), W0.astype(np.float32))  # the update is still to come
    for key in outputs:
        np.testing.assert_array_equal(out[key].float().numpy(), expected[key].float().numpy())
    finish()
    BACKEND.exit_context([whole, early], "train", DEVICE)
    assert not np.array_equal(weights(early), W0.astype(np.float32))
    np.testing.assert_array_equal(weights(early), weights(whole))
    assert early.current_optimizer.scaler.get_scale() == whole.current_optimizer.scaler.get_scale()
