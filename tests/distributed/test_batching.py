"""In-process tests of the coordinator's batch splitting and output merging (no Ray)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fe_ray.distributed.batching import batch_size_of, merge_outputs, split_for_replicas


def test_batch_size_is_the_most_common_leading_dimension() -> None:
    assert batch_size_of({"x": np.zeros((5, 3)), "y": np.zeros(5), "table": np.zeros((2, 2))}) == 5
    assert batch_size_of({"lr": np.float32(0.1)}) is None
    with pytest.raises(ValueError, match=r"Ragged batch: .*\{'x': 4, 'y': 5\}, none the most common"):
        batch_size_of({"x": np.zeros((4, 3)), "y": np.zeros(5)})


@pytest.mark.parametrize("size, expected", [(6, [3, 3]), (5, [3, 2]), (4, [2, 2]), (3, [3, 0]), (1, [1, 0])])
def test_split_is_contiguous_and_weighted(size: int, expected: list[int]) -> None:
    # 3 samples: not 2 + 1, since a BatchNorm model in training cannot take a single sample (in-process it gets 3).
    batch = {"x": np.arange(size * 2).reshape(size, 2), "y": np.arange(size), "scale": np.float32(2.0),
             "unused": np.zeros(size)}
    slices, n_local, total = split_for_replicas(batch, ["x", "y", "scale"], 2)
    assert n_local == expected and total == size
    assert all("unused" not in piece for piece in slices)  # only the keys the replicas need travel
    assert all(piece["scale"] == 2.0 for piece in slices)  # values without a batch axis go whole to every replica
    real = [piece for piece, count in zip(slices, n_local) if count]
    np.testing.assert_array_equal(np.concatenate([piece["y"] for piece in real]), batch["y"])
    if size in (1, 3):  # the idle replica gets the first two samples (or one) as padding, with weight 0
        np.testing.assert_array_equal(slices[1]["y"], batch["y"][:2])


def test_no_replica_gets_a_single_sample_of_a_larger_batch() -> None:
    for size in range(2, 13):
        counts = split_for_replicas({"x": np.zeros(size)}, ["x"], 4)[1]
        assert sum(counts) == size and 1 not in counts, (size, counts)
    assert split_for_replicas({"x": np.zeros(7)}, ["x"], 4)[1] == [3, 2, 2, 0]


def test_torch_tensors_are_split_as_the_numpy_arrays_they_hold() -> None:
    # The Estimator hands the coordinator torch tensors; every kind must reach the replicas as plain numpy.
    torch = pytest.importorskip("torch")
    shared = np.arange(8, dtype=np.float32).reshape(4, 2)
    batch = {"x": torch.as_tensor(shared), "w": torch.ones(4, requires_grad=True),
             "h": torch.arange(4).to(torch.bfloat16), "s": torch.tensor(3.0)}
    slices, n_local, _ = split_for_replicas(batch, ["x", "w", "h", "s"], 2)
    assert n_local == [2, 2]
    for piece in slices:
        assert all(isinstance(value, np.ndarray) for value in piece.values()), piece
    np.testing.assert_array_equal(np.concatenate([piece["x"] for piece in slices]), shared)
    np.testing.assert_array_equal(slices[1]["w"], np.ones(2, np.float32))
    assert slices[0]["h"].dtype == np.float32 and slices[1]["h"].tolist() == [2.0, 3.0]  # numpy has no bfloat16
    assert slices[0]["s"] == 3.0


def test_a_batch_without_batch_axis_runs_whole_on_rank_0() -> None:
    slices, n_local, total = split_for_replicas({"lr": np.float32(0.5)}, ["lr"], 3)
    assert n_local == [1, 0, 0] and total == 1 and len(slices) == 3


def test_merge_concatenates_in_rank_order_and_weights_scalars() -> None:
    results = [{"pred": np.array([[0.0], [1.0], [2.0]]), "loss": np.float32(1.0), "name": "a"},
               {"pred": np.array([[3.0], [4.0]]), "loss": np.float32(4.0), "name": "b"}]
    merged, per_replica = merge_outputs(results, [3, 2])
    np.testing.assert_array_equal(merged["pred"], np.arange(5.0).reshape(5, 1))
    assert merged["loss"] == pytest.approx((3 * 1.0 + 2 * 4.0) / 5)
    assert isinstance(merged["loss"], (np.floating, float)) and np.asarray(merged["loss"]).dtype == np.float32
    assert merged["name"] == "a"  # non-numeric values: rank 0's
    assert per_replica == {"loss": {0: np.float32(1.0), 1: np.float32(4.0)}}


def test_merge_goes_into_dicts_lists_and_tuples_of_outputs() -> None:
    # A model returning a dict or a tuple under one key: every leaf is merged (only rank 0's slice was kept before).
    def result(rows: list[float], loss: float) -> dict:
        pred = np.array(rows).reshape(-1, 1)
        return {"out": {"logits": pred, "prob": pred / 10}, "pair": (pred, np.float32(loss)),
                "ids": [f"s{r:g}" for r in rows], "heads": [pred, pred * 2]}

    merged, per_replica = merge_outputs([result([0.0, 1.0, 2.0], 1.0), result([3.0, 4.0], 4.0)], [3, 2])
    np.testing.assert_array_equal(merged["out"]["logits"], np.arange(5.0).reshape(5, 1))
    np.testing.assert_array_equal(merged["out"]["prob"], np.arange(5.0).reshape(5, 1) / 10)
    assert isinstance(merged["pair"], tuple) and len(merged["pair"]) == 2
    np.testing.assert_array_equal(merged["pair"][0], np.arange(5.0).reshape(5, 1))
    assert merged["pair"][1] == pytest.approx((3 * 1.0 + 2 * 4.0) / 5)
    assert merged["ids"] == ["s0", "s1", "s2", "s3", "s4"]  # a per-sample list
    np.testing.assert_array_equal(merged["heads"][1], 2 * np.arange(5.0).reshape(5, 1))
    assert per_replica == {}  # only top-level scalars are kept per replica


def test_merge_ignores_padding_replicas() -> None:
    results = [{"pred": np.array([[7.0]]), "loss": np.float32(2.0)},
               {"pred": np.array([[7.0]]), "loss": np.float32(np.nan)}]  # rank 1 ran padding only
    merged, per_replica = merge_outputs(results, [1, 0])
    np.testing.assert_array_equal(merged["pred"], [[7.0]])
    assert merged["loss"] == 2.0 and per_replica == {}


def test_nan_on_one_replica_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    results = [{"loss": np.float32(1.0)}, {"loss": np.float32(np.nan)}, {"loss": np.float32(3.0)}]
    with caplog.at_level(logging.WARNING, logger="fe_ray.distributed.coordinator"):
        merged, per_replica = merge_outputs(results, [3, 2, 2])
    assert merged["loss"] == pytest.approx((3 * 1.0 + 2 * 3.0) / 5)
    assert np.isnan(per_replica["loss"][1])
    assert "'loss' is not finite on replica rank(s) [1]" in caplog.text


def test_nan_everywhere_stays_nan_and_is_elementwise() -> None:
    merged, _ = merge_outputs([{"loss": np.float32(np.nan)}, {"loss": np.float32(np.inf)}], [1, 1])
    assert not np.isfinite(merged["loss"])
    vector, _ = merge_outputs([{"m": np.array([1.0, np.nan])}, {"m": np.array([3.0, 5.0])}], [1, 3])
    np.testing.assert_allclose(vector["m"], [(1.0 + 9.0) / 4, 5.0])


def test_an_output_that_cannot_be_merged_is_rank_0s_and_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    # A masked selection (3 rows on rank 0, 2 on rank 1, of slices of 4 and 3 samples) has no batch axis to join on.
    results = [{"picked": np.ones((3, 2)), "tag": "same"}, {"picked": np.zeros((2, 2)), "tag": "same"}]
    with caplog.at_level(logging.WARNING, logger="fe_ray.distributed.coordinator"):
        merged, _ = merge_outputs(results, [4, 3])
        merge_outputs(results, [4, 3])
    np.testing.assert_array_equal(merged["picked"], np.ones((3, 2)))
    assert merged["tag"] == "same"
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and "output 'picked' has no batch axis" in warnings[0]  # once; equal values: none
    assert "shapes [(3, 2), (2, 2)] for slices of [4, 3] samples" in warnings[0]
    assert "rank 0's value stands for the batch" in warnings[0]


def test_integer_and_boolean_values_keep_their_dtype(caplog: pytest.LogCaptureFixture) -> None:
    """Integer and boolean outputs keep their dtype, as in process, whatever the step: a flag or count every
    replica agrees on is that value (it became a float64 mean); differing ones are their weighted mean rounded to
    the dtype (a boolean: most samples' value), with a warning once per key, and each replica's value is kept."""
    results = [{"flag": np.bool_(True), "epoch": np.int32(3), "hits": np.int64(2), "any": np.bool_(False),
                "idx": np.array([6, 1], np.int64)},
               {"flag": np.bool_(True), "epoch": np.int32(3), "hits": np.int64(5), "any": np.bool_(True),
                "idx": np.array([0, 2], np.int64)}]
    with caplog.at_level(logging.WARNING, logger="fe_ray.distributed.coordinator"):
        merged, per_replica = merge_outputs(results, [3, 2])
        merge_outputs(results, [3, 2])
    assert merged["flag"] is results[0]["flag"] and merged["epoch"].dtype == np.int32 and merged["epoch"] == 3
    assert merged["hits"] == 3 and merged["hits"].dtype == np.int64  # (3 * 2 + 2 * 5) / 5 = 3.2
    assert merged["any"] == np.bool_(False) and merged["any"].dtype == np.bool_  # 3 of 5 samples' value
    assert merged["idx"].dtype == np.int64 and merged["idx"].tolist() == [4, 1]  # (18, 7) / 5, rounded
    assert per_replica["hits"] == {0: 2, 1: 5}
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 3 and "integer / boolean output 'hits' differs between replicas ({0: 2, 1: 5})" \
        in warnings[0] and "rounded to int64" in warnings[0]
