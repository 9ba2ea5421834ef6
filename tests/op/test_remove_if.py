"""RemoveIf and FilteredData as ops: what forward / forward_batch return and how forward_numpyop stops at them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray.types as fe_types
from fe_ray.op.numpyop import LambdaOp, NumpyOp, RemoveIf, forward_numpyop
from fe_ray.op.numpyop.numpyop import may_draw_globally
from fe_ray.types import FilteredData


def test_filtered_data_keeps_its_replacement_flag() -> None:
    assert FilteredData().replacement is True
    assert FilteredData(replacement=False).replacement is False
    assert repr(FilteredData()) == "FilteredData"


def test_remove_if_forward_answers_per_sample() -> None:
    op = RemoveIf(lambda x, y: x > y, replacement=False, inputs=("x", "y"))
    dropped = op.forward([3, 2], {})
    assert isinstance(dropped, FilteredData) and dropped.replacement is False
    assert op.forward([1, 2], {}) is None
    assert op.outputs == [] and op.in_list


def test_remove_if_forward_batch_gives_one_answer_for_the_batch() -> None:
    seen: list[Any] = []
    op = RemoveIf(lambda x: seen.append(x) or x.sum() > 5, inputs="x")
    assert isinstance(op.forward_batch([np.array([1, 2, 3])], {}), FilteredData)
    assert op.forward_batch([np.array([1, 2])], {}) is None
    assert [x.tolist() for x in seen] == [[1, 2, 3], [1, 2]]  # fn saw the whole batch, once


def test_remove_if_rejects_a_per_element_answer_with_a_hint() -> None:
    op = RemoveIf(lambda x: x > 1, inputs="x")
    with pytest.raises(ValueError, match="RemoveIf fn must return one bool.*np.any"):
        op.forward_batch([np.array([1, 2, 3])], {})


@pytest.mark.parametrize("kwargs, match", [({"fn": 3}, "RemoveIf fn must be a plain callable"),
                                           ({"fn": bool, "replacement": "yes"}, "RemoveIf replacement must be a bool")])
def test_remove_if_checks_its_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        RemoveIf(**kwargs)


class _Record(NumpyOp):
    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")
        self.calls = 0

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.calls += 1
        return data + 1


def test_forward_numpyop_stops_at_a_filter_and_returns_it() -> None:
    after = _Record()
    remove = RemoveIf(lambda x: x > 0, inputs="x")
    filtered_by: list[NumpyOp] = []
    data = {"x": np.array(1)}
    verdict = forward_numpyop([remove, after], data, {}, filtered_by=filtered_by)
    assert isinstance(verdict, FilteredData) and filtered_by == [remove] and after.calls == 0
    assert forward_numpyop([remove, after], {"x": np.array(0)}, {}) is None and after.calls == 1


def test_forward_numpyop_stops_at_a_batched_filter() -> None:
    data = {"x": np.arange(4)}
    verdict = forward_numpyop([LambdaOp(lambda x: x * 10, "x", "x"), RemoveIf(lambda x: x.max() > 20, inputs="x")],
                              data, {}, batched=True)
    assert isinstance(verdict, FilteredData)


def test_remove_if_runs_user_code_that_may_draw_globally() -> None:
    # Its fn may draw from np.random (drop 10% at random): the Loader seeds the global generators for it.
    assert may_draw_globally(RemoveIf(lambda x: np.random.rand() < 0.1, inputs="x"))


def test_type_aliases_check_instances_like_fastestimator() -> None:
    import tensorflow as tf
    import torch

    assert isinstance(torch.zeros(1), fe_types.Tensor) and isinstance(tf.zeros(1), fe_types.Tensor)
    assert not isinstance(np.zeros(1), fe_types.Tensor)
    assert isinstance(np.zeros(1), fe_types.Array) and isinstance(torch.zeros(1), fe_types.Array)
    assert isinstance([1], fe_types.DataSequence) and not isinstance(3, fe_types.DataSequence)
    assert isinstance(torch.nn.Linear(1, 1), fe_types.Model) and not isinstance(3, fe_types.Model)
    assert issubclass(torch.Tensor, fe_types.Tensor) and issubclass(np.ndarray, fe_types.Array)


@pytest.mark.parametrize("wrap", ["Sometimes", "Fuse", "Repeat", "OneOf"])
def test_meta_ops_pass_a_filter_on_as_fastestimator(wrap: str) -> None:
    """FastEstimator's meta ops return the FilteredData of an op they run, so the sample is dropped; fe_ray's
    Sometimes failed on it and Fuse / Repeat dropped the verdict silently."""
    from fe_ray.op.numpyop.meta import Fuse, OneOf, Repeat, Sometimes

    drop = RemoveIf(lambda x: x > 1, replacement=False, inputs="x")
    meta = {"Sometimes": lambda: Sometimes(drop, prob=1.0),
            "Fuse": lambda: Fuse([LambdaOp(fn=lambda x: x + 1, inputs="x", outputs="x"), drop]),
            "Repeat": lambda: Repeat(drop, repeat=2), "OneOf": lambda: OneOf(drop)}[wrap]()
    kept, dropped = {"x": np.array(0)}, {"x": np.array(5)}
    assert forward_numpyop([meta], kept, {"mode": "train"}) is None
    verdict = forward_numpyop([meta], dropped, {"mode": "train"})
    assert isinstance(verdict, FilteredData) and verdict.replacement is False


def test_a_network_pop_that_filters_raises_as_fastestimator() -> None:
    import torch

    import fe_ray as fe
    from fe_ray.op.tensorop.model import ModelOp

    model = fe.build(lambda: torch.nn.Linear(2, 1), "adam")
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y")],
                         pops=[RemoveIf(lambda y: True, inputs="y")])
    with network(mode="eval", epoch=1), pytest.raises(ValueError, match="Network pops cannot filter batches, but "
                                                                         "RemoveIf returned FilteredData"):
        network.run_step({"x": np.ones((2, 2), np.float32)})
