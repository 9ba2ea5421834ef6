"""System capture/restore and checkpoint files: round trips, configuration checks, corrupt files."""

from __future__ import annotations

import os
import uuid
from typing import Any

import numpy as np
import pytest

from fe_ray.io.state_files import CheckpointError, flatten_state, read_checkpoint, unflatten_state, write_checkpoint
from fe_ray.summary import Summary, System
from fe_ray.trace import Accuracy, EarlyStopping
from tests.estimator_helpers import (
    ToyPipeline,
    classifier_network,
    digits_arrays,
    model_weights,
    tf_mlp,
    torch_mlp,
)


def _system(traces=None, name: str = "mlp", seed: int = 0) -> System:
    train, evaluation = digits_arrays(n_train=32, n_eval=16)
    model = torch_mlp(name=name, seed=seed)
    system = System(classifier_network(model), ToyPipeline(train, evaluation), traces=traces or [], total_epochs=2)
    system.reset("exp")
    return system


def test_flatten_round_trip_preserves_types() -> None:
    state = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), 0: {"step": np.float32(3.0), "b": (0.9, 0.99)},
             "groups": [{"lr": 1e-3, "params": [0, 1], "name": None, "flag": True}], "inf": float("inf")}
    arrays: dict = {}
    node = flatten_state(state, arrays)
    back = unflatten_state(node, arrays)
    assert set(back) == {"w", 0, "groups", "inf"}
    np.testing.assert_array_equal(back["w"], state["w"])
    assert isinstance(back[0]["step"], np.float32) and back[0]["b"] == (0.9, 0.99)
    assert back["groups"] == state["groups"] and back["inf"] == float("inf")
    with pytest.raises(TypeError, match="model 'm'"):
        flatten_state({"bad": object()}, {}, where="model 'm'")


@pytest.mark.parametrize("where", ["local", "memory"])
def test_save_and_load_state_round_trip(tmp_path, where: str) -> None:
    directory = str(tmp_path / "ckpt") if where == "local" else f"memory://sys-{uuid.uuid4().hex}"
    accuracy = Accuracy("y", "y_pred")
    system = _system([accuracy])
    accuracy.correct, accuracy.total = 3, 4
    system.global_step, system.epoch_idx, system.mode, system.batch_idx = 7, 2, "train", 3
    system.write_summary("loss", 0.25)
    # Graphs traces add (per-class curves and the like): one Summary, and a list of them.
    curve = Summary("curve")
    curve.history["eval"]["recall"].update({2: 0.5, 4: np.float32(0.75)})
    per_class = [Summary(f"class {label}") for label in range(2)]
    for label, graph in enumerate(per_class):
        graph.history["eval"]["ce"][4] = float(label)
    system.add_graph("curve", curve)
    system.add_graph("per_class", per_class)
    saved = model_weights(system.network.models[0])
    system.save_state(directory)
    if where == "local":
        assert sorted(os.listdir(directory)) == ["models", "objects.pkl", "system.json"]
        assert sorted(os.listdir(os.path.join(directory, "models"))) == ["mlp.json", "mlp.npz"]

    accuracy2 = Accuracy("y", "y_pred")
    other = _system([accuracy2], seed=1)
    assert not np.allclose(model_weights(other.network.models[0])[0], saved[0])
    other.load_state(directory)
    for a, b in zip(model_weights(other.network.models[0]), saved):
        np.testing.assert_array_equal(a, b)
    assert (other.global_step, other.epoch_idx, other.mode, other.batch_idx) == (7, 2, "train", 3)
    assert (accuracy2.correct, accuracy2.total) == (3, 4)
    assert other.summary.history["train"]["loss"] == {7: 0.25}
    assert other.exp_id == system.exp_id
    assert sorted(other.custom_graphs) == ["curve", "per_class"]
    assert [graph.state_dict() for graph in other.custom_graphs["curve"]] == [curve.state_dict()]
    assert [graph.state_dict() for graph in other.custom_graphs["per_class"]] == [g.state_dict() for g in per_class]


def test_capture_is_a_copy() -> None:
    accuracy = Accuracy("y", "y_pred")
    system = _system([accuracy])
    payload = system.capture_state()
    accuracy.correct = 99
    system.write_summary("late", 1)
    assert payload["traces"][0]["state"]["correct"] == 0
    assert "late" not in payload["summary"]["history"].get("train", {})


def test_config_mismatch_names_what_differs(tmp_path) -> None:
    directory = str(tmp_path / "ckpt")
    _system([Accuracy("y", "y_pred")]).save_state(directory)
    with pytest.raises(ValueError, match=r"traces: checkpoint has \['Accuracy'\], this run has \['EarlyStopping'\]"):
        _system([EarlyStopping()]).load_state(directory)
    with pytest.raises(ValueError, match=r"models: checkpoint has \['mlp'\], this run has \['other'\]") as named:
        _system([Accuracy("y", "y_pred")], name="other").load_state(directory)
    assert "model_name=" not in str(named.value)  # the hint below is for auto-generated names only
    _system(name="model").save_state(str(tmp_path / "auto"))
    # A run repeated in the same process builds "model1" where the first built "model": say how to keep names.
    with pytest.raises(ValueError, match=r"this run has \['model1'\].*a rerun notebook cell.*pass model_name= to "
                                         r"fe.build"):
        _system(name="model1").load_state(str(tmp_path / "auto"))


def test_config_mismatch_reordered_ops(tmp_path) -> None:
    import fe_ray as fe
    from fe_ray.op.tensorop.loss import CrossEntropy
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp

    directory = str(tmp_path / "ckpt")
    _system().save_state(directory)
    model = torch_mlp()
    train, evaluation = digits_arrays(n_train=32, n_eval=16)
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="y_pred"), UpdateOp(model=model, loss_name="ce"),
                              CrossEntropy(inputs=("y_pred", "y"), outputs="ce")])
    system = System(network, ToyPipeline(train, evaluation))
    before = model_weights(model)
    with pytest.raises(ValueError, match="network: checkpoint has .*'CrossEntropy', 'UpdateOp'.*'UpdateOp', 'Cross"):
        system.load_state(directory)
    for a, b in zip(model_weights(model), before):  # nothing was modified
        np.testing.assert_array_equal(a, b)


def _system_of(model: Any) -> System:
    train, evaluation = digits_arrays(n_train=32, n_eval=16)
    return System(classifier_network(model), ToyPipeline(train, evaluation))


def test_a_changed_optimizer_or_architecture_is_refused_untouched(tmp_path) -> None:
    import torch

    import fe_ray as fe

    directory = str(tmp_path / "ckpt")
    _system().save_state(directory)  # torch_mlp: Adam, Linear(64, 16) -> Linear(16, 10)
    sgd = fe.build(lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(),
                                               torch.nn.Linear(16, 10), torch.nn.Softmax(dim=-1)),
                   optimizer_fn=lambda p: torch.optim.SGD(p, lr=0.1), model_name="mlp")
    before = model_weights(sgd)
    with pytest.raises(ValueError, match=r"model 'mlp''s optimizer: checkpoint has \['Adam'\], this run has "
                                         r"\['SGD'\].*use a new directory"):
        _system_of(sgd).load_state(directory)
    for a, b in zip(model_weights(sgd), before):  # nothing was modified
        np.testing.assert_array_equal(a, b)
    wider = fe.build(lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(),
                                                 torch.nn.Linear(16, 12), torch.nn.Softmax(dim=-1)),
                     optimizer_fn="adam", model_name="mlp")
    with pytest.raises(ValueError, match=r"model 'mlp''s weights: checkpoint has 4 tensors, this run has 4; first "
                                         r"difference at entry 2: checkpoint \['3.weight', 10, 16\], this run "
                                         r"\['3.weight', 12, 16\]"):
        _system_of(wider).load_state(directory)


def test_a_changed_keras_architecture_is_refused(tmp_path) -> None:
    import keras

    import fe_ray as fe

    directory = str(tmp_path / "ckpt")
    _system_of(tf_mlp()).save_state(directory)
    wider = fe.build(lambda: keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                               keras.layers.Dense(32, "relu"), keras.layers.Dense(10, "softmax")]),
                     optimizer_fn="adam", model_name="mlp")
    with pytest.raises(ValueError, match=r"model 'mlp''s weights: .*entry 0: checkpoint \[64, 16\], this run "
                                         r"\[64, 32\]"):
        _system_of(wider).load_state(directory)
    _system_of(tf_mlp()).load_state(directory)  # the same architecture in a new model (new layer names) loads


def test_a_checkpoint_without_model_layouts_still_loads() -> None:
    # Checkpoints written before the fingerprint held the models' layouts are checked without them.
    from fe_ray.summary.system import LAYOUTS_KEY

    payload = _system().capture_state()
    del payload["config"][LAYOUTS_KEY]
    _system().restore_state(payload)


@pytest.mark.parametrize("victim, damage", [("models/mlp.npz", "truncate"), ("objects.pkl", "truncate"),
                                            ("system.json", "garbage"), ("objects.pkl", "delete"),
                                            ("models/mlp.json", "delete")])
def test_corrupt_checkpoint_names_the_file(tmp_path, victim: str, damage: str) -> None:
    directory = str(tmp_path / "ckpt")
    _system().save_state(directory)
    path = os.path.join(directory, victim)
    if damage == "delete":
        os.remove(path)
    elif damage == "garbage":
        with open(path, "w") as file:
            file.write("{not json")
    else:
        with open(path, "rb+") as file:
            file.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CheckpointError, match=victim.replace(".", r"\.")):
        _system().load_state(directory)


def test_write_and_read_checkpoint_payload(tmp_path) -> None:
    payload = _system().capture_state()
    write_checkpoint(payload, str(tmp_path))
    back = read_checkpoint(str(tmp_path))
    assert set(back) == set(payload)
    assert back["config"] == payload["config"] and back["system"] == payload["system"]


def test_capture_into_buffers_is_a_snapshot_that_reuses_its_memory() -> None:
    import torch

    from fe_ray.backend import get_backend
    from fe_ray.io.snapshot import SnapshotBuffers

    system = _system()
    model = system.network.models[0]
    assert get_backend(model).state_is_view(model)  # CPU torch: copy=False gives views of the live tensors
    buffers = SnapshotBuffers(2)
    first = system.capture_state(buffers=buffers)
    before = [np.array(a) for a in first["models"]["mlp"]["model"].values()]
    with torch.no_grad():
        for param in model.parameters():
            param.add_(1.0)  # what the next optimizer step does in place
    for kept, now in zip(before, first["models"]["mlp"]["model"].values()):
        np.testing.assert_array_equal(kept, now)
    second = system.capture_state(buffers=buffers)  # the previous snapshot is done with: same memory
    for a, b, live in zip(first["models"]["mlp"]["model"].values(), second["models"]["mlp"]["model"].values(),
                          model.state_dict().values()):
        assert np.shares_memory(a, b)
        np.testing.assert_array_equal(b, live.numpy())
    # Restoring the buffered snapshot gives the same state as a plain copying capture.
    plain = system.capture_state()
    system.restore_state(second)
    for a, b in zip(model_weights(model), plain["models"]["mlp"]["model"].values()):
        np.testing.assert_array_equal(a, b)
    buffers.clear()


def test_tf_states_are_never_views() -> None:
    from fe_ray.backend import get_backend
    from tests.estimator_helpers import tf_mlp

    model = tf_mlp()
    assert get_backend(model).state_is_view(model) is False


def test_dataset_states_travel_in_the_checkpoint(tmp_path) -> None:
    from fe_ray.dataset import NumpyDataset
    from fe_ray.pipeline import Pipeline

    class Curriculum(NumpyDataset):
        def __init__(self, data: dict) -> None:
            super().__init__(data)
            self.level = 0

        def state_dict(self) -> dict:
            return {"level": self.level, "seen": np.arange(3) * self.level}

        def load_state_dict(self, state: dict) -> None:
            self.level = int(state["level"])
            assert state["seen"].tolist() == [0, self.level, 2 * self.level]

    def make() -> tuple[System, Curriculum]:
        train, evaluation = digits_arrays(n_train=32, n_eval=16)
        dataset = Curriculum(train)
        pipeline = Pipeline(train_data=dataset, eval_data=NumpyDataset(evaluation), batch_size=8, shuffle_seed=0)
        return System(classifier_network(torch_mlp()), pipeline, total_epochs=2), dataset

    system, dataset = make()
    dataset.level = 4
    system.save_state(str(tmp_path))
    other, restored = make()
    other.load_state(str(tmp_path))
    assert restored.level == 4
