"""fe_ray.dataset.op_dataset.OpDataset: FastEstimator's dataset wrapper applying NumpyOps, for custom loaders."""

from __future__ import annotations

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import BatchDataset, NumpyDataset
from fe_ray.dataset.op_dataset import OpDataset
from fe_ray.op.numpyop import Batch, NumpyOp
from fe_ray.op.numpyop.univariate import ExpandDims, Minmax
from fe_ray.schedule import EpochScheduler


def _dataset() -> NumpyDataset:
    y = np.arange(5)
    return NumpyDataset({"x": np.arange(80, dtype=np.uint8).reshape(5, 4, 4), "y": y, "z": y * 2})


def test_samples_come_out_with_the_ops_applied_and_the_dataset_unchanged() -> None:
    dataset = _dataset()
    modes: list[str] = []

    class Bump(NumpyOp):
        def forward(self, data: np.ndarray, state: dict) -> np.ndarray:
            modes.append(state["mode"])
            data += 10  # in place: must not reach the dataset
            return data

    # As FastEstimator: every op given runs, its own mode notwithstanding (the Pipeline selects ops beforehand).
    ops = [Bump(inputs="x", outputs="x", mode="eval"), ExpandDims(inputs="x", outputs="x"),
           Minmax(inputs="x", outputs="x")]
    op_ds = OpDataset(dataset=dataset, ops=ops, mode="train")
    sample = op_ds[1]
    assert len(op_ds) == 5 and sorted(sample) == ["x", "y", "z"]
    assert sample["x"].shape == (4, 4, 1) and sample["x"].dtype == np.float32
    assert (sample["x"].min(), sample["x"].max()) == (0.0, 1.0)
    assert modes == ["train"] and dataset[1]["x"][0, 0] == 16


def test_a_torch_dataloader_of_it_feeds_a_pipeline() -> None:
    from torch.utils.data import DataLoader

    op_ds = OpDataset(_dataset(), [ExpandDims(inputs="x", outputs="x")], "train")
    pipeline = fe.Pipeline(train_data=DataLoader(op_ds, batch_sampler=[[0], [1, 2], [3, 4, 0]]))
    shapes = [tuple(batch["x"].shape) for batch in pipeline.get_results(num_steps=3)]
    assert shapes == [(1, 4, 4, 1), (2, 4, 4, 1), (3, 4, 4, 1)]


def test_output_keys_prune_the_rest_with_one_warning_per_key(capsys: pytest.CaptureFixture[str]) -> None:
    OpDataset._warned.discard("y")
    OpDataset._warned.discard("z")
    op_ds = OpDataset(_dataset(), [], "eval", output_keys={"x"})
    assert sorted(op_ds[0]) == ["x"] and sorted(op_ds[1]) == ["x"]
    out = capsys.readouterr().out
    assert out.count("FastEstimator-Warn: The following key(s) are being pruned") == 1 and "y, z" in out


def test_batched_items_run_the_ops_per_sample() -> None:
    dataset = BatchDataset(datasets=[_dataset(), _dataset()], num_samples=[2, 1])
    batch = OpDataset(dataset, [ExpandDims(inputs="x", outputs="x")], "eval")[0]
    assert isinstance(batch, list) and len(batch) == 3
    assert all(sample["x"].shape == (4, 4, 1) for sample in batch)


def test_bad_arguments_name_the_value_and_the_fix() -> None:
    with pytest.raises(ValueError, match="Unknown mode 'training'"):
        OpDataset(_dataset(), [], "training")
    with pytest.raises(ValueError, match=r"OpDataset runs per-sample ops only, got \['Batch'\]"):
        OpDataset(_dataset(), [Batch(batch_size=2)], "train")
    with pytest.raises(TypeError, match="OpDataset accepts NumpyOps only, got EpochScheduler"):
        OpDataset(_dataset(), [EpochScheduler({1: ExpandDims(inputs="x", outputs="x")})], "train")


def test_a_filtered_sample_comes_out_as_filtered_data() -> None:
    """As FastEstimator's OpDataset: a sample an op (RemoveIf) drops is a FilteredData, and the ops after the filter
    do not run on it."""
    from fe_ray.op.numpyop import LambdaOp, RemoveIf
    from fe_ray.types import FilteredData

    data = NumpyDataset({"x": np.arange(4, dtype=np.float32)})
    seen: list[float] = []
    op_ds = OpDataset(data, [RemoveIf(lambda x: x > 1, replacement=False, inputs="x"),
                             LambdaOp(fn=lambda x: seen.append(float(x)) or x, inputs="x", outputs="x")], "train")
    assert op_ds[0]["x"] == 0 and op_ds[1]["x"] == 1
    dropped = op_ds[3]
    assert isinstance(dropped, FilteredData) and dropped.replacement is False and seen == [0.0, 1.0]
