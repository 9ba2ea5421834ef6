"""Summary history and System counters."""

from __future__ import annotations

import pickle

from fe_ray.summary import Summary, System


class _Net:
    models: list = []

    def state_dict(self) -> dict:
        return {"ops": [], "slicers": [], "pops": []}


def test_summary_history_defaults_and_pickles() -> None:
    summary = Summary("exp", system_config={"epochs": 2})
    summary.history["train"]["loss"][1] = 0.5
    summary.history["eval"]["accuracy"][10] = 0.9
    clone = pickle.loads(pickle.dumps(summary))
    assert clone.name == "exp" and clone.system_config == {"epochs": 2}
    assert clone.history["train"]["loss"] == {1: 0.5}
    clone.history["test"]["new"][0] = 1  # still a nested defaultdict after unpickling
    assert "test" in clone.history


def test_summary_state_dict_round_trip_and_merge() -> None:
    summary = Summary(None)
    summary.history["train"]["loss"].update({1: 1.0, 2: 0.5})
    state = summary.state_dict()
    assert state["history"] == {"train": {"loss": {1: 1.0, 2: 0.5}}}
    other = Summary("x")
    other.load_state_dict(state)
    assert other.name is None and other.history["train"]["loss"][2] == 0.5
    extra = Summary(None)
    extra.history["train"]["loss"][3] = 0.25
    other.merge(extra)
    assert other.history["train"]["loss"] == {1: 1.0, 2: 0.5, 3: 0.25}


def test_system_counters_and_summary_writes() -> None:
    system = System(network=_Net(), pipeline=object(), total_epochs=3, train_steps_per_epoch=5)
    system.reset("run")
    assert (system.mode, system.global_step, system.epoch_idx, system.batch_idx) == ("train", None, 0, None)
    system.update_global_step()
    system.update_global_step()
    system.update_batch_idx()
    assert system.global_step == 2 and system.batch_idx == 1
    assert system.steps_per_epoch == 5
    system.write_summary("loss", 0.1)
    assert system.summary.history["train"]["loss"] == {2: 0.1}
    graph = Summary("curve")
    graph.history["test"]["x"][0] = 1
    system.add_graph("curve", graph)
    system.summary.history["test"]["accuracy"][2] = 0.5
    system.reset_for_test()
    assert system.mode == "test" and system.epoch_idx == 3
    assert "test" not in system.summary.history and "test" not in graph.history
    assert system.summary.history["train"]["loss"] == {2: 0.1}
    first_id = system.exp_id
    system.reset()
    assert system.exp_id != first_id and not system.summary.history
