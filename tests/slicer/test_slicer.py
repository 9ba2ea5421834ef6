"""Slicers on numpy data: chunking, axis slicing, mean unslicing and the sanity checks."""

import numpy as np
import pytest

from fe_ray.slicer import (
    AxisSlicer,
    ChunkSlicer,
    MeanUnslicer,
    forward_slicers,
    reverse_slicers,
    sanity_assert_slicers,
    split_bounds,
)


def test_split_bounds_even_uneven_and_small() -> None:
    assert split_bounds(6, 3) == [(0, 2), (2, 4), (4, 6)]
    assert split_bounds(5, 2) == [(0, 3), (3, 5)]
    assert split_bounds(1, 3) == [(0, 1)]


def test_chunk_slicer_round_trip_preserves_order() -> None:
    data = {"x": np.arange(10).reshape(5, 2), "y": np.arange(5), "shared": np.float32(3)}
    slicer = ChunkSlicer(n_chunks=3, slice=["x", "y"])
    minibatches = forward_slicers([slicer], data)
    assert [mb["y"].tolist() for mb in minibatches] == [[0, 1], [2, 3], [4]]
    assert all(mb["shared"] == 3 for mb in minibatches)
    merged = reverse_slicers([slicer], minibatches, original_data=data)
    np.testing.assert_array_equal(merged["x"], data["x"])


def test_chunk_slicer_chunk_size() -> None:
    slicer = ChunkSlicer(chunk_size=2, slice="x")
    assert [p.tolist() for p in slicer._slice_batch(np.arange(5))] == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("kwargs", [{}, {"n_chunks": 2, "chunk_size": 2}, {"n_chunks": 0}, {"chunk_size": 1.5}])
def test_chunk_slicer_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="ChunkSlicer"):
        ChunkSlicer(slice="x", **kwargs)


def test_axis_slicer_and_mean_unslicer() -> None:
    data = {"x": np.arange(6).reshape(2, 3)}
    slicer = AxisSlicer(slice="x", unslice="x", axis=1)
    minibatches = forward_slicers([slicer], data)
    assert len(minibatches) == 3 and minibatches[0]["x"].tolist() == [0, 3]
    np.testing.assert_array_equal(reverse_slicers([slicer], minibatches, data)["x"], data["x"])
    mean = MeanUnslicer(unslice="loss")
    merged = reverse_slicers([mean], [{"loss": np.float32(1.0)}, {"loss": np.float32(3.0)}], {})
    assert merged["loss"] == pytest.approx(2.0)


def test_axis_slicer_fastestimator_arguments() -> None:
    """FastEstimator's order (axis, slice, unslice, mode, ds_id): axis first and required; unslice defaults to the
    slice keys, None un-slices nothing."""
    volume = np.arange(24).reshape(2, 3, 4)
    slicer = AxisSlicer(-1, "x")
    assert (slicer.axis, slicer.slice_inputs, slicer.unslice_inputs) == (-1, ["x"], ["x"])
    minibatches = forward_slicers([slicer], {"x": volume})
    assert len(minibatches) == 4 and minibatches[1]["x"].tolist() == volume[..., 1].tolist()
    np.testing.assert_array_equal(reverse_slicers([slicer], minibatches, {"x": volume})["x"], volume)
    assert AxisSlicer(1, "x", None).unslice_inputs == []
    assert AxisSlicer(0, "x", "y", "train", "ds1").unslice_inputs == ["y"]
    positional = AxisSlicer(0, "x", "y", "train", "ds1")
    assert (positional.mode, positional.ds_id) == ({"train"}, {"ds1"})
    with pytest.raises(TypeError):
        AxisSlicer(slice="x")  # type: ignore[call-arg]  # axis is required
    with pytest.raises(TypeError, match="axis must be an int"):
        AxisSlicer("x")  # type: ignore[arg-type]  # the pre-fix order (slice first) fails loudly


def test_slicers_disagreeing_on_counts() -> None:
    data = {"x": np.arange(6), "y": np.arange(6)}
    with pytest.raises(ValueError, match="disagree on the number of slices"):
        forward_slicers([ChunkSlicer(n_chunks=2, slice="x"), ChunkSlicer(n_chunks=3, slice="y")], data)


def test_sanity_assert_rejects_double_claims() -> None:
    with pytest.raises(ValueError, match="'x' is sliced by both"):
        sanity_assert_slicers([ChunkSlicer(n_chunks=2, slice="x"), AxisSlicer(axis=0, slice="x")])
    with pytest.raises(ValueError, match="'loss' is un-sliced by both"):
        sanity_assert_slicers([MeanUnslicer(unslice="loss"), MeanUnslicer(unslice="loss")])


def test_missing_slice_key() -> None:
    with pytest.raises(ValueError, match=r"slices keys \['z'\]"):
        forward_slicers([ChunkSlicer(n_chunks=2, slice="z")], {"x": np.arange(4)})


def test_a_slicer_needs_a_key_and_one_slice_count_for_all_its_keys() -> None:
    with pytest.raises(ValueError, match="ChunkSlicer needs at least one 'slice' or 'unslice' key"):
        ChunkSlicer(n_chunks=2)
    slicer = ChunkSlicer(chunk_size=2, slice=["x", "y"])
    with pytest.raises(ValueError, match=r"ChunkSlicer produced different numbers of slices \[2, 3\] for keys "
                                         r"\['x', 'y'\]; the sliced keys must share the sliced axis length"):
        forward_slicers([slicer], {"x": np.zeros(4), "y": np.zeros(5)})


def test_unslicing_a_key_some_minibatch_lacks_names_the_minibatches() -> None:
    slicer = ChunkSlicer(n_chunks=2, slice="x", unslice="pred")
    minibatches = forward_slicers([slicer], {"x": np.arange(4)})
    results = [{**minibatches[0], "pred": np.ones(2)}, dict(minibatches[1])]
    with pytest.raises(ValueError, match=r"ChunkSlicer un-slices 'pred', but minibatch\(es\) \[1\] lack it"):
        reverse_slicers([slicer], results, original_data={"x": np.arange(4)})


def test_without_slicers_the_batch_is_one_minibatch_and_stateless_slicers_refuse_state() -> None:
    data = {"x": np.arange(3)}
    assert forward_slicers([], data) == [data]
    slicer = MeanUnslicer(unslice="loss")
    assert slicer.state_dict() == {}
    slicer.load_state_dict({})
    with pytest.raises(ValueError, match=r"MeanUnslicer has no state but was given keys \['n'\]"):
        slicer.load_state_dict({"n": 1})


def test_a_key_no_minibatch_holds_is_skipped_as_fastestimator_does() -> None:
    """An op of another mode writes it (a train-only loss un-sliced by MeanUnslicer): evaluation raised before."""
    slicer = AxisSlicer(axis=0, slice="x")
    mean = MeanUnslicer(unslice="train_loss")
    minibatches = forward_slicers([slicer, mean], {"x": np.arange(4)})
    merged = reverse_slicers([slicer, mean], [dict(mb) for mb in minibatches], original_data={"x": np.arange(4)})
    assert "train_loss" not in merged and merged["x"].tolist() == [0, 1, 2, 3]


def test_a_slicer_of_ones_own_unslices_its_slice_keys_by_default() -> None:
    """FastEstimator's base Slicer defaults unslice to the slice keys; a subclass calling super().__init__(slice=...)
    fused nothing back and the Network refused the dangling key."""
    from fe_ray.slicer import Slicer

    class Halves(Slicer):
        def _slice_batch(self, batch):  # noqa: ANN001, ANN202
            return [batch[:2], batch[2:]]

        def _unslice_batch(self, slices, key):  # noqa: ANN001, ANN202
            return np.concatenate(slices)

    assert Halves(slice="x").unslice_inputs == ["x"]
    assert Halves(slice="x", unslice=None).unslice_inputs == []
    from fe_ray.slicer.axis_slicer import AxisSlicer as FromItsModule  # FastEstimator's module paths
    from fe_ray.slicer.mean_unslicer import MeanUnslicer as FromItsOwnModule

    assert FromItsModule is AxisSlicer and FromItsOwnModule is MeanUnslicer
