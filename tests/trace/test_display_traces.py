"""fe.trace.io.BatchDisplay and GridDisplay: FastEstimator 1.7's traces drawing a batch every few steps or epochs."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.trace import Data
from fe_ray.trace.io import BatchDisplay, GridDisplay
from fe_ray.trace.io.batch_display import BatchDisplay as ModuleBatchDisplay
from fe_ray.trace.io.grid_display import GridDisplay as ModuleGridDisplay
from fe_ray.util import img_data


def _system(mode: str = "train", step: int | None = 2, batch: int | None = 2, epoch: int = 1,
            log_steps: int | None = 100) -> SimpleNamespace:
    return SimpleNamespace(mode=mode, global_step=step, batch_idx=batch, epoch_idx=epoch, log_steps=log_steps)


def _data() -> Data:
    rng = np.random.default_rng(0)
    return Data({"x": rng.random((3, 4, 4), dtype=np.float32), "y": np.array([0, 1, 2]),
                 "m": rng.random((3, 4, 4, 2), dtype=np.float32)})


def test_module_paths_arguments_and_inputs() -> None:
    assert fe.trace.io.BatchDisplay is BatchDisplay is ModuleBatchDisplay
    assert fe.trace.io.GridDisplay is GridDisplay is ModuleGridDisplay
    display = BatchDisplay(masks=("m", ["a", "b"]), text="y", batch_limit=2, frequency="3s", mode="eval")
    assert display.inputs == ["m", "y"] and display.file_title == "y"  # FastEstimator's title: image, text, masks...
    assert display.frequency is not None and (display.frequency.is_step, display.frequency.freq) == (True, 3)
    assert display.mode == {"eval"} and display.outputs == [] and not display.checkpointed
    assert BatchDisplay(keypoints="k").file_title == "k" and BatchDisplay(image="x", title="t").file_title == "t"
    grid = GridDisplay([BatchDisplay(image="x"), BatchDisplay(text="y")], batch_limit=1)
    assert grid.inputs == ["x", "y"] and grid.file_title == "grid" and grid.frequency is None


@pytest.mark.parametrize("make, error, match", [
    (lambda: BatchDisplay(), ValueError, "at least one key"),
    (lambda: BatchDisplay(image="x", batch_limit=0), ValueError, "batch_limit must be at least 1"),
    (lambda: BatchDisplay(image="x", batch_limit=1.5), TypeError, "batch_limit must be None or a positive int"),
    (lambda: BatchDisplay(image="x", frequency="2x"), ValueError, "BatchDisplay frequency '2x'"),
    (lambda: BatchDisplay(masks=("m", ["a"], 3)), TypeError, r"masks must be a key or a \(key"),
    (lambda: GridDisplay([]), ValueError, "at least one column"),
    (lambda: GridDisplay([img_data.BatchDisplay(text=["a"])]), TypeError, r"BatchDisplay traces, got \['BatchD"),
])
def test_bad_arguments_are_named(make: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()


def test_make_image_cuts_the_batch_and_names_missing_keys() -> None:
    display = BatchDisplay(image="x", masks=("m", ["a", "b"]), mask_threshold=0.5, title="t")
    display.system = _system()  # type: ignore[assignment]
    figure = display.make_image(_data(), batch_limit=2)
    assert isinstance(figure, img_data.BatchDisplay) and figure.title == "t"
    assert figure.batch_size == len(figure.batch) == 2
    assert display.make_image(_data()).batch_size == 3
    with pytest.raises(KeyError, match=r"no 'p' in the data \(keys: \['m', 'x', 'y'\]\)"):
        BatchDisplay(image="p").make_image(_data())


def test_default_frequency_is_log_steps_and_log_steps_0_draws_nothing(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    display = BatchDisplay(image="x", save_dir=str(tmp_path))
    display.system = _system(log_steps=0)  # type: ignore[assignment]
    display.on_begin(Data())
    display.on_batch_end(_data())
    display.on_epoch_end(_data())
    assert os.listdir(tmp_path) == []
    other = BatchDisplay(image="x", save_dir=str(tmp_path))
    other.system = _system(log_steps=2)  # type: ignore[assignment]
    other.on_begin(Data())
    assert other.frequency is not None and (other.frequency.is_step, other.frequency.freq) == (True, 2)


def test_traces_write_figures_at_their_frequency(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    folder = tmp_path / "new"
    batch = BatchDisplay(image="x", text="y", batch_limit=1, frequency=2, save_dir=str(folder))
    grid = GridDisplay([BatchDisplay(image="x"), BatchDisplay(masks="m", mask_threshold=0.5)], batch_limit=1,
                       frequency="1s", save_dir=str(folder), title="g", mode="eval")
    assert folder.is_dir()  # made when the trace is, as FastEstimator's
    for trace in (batch, grid):
        trace.system = _system()  # type: ignore[assignment]
        trace.on_begin(Data())
    batch.on_batch_end(_data())  # training step 2: due
    batch.system.global_step = 3
    batch.on_batch_end(_data())  # step 3: not due
    grid.system.mode = "eval"  # evaluation counts its batches
    grid.on_batch_end(_data())
    assert sorted(os.listdir(folder)) == ["g_eval_1_2.png", "x_train_1_2.png"]
    epoch = BatchDisplay(image="x", frequency="1e", save_dir=str(folder), title="e")
    epoch.system = _system(batch=None)  # type: ignore[assignment]
    epoch.on_begin(Data())
    epoch.on_batch_end(_data())  # an epoch frequency draws at epoch ends only
    epoch.on_epoch_end(_data())
    assert "e_train_1_None.png" in os.listdir(folder)
