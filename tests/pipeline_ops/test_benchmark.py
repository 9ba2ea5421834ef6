"""Pipeline.benchmark: FastEstimator's speed lines and per-op breakdown, without moving the resumable position."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop import LambdaOp, NumpyOp
from fe_ray.op.numpyop.meta import Sometimes
from fe_ray.op.numpyop.randomness import get_rng
from fe_ray.pipeline import Pipeline

SPEED = re.compile(r"^FastEstimator-Benchmark \((\w+)\): (?:Dataset: (\w+), )?Step: (\d+), Epoch: (\d+), "
                   r"Steps/sec: [\d.]+$")


def _ds(n: int = 20) -> NumpyDataset:
    return NumpyDataset({"x": np.arange(n, dtype=np.float32).reshape(n, 1), "y": np.arange(n)})


class _Draw(NumpyOp):
    """A random op recording every draw, to compare the breakdown's draws with the loader's."""

    is_random = True

    def __init__(self) -> None:
        super().__init__(inputs="x", outputs="x")
        self.draws: list[float] = []

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        self.draws.append(float(get_rng(state).random()))
        return data + self.draws[-1]


def _speed_lines(text: str) -> list[tuple[str, str | None, int, int]]:
    return [(m[1], m[2], int(m[3]), int(m[4])) for m in map(SPEED.match, text.splitlines()) if m]


def test_speed_lines_every_log_interval_and_position_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = Pipeline(train_data=_ds(), batch_size=4, shuffle_seed=3)
    reference = Pipeline(train_data=_ds(), batch_size=4, shuffle_seed=3)
    for pipe in (pipeline, reference):
        with pipe("train", 2) as loader:  # hand out 2 of the 5 batches of epoch 2
            iterator = iter(loader)
            next(iterator), next(iterator)
    before = pipeline.state_dict()
    assert before["positions"] == {"train": {"": {"epoch": 2, "batches": 2}}}
    pipeline.benchmark(epoch=2, num_steps=23, log_interval=5, detailed=False)
    out = capsys.readouterr().out
    assert _speed_lines(out) == [("Train", None, step, 2) for step in (5, 10, 15, 20)]
    assert "Breakdown" not in out
    assert pipeline.state_dict() == before
    # The resumed epoch continues exactly where it stood, as if no benchmark had run.
    with pipeline("train", 2) as loader, reference("train", 2) as expected:
        assert [b["y"].tolist() for b in loader] == [b["y"].tolist() for b in expected]


def test_breakdown_times_every_op_and_the_collation(capsys: pytest.CaptureFixture[str]) -> None:
    draw = _Draw()
    ops = [Sometimes(LambdaOp(lambda x: x * 2, inputs="x", outputs="x")), draw,
           LambdaOp(lambda y: y + 1, inputs="y", outputs="z", mode="eval")]
    pipeline = Pipeline(train_data=_ds(), batch_size=4, ops=ops)
    pipeline.benchmark(num_steps=7, log_interval=3)
    lines = capsys.readouterr().out.splitlines()
    assert len(_speed_lines("\n".join(lines))) == 2
    assert "Breakdown of time taken by Pipeline Operations (Mode: Train, Epoch: 1)" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("Op "))
    assert [cell.strip() for cell in lines[header].split(" : ")] == ["Op", "Inputs", "Outputs", "ms / Visit",
                                                                     "Visits", "Time (Total)"]
    rows = [[cell.strip() for cell in line.split(" : ")] for line in lines[header + 2:header + 5]]
    # The eval-only op is not part of a train epoch; 3 batches of 4 samples are rebuilt op by op.
    assert [row[:3] + [row[4]] for row in rows] == [["Sometimes (LambdaOp)", "x", "x", "12"],
                                                    ["_Draw", "x", "x", "12"],
                                                    ["<Collating Batch>", "", "", "3"]]
    assert sum(float(row[5].rstrip("%")) for row in rows) == pytest.approx(100, abs=0.05)
    # The rebuilt batches give the random op the generators the loader gave it: the same draws, in order.
    assert len(draw.draws) == 7 * 4 + 12
    assert draw.draws[28:] == draw.draws[:12] and len(set(draw.draws)) == 28


def test_each_dataset_of_the_mode_or_only_the_one_named(capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = Pipeline(eval_data={"a": _ds(8), "b": _ds(12)}, batch_size=4)
    pipeline.benchmark("eval", num_steps=4, log_interval=2, detailed=False)
    assert _speed_lines(capsys.readouterr().out) == [("Eval", ds, step, 1) for ds in "ab" for step in (2, 4)]
    pipeline.benchmark("eval", ds_id="b", num_steps=4, log_interval=4, detailed=True)
    out = capsys.readouterr().out
    assert _speed_lines(out) == [("Eval", "b", 4, 1)]
    assert "(Mode: Eval, Epoch: 1, Dataset: b)" in out
    assert pipeline.state_dict()["positions"] == {}


@pytest.mark.parametrize("kwargs, error, match", [
    ({"num_steps": 0}, ValueError, "num_steps must be an int >= 1, got 0"),
    ({"num_steps": 2.5}, ValueError, "num_steps must be an int >= 1, got 2.5"),
    ({"log_interval": -1}, ValueError, "log_interval must be an int >= 1"),
    ({"mode": "infer"}, ValueError, r"one of \['train', 'eval', 'test'\], got 'infer'"),
    ({"mode": "eval"}, ValueError, "no eval data at epoch 1.*'train'"),
    ({"epoch": 0}, ValueError, "epoch must be an int >= 1"),
    ({"ds_id": "z"}, ValueError, r"no ds_id 'z'.*available: \[''\]"),
    ({"ds_id": 1}, TypeError, "ds_id must be a str or None"),
    ({"detailed": "yes"}, TypeError, "detailed must be True"),
])
def test_invalid_arguments_name_the_value(kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Pipeline(train_data=_ds(), batch_size=4).benchmark(**kwargs)
