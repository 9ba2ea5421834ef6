"""The torch step's fast paths for the usual step (a flat batch of CPU arrays, int64 labels, gradients without a
graph) give what the general paths give, and the general paths still run where the fast ones do not apply."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fe_ray.backend import torch as torch_backend
from fe_ray.backend import torch_losses, torch_step, torch_tensors
from fe_ray.util import map_nested


class _HasNumpy:
    """A foreign tensor: converted through its ``numpy()``."""

    def numpy(self) -> np.ndarray:
        return np.arange(3, dtype=np.float32)


def test_a_flat_batch_converts_as_the_nested_walk_does() -> None:
    tensor = torch.ones(2)
    batch = {"x": np.ones((2, 3), np.float32), "n": np.float64(2.5), "s": "text", "strs": np.array(["a", "b"]),
             "i": 7, "t": tensor, "list": [np.zeros(2), "z"], "tuple": (np.ones(1),), "nested": {"a": np.ones(2)},
             "foreign": _HasNumpy(), "neg": np.arange(4)[::-1]}
    fast = torch_tensors.to_tensor(batch)
    walked = map_nested(torch_tensors._to_tensor_leaf, batch)
    assert list(fast) == list(walked)

    def same(a: Any, b: Any) -> None:
        assert type(a) is type(b)
        if isinstance(a, (dict, list, tuple)):
            for x, y in zip(a.values() if isinstance(a, dict) else a, b.values() if isinstance(b, dict) else b):
                same(x, y)
        elif isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and torch.equal(a, b)
        elif isinstance(a, np.ndarray):
            assert np.array_equal(a, b)
        else:
            assert a == b

    for key in batch:
        same(fast[key], walked[key])
    assert fast["t"] is tensor  # tensors pass through as the same objects
    assert fast["x"].data_ptr() == batch["x"].__array_interface__["data"][0]  # arrays' memory is shared


def _count_moves(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    moved: list[Any] = []
    real = torch_step._to_device

    def counting(data: Any, device: Any) -> Any:
        moved.append(data)
        return real(data, device)

    monkeypatch.setattr(torch_step, "_to_device", counting)
    return moved


def test_cpu_tensors_are_not_moved_to_the_cpu_again(monkeypatch: pytest.MonkeyPatch) -> None:
    moved = _count_moves(monkeypatch)
    x = torch.ones(2, 3)
    batch = {"x": x, "pair": [torch.zeros(1), torch.ones(1)], "unused": torch.ones(1)}
    inputs = torch_step._inputs(batch, {}, {"x", "pair", "absent"}, torch.device("cpu"))
    assert inputs["x"] is x  # what .to("cpu") returns for a CPU tensor
    assert moved and isinstance(moved[0], list)  # nested values still take the general path
    assert not any(value is x for value in moved)
    assert set(inputs) == {"x", "pair"}


@pytest.mark.parametrize("device", [torch.device("cpu", 0), "cpu"])
def test_other_device_spellings_still_move_every_input(monkeypatch: pytest.MonkeyPatch, device: Any) -> None:
    # .to("cpu:0") makes a new tensor, so only torch.device("cpu") itself skips the call.
    moved = _count_moves(monkeypatch)
    torch_step._inputs({"x": torch.ones(2), "y": np.zeros(2)}, {}, {"x", "y"}, device)
    assert len(moved) == 2


def test_int64_labels_of_the_right_shape_are_used_as_they_are() -> None:
    pred = torch.softmax(torch.randn(4, 3), dim=1)
    labels = torch.tensor([0, 2, 1, 2])
    assert torch_losses._sparse_labels(pred, labels) is labels
    for other in (labels.reshape(4, 1), labels.int(), labels.reshape(4, 1).to(torch.uint8)):
        converted = torch_losses._sparse_labels(pred, other)
        assert converted.dtype == torch.int64 and converted.shape == (4,) and torch.equal(converted, labels)
    pixels = torch.softmax(torch.randn(2, 3, 4, 5), dim=1)
    assert torch_losses._sparse_labels(pixels, torch.zeros(2, 1, 4, 5, dtype=torch.int64)).shape == (2, 4, 5)
    expected = -torch.log(pred[torch.arange(4), labels]).mean()
    for given in (labels, labels.reshape(4, 1).int()):
        assert torch.allclose(torch_backend.cross_entropy(pred, given, form="sparse"), expected)
    with pytest.raises(ValueError, match=r"labels shaped \(4,\) \(or with a size-1 class axis\)"):
        torch_losses._sparse_labels(pred, torch.zeros(5, dtype=torch.int64))


def test_losses_leave_autocast_whatever_the_device_type() -> None:
    pred = torch.softmax(torch.randn(4, 3), dim=1).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch_losses._no_autocast(pred):
            assert not torch.is_autocast_enabled("cpu")
        loss = torch_backend.cross_entropy(pred, torch.tensor([0, 1, 2, 0]), form="sparse")
    assert loss.dtype == torch.float32
    with torch_losses._no_autocast(pred), torch_losses._no_autocast(pred):  # the shared no-op context nests
        pass


def _model_with_optimizer() -> torch.nn.Module:
    model = torch.nn.Linear(2, 1)
    model.model_name = "m"
    model.current_optimizer = object()  # never stepped here (deferred): a real one would import torch._dynamo
    return model


def test_gradients_without_a_graph_become_the_weights_grads_as_they_are() -> None:
    model = _model_with_optimizer()
    params = list(model.parameters())
    grads = [torch.full_like(p, 0.5) for p in params]
    deferred: dict[str, Any] = {}
    torch_backend.update_model(model, grads, defer=True, deferred=deferred, variables=params)
    assert all(p.grad is g for p, g in zip(params, grads))
    # A second update in the same step sums out of place: the first gradients keep their values.
    torch_backend.update_model(model, grads, defer=True, deferred=deferred, variables=params)
    assert all(torch.equal(p.grad, 2 * g) and torch.equal(g, torch.full_like(g, 0.5)) for p, g in zip(params, grads))
    assert list(deferred) == ["m"] and len(deferred["m"]) == 1  # one optimizer step at the step's end


def test_gradients_with_a_graph_are_detached_before_they_are_applied() -> None:
    model = _model_with_optimizer()
    params = list(model.parameters())
    source = torch.ones(1, requires_grad=True)
    grads = [torch.ones_like(p) * source for p in params]  # higher-order gradients carry a graph
    torch_backend.update_model(model, grads, defer=True, deferred={}, variables=params)
    assert all(p.grad is not g and not p.grad.requires_grad and torch.equal(p.grad, g.detach())
               for p, g in zip(params, grads))
