"""fe_ray.backend's torch helpers called the way a FastEstimator 1.7 user calls them (fe.backend.*)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch

import fe_ray as fe
from fe_ray import backend as fe_backend


def _linear(optimizer: Any = "sgd", name: str | None = None) -> torch.nn.Module:
    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Linear(4, 2)

    return fe.build(make, optimizer, model_name=name)


def _train_once(model: torch.nn.Module) -> None:
    """One Adam/SGD step so the optimizer has state worth saving."""
    loss = model(torch.ones(3, 4)).pow(2).mean()
    fe_backend.update_model(model, fe_backend.get_gradient(loss, list(model.parameters())))


class _TwoArgs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(4, 1)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.dense(a) - self.dense(b)


class _OneListArg(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(4, 1)

    def forward(self, pair: list[torch.Tensor]) -> torch.Tensor:
        return self.dense(pair[0]) + 2 * self.dense(pair[1])


def test_feed_forward_takes_several_inputs_as_positional_arguments() -> None:
    model = fe.build(_TwoArgs, "adam")
    a, b = np.ones((2, 4), dtype=np.float32), np.zeros((2, 4), dtype=np.float32)
    out = fe_backend.feed_forward(model, a, b, training=False)
    expected = model.dense(torch.as_tensor(a)) - model.dense(torch.as_tensor(b))
    assert torch.allclose(out, expected)
    assert not model.training


def test_feed_forward_passes_a_single_list_as_one_argument() -> None:
    model = fe.build(_OneListArg, "adam")
    a, b = torch.ones(2, 4), torch.zeros(2, 4)
    out = fe_backend.feed_forward(model, [a, b])
    assert torch.allclose(out, model.dense(a) + 2 * model.dense(b))
    assert model.training


def test_feed_forward_without_input_is_named() -> None:
    with pytest.raises(TypeError, match="at least one input"):
        fe_backend.feed_forward(_linear())


@pytest.mark.parametrize("extension", [".pt", ".pth"])
def test_load_model_reads_a_fastestimator_optimizer_file(tmp_path: Any, extension: str) -> None:
    """FastEstimator writes `<stem>_opt.pt` (whatever the weights' extension) holding the plain state dict."""
    source = _linear("adam", name="src")
    _train_once(source)
    weights = str(tmp_path / f"fe_model{extension}")
    torch.save(source.state_dict(), weights)
    torch.save(source.current_optimizer.state_dict(), str(tmp_path / "fe_model_opt.pt"))
    target = _linear("adam", name="dst")
    fe_backend.load_model(target, weights, load_optimizer=True)
    assert torch.equal(target.weight, source.weight)
    saved = source.current_optimizer.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(target.current_optimizer.state_dict()["state"][0]["exp_avg"], saved)


def test_save_model_writes_files_fastestimator_loads(tmp_path: Any) -> None:
    model = _linear("adam", name="net")
    _train_once(model)
    path = fe_backend.save_model(model, str(tmp_path), save_optimizer=True)
    assert sorted(os.listdir(tmp_path)) == ["net.pt", "net_opt.pt"]
    # What FastEstimator's load_model does with the files: load_state_dict of each, as they are.
    fresh = torch.nn.Linear(4, 2)
    fresh.load_state_dict(torch.load(path, weights_only=True))
    optimizer = torch.optim.Adam(fresh.parameters())
    optimizer.load_state_dict(torch.load(str(tmp_path / "net_opt.pt"), weights_only=True))
    assert torch.equal(optimizer.state_dict()["state"][0]["exp_avg"],
                       model.current_optimizer.state_dict()["state"][0]["exp_avg"])


def test_load_model_still_reads_the_optimizer_files_of_earlier_fe_ray_versions(tmp_path: Any) -> None:
    source = _linear("adam", name="old")
    _train_once(source)
    weights = fe_backend.save_model(source, str(tmp_path))
    torch.save({"optimizer": source.current_optimizer.state_dict(), "scaler": None}, str(tmp_path / "old_opt.pt"))
    target = _linear("adam", name="new")
    fe_backend.load_model(target, weights, load_optimizer=True)
    assert torch.equal(target.current_optimizer.state_dict()["state"][0]["exp_avg"],
                       source.current_optimizer.state_dict()["state"][0]["exp_avg"])


def test_build_loads_weights_saved_from_a_data_parallel_wrapper(tmp_path: Any) -> None:
    source = torch.nn.Linear(4, 2)
    path = str(tmp_path / "dp.pt")
    torch.save(torch.nn.DataParallel(source).state_dict(), path)  # keys "module.weight", "module.bias"
    model = fe.build(lambda: torch.nn.Linear(4, 2), "adam", weights_path=path)
    assert torch.equal(model.weight, source.weight)


def test_update_model_leaves_weights_with_a_none_gradient_alone() -> None:
    model = _linear("sgd")
    weight, bias = model.weight.detach().clone(), model.bias.detach().clone()
    fe_backend.update_model(model, [None, torch.ones(2)])
    assert torch.equal(model.weight, weight)
    assert torch.allclose(model.bias, bias - 0.01)


def test_update_model_without_optimizer_is_named() -> None:
    model = _linear(None, name="frozen_net")
    with pytest.raises(ValueError, match="'frozen_net'.*no optimizer"):
        fe_backend.update_model(model, [torch.ones(2, 4), torch.ones(2)])


def test_save_model_of_an_unbuilt_model_is_named(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="unbuilt Linear"):
        fe_backend.save_model(torch.nn.Linear(2, 2), str(tmp_path))


def test_backend_losses_give_fastestimators_values() -> None:
    """The values of FastEstimator's documented examples of its backend losses."""
    pred = torch.tensor([[0.1, 0.8, 0.1], [0.9, 0.05, 0.05], [0.1, 0.2, 0.7]])
    labels = torch.tensor([[1], [0], [2]])
    assert fe_backend.sparse_categorical_crossentropy(y_pred=pred, y_true=labels).item() == pytest.approx(0.2284, 1e-3)
    weighted = fe_backend.sparse_categorical_crossentropy(y_pred=pred, y_true=labels, average_loss=False,
                                                          class_weights={1: 2.0, 2: 3.0})
    assert np.allclose(weighted.numpy(), [0.4463, 0.1054, 1.0700], atol=1e-3)
    onehot = torch.tensor([[0, 1, 0], [1, 0, 0], [0, 0, 1]])
    assert fe_backend.categorical_crossentropy(y_pred=pred, y_true=onehot).item() == pytest.approx(0.2284, 1e-3)
    binary = fe_backend.binary_crossentropy(y_pred=torch.tensor([[0.9], [0.2]]), y_true=torch.tensor([[1], [0]]),
                                            average_loss=False)
    assert np.allclose(binary.numpy(), [0.1054, 0.2231], atol=1e-3)
    logits = fe_backend.binary_crossentropy(y_pred=torch.tensor([0.0]), y_true=torch.tensor([1.0]), from_logits=True)
    assert logits.item() == pytest.approx(np.log(2.0), 1e-5)
    true = torch.tensor([[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0]])
    guess = torch.tensor([[0.1, 0.9, 0.05, 0.05], [0.1, 0.2, 0.0, 0.7], [0.0, 0.15, 0.8, 0.05], [1.0, 0.0, 0.0, 0.0]])
    mse = fe_backend.mean_squared_error(y_pred=guess, y_true=true)
    assert np.allclose(mse.numpy(), [0.00625, 0.035, 0.01625, 0.0], atol=1e-5)


def test_backend_losses_name_a_numpy_prediction() -> None:
    with pytest.raises(TypeError, match="binary_crossentropy needs y_pred as a torch or TensorFlow tensor"):
        fe_backend.binary_crossentropy(np.array([0.5]), np.array([1.0]))


def test_to_tensor_can_put_torch_tensors_in_shared_memory() -> None:
    converted = fe_backend.to_tensor({"x": np.ones(3), "name": "a"}, "torch", shared_memory=True)
    assert converted["x"].is_shared()
    assert converted["name"] == "a"


def test_reduce_mean_takes_fastestimators_axis_and_keepdims() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(fe_backend.reduce_mean(x, axis=1), torch.tensor([1.0, 4.0]))
    assert torch.equal(fe_backend.reduce_mean(x, axis=0, keepdims=True), torch.tensor([[1.5, 2.5, 3.5]]))
    assert torch.equal(fe_backend.reduce_mean(x, keepdims=True), torch.tensor([[2.5]]))
    assert torch.equal(fe_backend.reduce_mean(x, axis=[0, 1]), torch.tensor(2.5))


@pytest.mark.parametrize("framework", ["tf", "np"])
def test_reduce_mean_takes_axis_and_keepdims_in_every_framework(framework: str) -> None:
    x = fe_backend.to_tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), framework)
    np.testing.assert_array_equal(np.asarray(fe_backend.reduce_mean(x, axis=1)), [1.0, 4.0])
    np.testing.assert_array_equal(np.asarray(fe_backend.reduce_mean(x, axis=0, keepdims=True)), [[1.5, 2.5, 3.5]])
    np.testing.assert_array_equal(np.asarray(fe_backend.reduce_mean(x, axis=[0, 1])), 2.5)
    assert np.asarray(fe_backend.reduce_mean(x, keepdims=True)).shape == (1, 1)


def test_the_optimizer_file_keeps_a_grad_scaler_and_stays_readable_by_fastestimator(tmp_path: Any) -> None:
    """With loss scaling (mixed precision on CUDA) the scaler's state rides along under one extra key."""
    model = _linear("adam", name="scaled")
    _train_once(model)
    model.current_optimizer.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    weights = fe_backend.save_model(model, str(tmp_path), save_optimizer=True)
    plain = torch.optim.Adam(torch.nn.Linear(4, 2).parameters())
    plain.load_state_dict(torch.load(str(tmp_path / "scaled_opt.pt"), weights_only=True))  # as FastEstimator loads it
    target = _linear("adam", name="target")
    target.current_optimizer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0)
    fe_backend.load_model(target, weights, load_optimizer=True)
    assert target.current_optimizer.scaler.state_dict()["scale"] == 1024.0
    assert torch.equal(target.current_optimizer.state_dict()["state"][0]["exp_avg"],
                       model.current_optimizer.state_dict()["state"][0]["exp_avg"])


def test_to_tensor_turns_python_numbers_into_tensors() -> None:
    scalar = fe_backend.to_tensor(1.5, "torch")
    assert isinstance(scalar, torch.Tensor) and scalar.ndim == 0 and scalar.item() == 1.5
    nested = fe_backend.to_tensor({"steps": [1, 2], "name": "run"}, "torch")
    assert [int(t) for t in nested["steps"]] == [1, 2] and all(isinstance(t, torch.Tensor) for t in nested["steps"])
    assert nested["name"] == "run"
    assert isinstance(fe_backend.to_tensor(3, "np"), np.ndarray)
