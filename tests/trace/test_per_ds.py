"""fe_ray.trace.meta.per_ds: FastEstimator's class decorator making a user's Trace log '<key>|<ds_id>' values."""

from __future__ import annotations

import copy
import types
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.trace import Accuracy, Data, PerDSTrace, Trace
from fe_ray.trace.meta import per_ds
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp


@per_ds
class HitRate(Trace):
    """A t13-style trace: reset in on_epoch_begin, accumulate in on_batch_end, write in on_epoch_end."""

    def on_epoch_begin(self, data: Data) -> None:
        self.hits, self.count = 0, 0

    def on_batch_end(self, data: Data) -> None:
        hit = np.argmax(np.asarray(data["y_pred"]), axis=-1) == np.asarray(data["y"])
        self.hits += int(hit.sum())
        self.count += hit.size
        data.write_per_instance_log("hit", hit)

    def on_epoch_end(self, data: Data) -> None:
        data.write_with_log(self.outputs[0], self.hits / self.count)


@per_ds
class OptOut(Trace):
    def __init__(self, outputs: str, per_ds: bool = True) -> None:
        super().__init__(outputs=outputs)
        self.per_ds = per_ds


class Reads(Trace):
    """Records what it reads at epoch end (it must run after the trace writing its input)."""

    def __init__(self, key: str) -> None:
        super().__init__(inputs=key, mode="eval")
        self.seen: list[Any] = []

    def on_epoch_end(self, data: Data) -> None:
        self.seen.append(data[self.inputs[0]])


def _events(trace: Trace, ds_batches: dict[str, list[dict[str, np.ndarray]]]) -> tuple[Data, dict[str, Any]]:
    """Run one epoch of ``trace`` by hand as the Estimator does: on_ds_begin/end around each dataset's batches."""
    trace.system = types.SimpleNamespace(ds_id="")
    logged: dict[str, Any] = {}
    epoch_data = Data(on_log=logged.__setitem__)
    per_instance: dict[str, Any] = {}
    trace.on_begin(Data())
    trace.on_epoch_begin(Data())
    for ds_id, batches in ds_batches.items():
        trace.system.ds_id = ds_id
        if isinstance(trace, PerDSTrace):
            trace.on_ds_begin(Data())
        for batch in batches:
            data = Data(dict(batch))
            trace.on_batch_end(data)
            per_instance.update(data.read_per_instance_logs())
        if isinstance(trace, PerDSTrace):
            trace.on_ds_end(epoch_data)
    trace.on_epoch_end(epoch_data)
    return epoch_data, {"logged": logged, "per_instance": per_instance}


def _batch(pred: list[int], true: list[int]) -> dict[str, np.ndarray]:
    return {"y_pred": np.eye(3)[pred], "y": np.asarray(true)}


def test_estimator_logs_per_dataset_and_overall_values_next_to_accuracy() -> None:
    train, evaluation = digits_arrays(n_train=16, n_eval=24)
    pipeline = ToyPipeline(train, evaluation, batch_size=8)
    pipeline.data["eval"] = {"a": {key: value[:8] for key, value in evaluation.items()},
                             "b": {key: value[8:] for key, value in evaluation.items()}}
    reader = Reads("hit_rate|b")  # listed first: sorting must place it after the per_ds trace writing the key
    traces = [reader, HitRate(inputs=("y", "y_pred"), outputs="hit_rate", mode="eval"), Accuracy("y", "y_pred")]
    estimator = fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, traces=traces, log_steps=None)
    history = estimator.fit().history["eval"]
    for key in ("", "|a", "|b"):
        assert history[f"hit_rate{key}"][2] == pytest.approx(history[f"accuracy{key}"][2])
    assert reader.seen == [history["hit_rate|b"][2]]


def test_events_drive_a_copy_per_dataset_and_block_duplicate_per_instance_values() -> None:
    trace = HitRate(inputs=("y", "y_pred"), outputs="rate")
    assert isinstance(trace, HitRate) and isinstance(trace, PerDSTrace) and type(trace).__name__ == "HitRate"
    assert trace.get_outputs(["a", "b"]) == ["rate", "rate|a", "rate|b"]
    data, logs = _events(trace, {"a": [_batch([0, 1], [0, 1])], "b": [_batch([0, 1, 2], [0, 0, 0]),
                                                                       _batch([2], [2])]})
    assert logs["logged"] == {"rate|a": 1.0, "rate|b": 0.5, "rate": 4 / 6}
    assert set(logs["per_instance"]) == {"hit|a", "hit|b"}  # not the plain 'hit' as well
    assert trace.fe_per_ds_trace.system is trace.system  # the copy's code may read self.system


def test_a_single_unnamed_dataset_logs_the_overall_value_only() -> None:
    trace = HitRate(inputs=("y", "y_pred"), outputs="rate")
    _, logs = _events(trace, {"": [_batch([0, 1], [0, 0])]})
    assert logs["logged"] == {"rate": 0.5} and set(logs["per_instance"]) == {"hit"}
    assert trace.get_outputs([""]) == ["rate"]


def test_plain_instance_when_an_output_has_a_bar_or_per_ds_is_false() -> None:
    assert isinstance(OptOut("x"), PerDSTrace)
    for plain in (OptOut("x|y"), OptOut("x", per_ds=False)):
        assert not isinstance(plain, PerDSTrace) and not isinstance(plain, OptOut)
        assert isinstance(plain, OptOut.__wrapped__) and not hasattr(plain, "fe_per_ds_trace")
    assert per_ds(OptOut) is OptOut  # decorating twice changes nothing


def test_state_round_trip_copy_and_resume_inside_a_dataset() -> None:
    trace = HitRate(inputs=("y", "y_pred"), outputs="rate")
    assert trace.state_dict() == {"trace": {}, "per_ds": {}}  # stateless, as the undecorated class
    trace.system = types.SimpleNamespace(ds_id="b")
    # A resumed run enters dataset 'b' without on_ds_begin: the copy's epoch begins at its first batch.
    trace.on_epoch_begin(Data())
    trace.on_batch_end(Data(_batch([1], [1])))
    epoch_data = Data()
    trace.on_ds_end(epoch_data)
    assert epoch_data["rate|b"] == 1.0
    clone = copy.deepcopy(trace)
    assert type(clone) is type(trace) and clone.fe_per_ds_trace.hits == 1 and clone.fe_per_ds_trace is not \
        trace.fe_per_ds_trace


def test_getstate_protocol_of_the_users_class_is_checkpointed_for_both_instances() -> None:
    @per_ds
    class Counter(Trace):
        def on_epoch_begin(self, data: Data) -> None:
            self.n = 0

        def on_batch_end(self, data: Data) -> None:
            self.n += 1

        def __getstate__(self) -> dict[str, Any]:
            return {"n": getattr(self, "n", 0)}

    trace = Counter(outputs="n")
    trace.system = types.SimpleNamespace(ds_id="a")
    trace.on_epoch_begin(Data())
    trace.on_ds_begin(Data())
    trace.on_batch_end(Data())
    state = trace.state_dict()
    assert state == {"trace": {"n": 1}, "per_ds": {"n": 1}, "open_ds": "a"}
    fresh = Counter(outputs="n")
    fresh.load_state_dict(state)
    fresh.system = types.SimpleNamespace(ds_id="a")
    fresh.on_batch_end(Data())  # continues dataset 'a' from the checkpoint rather than beginning it again
    assert (fresh.n, fresh.fe_per_ds_trace.n) == (2, 2)


def test_misuse_raises_naming_the_fix() -> None:
    with pytest.raises(TypeError, match="per_ds decorates Trace subclasses, got <class 'int'>"):
        per_ds(int)

    class Sub(HitRate):
        pass

    with pytest.raises(TypeError, match=r"Subclass the undecorated class \(HitRate.__wrapped__\)"):
        Sub(outputs="x")
