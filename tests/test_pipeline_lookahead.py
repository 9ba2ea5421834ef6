"""The Estimator loop's step pipelining (fe_ray.pipeline.lookahead): which batch is made when, and positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fe_ray as fe


def _lookahead_run(peek: bool, seen: list[Any], peeked: list[Any], fail_at: int | None = None) -> None:
    """Iterate a 5-batch train epoch through ``with_lookahead`` as the Estimator does, the 'network' calling the
    offered peek during each step (or not). Appends to ``seen`` per batch: its first value, the recorded position
    and how many samples the Pipeline had made by then; to ``peeked``: every peeked batch's first value or None."""
    from fe_ray.dataset import NumpyDataset
    from fe_ray.op.numpyop import LambdaOp
    from fe_ray.pipeline.lookahead import with_lookahead

    made: list[int] = []

    def make(x: np.ndarray) -> np.ndarray:
        if fail_at is not None and int(x[0]) == fail_at:
            raise RuntimeError(f"bad sample {fail_at}")
        made.append(int(x[0]))
        return x

    def position() -> int | None:
        return pipeline.state_dict()["positions"].get("train", {}).get("", {}).get("batches")

    pipeline = fe.Pipeline(train_data=NumpyDataset({"x": np.arange(10).reshape(10, 1)}), batch_size=2,
                           ops=[LambdaOp(fn=make, inputs="x", outputs="x")])
    offered: list[Any] = []
    try:
        with pipeline(mode="train", epoch=1, shuffle=False, track=True) as loader:
            for batch in with_lookahead(loader, offered.append):
                seen.append((int(batch["x"][0, 0]), position(), len(made)))
                if peek:
                    following = offered[-1]()
                    assert offered[-1]() is following  # fetched once
                    peeked.append(None if following is None else int(following["x"][0, 0]))
                    assert position() == seen[-1][1]  # the peeked batch has not started: not counted yet
    finally:
        assert offered[-1] is None  # cleared when the loop ends, also when it raises


@pytest.mark.parametrize("peek", [True, False], ids=["network-peeks", "loop-fetches"])
def test_lookahead_offers_the_following_batch_and_records_each_position_when_its_batch_starts(peek: bool) -> None:
    seen: list[Any] = []
    peeked: list[Any] = []
    _lookahead_run(peek, seen, peeked)
    # Batches in order, each counted as handed out (1..4) when it starts; the last one ends the epoch's position.
    # The following batch is made only when the network peeks (during the step) or after the step: never before
    # the current batch's step starts, so the Pipeline's work is not on the replicas' critical path.
    assert seen == [(0, 1, 2), (2, 2, 4), (4, 3, 6), (6, 4, 8), (8, None, 10)]
    assert peeked == ([2, 4, 6, 8, None] if peek else [])


def test_lookahead_raises_a_pipeline_error_after_the_step_not_inside_it() -> None:
    # Batch 3 (samples 6, 7) fails while the network peeks during batch 2's step: the peek answers None (a Pipeline
    # error must not break the replicas' step) and the loop raises the error once that step is over.
    seen: list[Any] = []
    peeked: list[Any] = []
    with pytest.raises(RuntimeError, match="bad sample 6"):
        _lookahead_run(True, seen, peeked, fail_at=6)
    assert [first for first, _, _ in seen] == [0, 2, 4] and peeked == [2, 4, None]



class _Level(fe.dataset.NumpyDataset):
    """A dataset with state of its own (a curriculum's level)."""

    def state_dict(self) -> dict[str, Any]:
        return {"level": 1}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


@pytest.mark.parametrize("ops, dataset_type, pure", [
    ([], "numpy", True), (["stateless"], "numpy", True), (["stateful"], "numpy", False),
    (["sometimes-stateful"], "numpy", False), ([], "level", False), ([], "combined", True),
    ([], "combined-level", False)])
def test_only_batches_that_are_a_pure_function_of_their_position_are_made_ahead(ops: list[str], dataset_type: str,
                                                                               pure: bool) -> None:
    """A stateful op or dataset would save, in the checkpoint of the current step, state that already counts the
    batch made ahead (and would miss what a trace changes between the two batches): its loader is iterated plainly,
    and the network is never offered the following batch."""
    from fe_ray.dataset import CombinedDataset, NumpyDataset
    from fe_ray.op.numpyop.meta import Sometimes
    from fe_ray.op.numpyop.univariate import Minmax
    from fe_ray.pipeline.lookahead import with_lookahead
    from tests.helpers.ops import Warmup

    data = {"x": np.arange(8, dtype=np.float32).reshape(8, 1)}
    datasets = {"numpy": lambda: NumpyDataset(data), "level": lambda: _Level(data),
                "combined": lambda: CombinedDataset([NumpyDataset(data), NumpyDataset(data)]),
                "combined-level": lambda: CombinedDataset([NumpyDataset(data), _Level(data)])}
    make_op = {"stateless": lambda: Minmax(inputs="x", outputs="x"), "stateful": Warmup,
               "sometimes-stateful": lambda: Sometimes(Warmup(), prob=1.0)}
    pipeline = fe.Pipeline(train_data=datasets[dataset_type](), batch_size=2, ops=[make_op[op]() for op in ops])
    offered: list[Any] = []
    with pipeline(mode="train", epoch=1, shuffle=False, track=True) as loader:
        assert loader.pure is pure
        batches = list(with_lookahead(loader, offered.append))
    assert len(batches) == len(loader)
    assert bool(offered) is pure
