"""SlidingSlicer: hand-computed windows and overlap fusion, framework agreement, a Network step, bad arguments."""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import to_number  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp  # noqa: E402
from fe_ray.slicer import SlidingSlicer, forward_slicers, reverse_slicers  # noqa: E402

X7 = np.arange(7)  # [0 1 2 3 4 5 6]


def windows(slicer: SlidingSlicer, data: Any) -> list[list[Any]]:
    return [np.asarray(to_number(piece)).tolist() for piece in slicer._slice_batch(data)]


def round_trip(slicer: SlidingSlicer, data: Any, transform: Any = None) -> Any:
    pieces = slicer._slice_batch(data)
    if transform is not None:
        pieces = [transform(i, piece) for i, piece in enumerate(pieces)]
    return slicer._unslice_batch(tuple(pieces), "x")


# ---------------------------------------------------------------------------------------------------- slicing
@pytest.mark.parametrize("strides, pad_mode, expected", [
    # stride < window: overlapping windows; the one reaching the end is the last
    (2, "drop", [[0, 1, 2], [2, 3, 4], [4, 5, 6]]),
    # stride == window (the default): tiles; the tail [6] is handled by pad_mode
    ((), "drop", [[0, 1, 2], [3, 4, 5]]),
    ((), "partial", [[0, 1, 2], [3, 4, 5], [6]]),
    ((), "constant", [[0, 1, 2], [3, 4, 5], [6, -1, -1]]),
    ((), "nopad", [[0, 1, 2], [3, 4, 5], [4, 5, 6]]),
    ((), "mirror", [[0, 1, 2], [3, 4, 5], [6, 5, 4]]),
    # stride > window: 3 is skipped; the window at 4 ends exactly at the end
    (4, "drop", [[0, 1, 2], [4, 5, 6]]),
    # stride > window with a tail: cells 3 and 4 are skipped, the last window is padded / cut / moved
    (5, "constant", [[0, 1, 2], [5, 6, -1]]),
    (5, "partial", [[0, 1, 2], [5, 6]]),
    (5, "nopad", [[0, 1, 2], [4, 5, 6]]),
    (5, "mirror", [[0, 1, 2], [5, 6, 5]]),
    (5, "drop", [[0, 1, 2]]),
])
def test_windows_1d_by_hand(strides: Any, pad_mode: str, expected: list[list[int]]) -> None:
    slicer = SlidingSlicer([3], strides=strides, pad_mode=pad_mode, pad_val=-1, slice="x")
    assert windows(slicer, X7) == expected


def test_windows_2d_first_axis_slowest_and_whole_axes() -> None:
    data = np.arange(12).reshape(3, 4)
    whole_rows = SlidingSlicer([-1, 2], slice="x")
    assert whole_rows.strides == [0, 2]
    assert windows(whole_rows, data) == [[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [10, 11]]]
    tiles = SlidingSlicer([2, 2], pad_mode="partial", slice="x")
    assert windows(tiles, data) == [[[0, 1], [4, 5]], [[2, 3], [6, 7]], [[8, 9]], [[10, 11]]]
    # A single int stride applies to every sliding axis only
    assert SlidingSlicer([-1, 2, 3], strides=1, slice="x").strides == [0, 1, 1]


def test_window_longer_than_axis() -> None:
    assert windows(SlidingSlicer([5], pad_mode="partial", slice="x"), np.arange(3)) == [[0, 1, 2]]
    assert windows(SlidingSlicer([5], pad_mode="constant", pad_val=9, slice="x"), np.arange(3)) == [[0, 1, 2, 9, 9]]
    # A window shorter than the axis is honoured even with a stride past the end (FastEstimator keeps the axis)
    assert windows(SlidingSlicer([2], strides=4, slice="x"), np.arange(3)) == [[0, 1]]


@pytest.mark.parametrize("length, window", [(3, 6), (3, 9), (4, 11), (1, 3), (2, 5)])
def test_mirror_matches_numpy_reflect_also_for_long_pads(length: int, window: int) -> None:
    data = np.arange(length) * 10
    (piece,) = SlidingSlicer([window], pad_mode="mirror", slice="x")._slice_batch(data)
    np.testing.assert_array_equal(piece, np.pad(data, (0, window - length), mode="reflect"))


def test_constant_pad_casts_pad_val_to_the_dtype() -> None:
    slicer = SlidingSlicer([2], pad_mode="constant", pad_val=2.7, slice="x")
    (_, tail) = slicer._slice_batch(np.arange(3, dtype=np.int32))
    assert tail.dtype == np.int32 and tail.tolist() == [2, 2]


def test_squeeze_window_drops_and_restores_unit_axes() -> None:
    volume = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    slicer = SlidingSlicer([-1, 1, -1], slice="x", squeeze_window=True)
    pieces = slicer._slice_batch(volume)
    assert len(pieces) == 3 and all(piece.shape == (2, 4) for piece in pieces)
    np.testing.assert_array_equal(pieces[1], volume[:, 1, :])
    np.testing.assert_array_equal(slicer._unslice_batch(tuple(pieces), "x"), volume)
    assert SlidingSlicer([-1, 1, -1], slice="x")._slice_batch(volume)[0].shape == (2, 1, 4)


# ---------------------------------------------------------------------------------------------------- un-slicing
@pytest.mark.parametrize("pad_mode", ["drop", "partial", "constant", "nopad", "mirror"])
@pytest.mark.parametrize("unslice_mode", ["avg", "sum"])
def test_round_trip_every_pad_and_unslice_mode(pad_mode: str, unslice_mode: str) -> None:
    data = np.arange(7, dtype=np.float32) + 1
    slicer = SlidingSlicer([3], strides=2, pad_mode=pad_mode, pad_val=-5, unslice_mode=unslice_mode, slice="x")
    fused = round_trip(slicer, data)
    assert fused.dtype == np.float32 and fused.shape == (7,)
    if unslice_mode == "avg":
        np.testing.assert_array_equal(fused, data)  # the mean of equal copies is the value
    else:
        # windows [0:3] [2:5] [4:7] (nopad: same, as 4 + 3 == 7): cells 2 and 4 are covered twice
        np.testing.assert_array_equal(fused, data * np.array([1, 1, 2, 1, 2, 1, 1]))


@pytest.mark.parametrize("pad_mode", ["drop", "partial", "constant", "nopad", "mirror"])
def test_round_trip_2d_tiles(pad_mode: str) -> None:
    data = np.arange(35, dtype=np.float64).reshape(5, 7)
    slicer = SlidingSlicer([2, 3], pad_mode=pad_mode, pad_val=-1, slice="x")
    fused = round_trip(slicer, data)
    expected = data.copy()
    if pad_mode == "drop":
        expected[4, :] = -1  # the last row and column were never seen
        expected[:, 6] = -1
    np.testing.assert_array_equal(fused, expected)


def test_overlap_arithmetic_by_hand() -> None:
    # Windows [0:3] [2:5] [4:7] of 0..6, each piece offset by 10 * its index: [0 1 2] [12 13 14] [24 25 26]
    def offset(i: int, piece: Any) -> Any:
        return piece + 10 * i
    avg = SlidingSlicer([3], strides=2, slice="x")
    np.testing.assert_allclose(round_trip(avg, X7.astype(np.float64), offset),
                               [0, 1, (2 + 12) / 2, 13, (14 + 24) / 2, 25, 26])
    total = SlidingSlicer([3], strides=2, unslice_mode="sum", slice="x")
    fused = round_trip(total, X7, offset)
    assert fused.dtype == X7.dtype and fused.tolist() == [0, 1, 2 + 12, 13, 14 + 24, 25, 26]
    # 'avg' of integers gives float32, as in FastEstimator
    fused = round_trip(avg, X7, offset)
    assert fused.dtype == np.float32 and fused.tolist() == [0, 1, 7, 13, 19, 25, 26]


def test_nopad_overlap_and_uncovered_cells_get_pad_val() -> None:
    # nopad moves the last window back to [4:7]: cells 4 and 5 are covered twice
    nopad = SlidingSlicer([3], pad_mode="nopad", unslice_mode="sum", slice="x")
    assert round_trip(nopad, X7).tolist() == [0, 1, 2, 3, 8, 10, 6]
    # stride 4 > window 3 skips cells 3 and 7; drop leaves the tail 6 unseen
    gaps = SlidingSlicer([3], strides=4, pad_mode="partial", pad_val=-1, slice="x")
    assert round_trip(gaps, np.arange(8)).tolist() == [0, 1, 2, -1, 4, 5, 6, -1]
    drop = SlidingSlicer([3], pad_val=-1, slice="x")
    assert round_trip(drop, X7).tolist() == [0, 1, 2, 3, 4, 5, -1]


def test_whole_axes_take_their_size_from_the_pieces() -> None:
    """A model may change an axis kept whole (3 channels in, 1 out); the sliding axis is restored to 8."""
    images = np.arange(48, dtype=np.float32).reshape(2, 3, 8)
    slicer = SlidingSlicer([-1, -1, 4], strides=[0, 0, 2], slice="x")
    pieces = [piece.sum(axis=1, keepdims=True) for piece in slicer._slice_batch(images)]
    np.testing.assert_allclose(slicer._unslice_batch(tuple(pieces), "mask"), images.sum(axis=1, keepdims=True))


def test_unslice_only_with_static_shape_and_stateless_checkpoint() -> None:
    data = {"x": np.arange(6, dtype=np.float32).reshape(1, 6)}
    cutter = SlidingSlicer([-1, 2], slice="x", unslice=None)
    fuser = SlidingSlicer([-1, 2], unslice="y", unslice_shape=[1, 6])
    minibatches = [{**mb, "y": mb["x"] * 2} for mb in forward_slicers([cutter, fuser], data)]
    merged = reverse_slicers([cutter, fuser], minibatches, data)
    np.testing.assert_array_equal(merged["y"], data["x"] * 2)
    np.testing.assert_array_equal(merged["x"], data["x"])  # not un-sliced: the original
    assert cutter.state_dict() == {} and fuser.state_dict() == {}
    fuser.load_state_dict({})
    clone = pickle.loads(pickle.dumps(fuser))
    np.testing.assert_array_equal(clone._unslice_batch(tuple(mb["y"] for mb in minibatches), "y"), data["x"] * 2)


def test_several_keys_share_the_sliding_axes() -> None:
    data = {"image": np.zeros((2, 3, 6)), "mask": np.ones((2, 1, 6))}
    slicer = SlidingSlicer([-1, -1, 3], slice=["image", "mask"])
    minibatches = forward_slicers([slicer], data)
    assert [(mb["image"].shape, mb["mask"].shape) for mb in minibatches] == [((2, 3, 3), (2, 1, 3))] * 2
    merged = reverse_slicers([slicer], minibatches, data)
    assert merged["image"].shape == (2, 3, 6) and merged["mask"].shape == (2, 1, 6)
    with pytest.raises(ValueError, match=r"sliding axes \[2\].*'mask': \[7\]"):
        forward_slicers([slicer], {"image": np.zeros((2, 3, 6)), "mask": np.ones((2, 1, 7))})


def test_fastestimator_argument_order_and_defaults() -> None:
    slicer = SlidingSlicer([2, 2], 1, "constant", 9, "x")
    assert (slicer.window_size, slicer.strides, slicer.pad_mode, slicer.pad_val) == ([2, 2], [1, 1], "constant", 9)
    assert (slicer.slice_inputs, slicer.unslice_inputs, slicer.unslice_mode) == (["x"], ["x"], "avg")
    default = SlidingSlicer([4], slice="x")
    assert (default.strides, default.pad_mode, default.pad_val, default.unslice_shape) == ([4], "drop", 0.0, None)
    assert SlidingSlicer([4], slice="x", unslice=None).unslice_inputs == []
    assert SlidingSlicer(4, slice="x").window_size == [4]
    assert fe.slicer.SlidingSlicer is SlidingSlicer


# ---------------------------------------------------------------------------------------------------- frameworks
def _convert(data: np.ndarray, framework: str) -> Any:
    if framework == "torch":
        import torch
        return torch.as_tensor(data)
    import tensorflow as tf
    return tf.constant(data)


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("pad_mode", ["drop", "partial", "constant", "nopad", "mirror"])
def test_tensors_match_numpy(framework: str, pad_mode: str) -> None:
    data = np.random.default_rng(1).normal(size=(2, 5, 6))
    slicer = SlidingSlicer([-1, 3, 4], strides=[0, 2, 3], pad_mode=pad_mode, pad_val=0.5, slice="x")
    expected = slicer._slice_batch(data)
    got = slicer._slice_batch(_convert(data, framework))
    assert len(got) == len(expected)
    for piece, reference in zip(got, expected):
        assert type(piece).__module__.split(".")[0] == {"torch": "torch", "tf": "tensorflow"}[framework]
        np.testing.assert_array_equal(to_number(piece), reference)
    for unslice_mode in ("avg", "sum"):
        slicer.unslice_mode = unslice_mode
        fused = slicer._unslice_batch(tuple(p * 3 for p in got), "x")
        np.testing.assert_allclose(to_number(fused), slicer._unslice_batch(tuple(p * 3 for p in expected), "x"))
        assert type(fused).__module__.split(".")[0] == type(got[0]).__module__.split(".")[0]
        assert to_number(fused).dtype == np.float64  # the pieces' dtype is kept


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_tensor_dtypes(framework: str) -> None:
    data = _convert(np.arange(7, dtype=np.int32), framework)
    avg = SlidingSlicer([3], strides=2, slice="x")
    assert to_number(round_trip(avg, data)).dtype == np.float32
    total = SlidingSlicer([3], strides=2, unslice_mode="sum", pad_mode="constant", pad_val=1.9, slice="x")
    pieces = total._slice_batch(_convert(np.arange(8, dtype=np.int32), framework))
    assert to_number(pieces[-1]).tolist() == [6, 7, 1]  # windows [0:3] [2:5] [4:7] [6:9], 1.9 truncated to 1
    fused = to_number(total._unslice_batch(tuple(pieces), "x"))
    assert fused.dtype == np.int32 and fused.tolist() == [0, 1, 4, 3, 8, 5, 12, 7]  # padding cut away


# ---------------------------------------------------------------------------------------------------- Network
MIX = np.array([[1.0, -2.0], [0.5, 3.0]], dtype=np.float32)  # y = x_window @ MIX mixes the two cells of a window


def mixing_model_fn(framework: str) -> Any:
    if framework == "torch":
        import torch

        def make() -> Any:
            model = torch.nn.Linear(2, 2, bias=False)
            with torch.no_grad():
                model.weight.copy_(torch.tensor(MIX.T))
            return model
        return make
    import keras

    def make_tf() -> Any:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, use_bias=False)])
        model.set_weights([MIX])
        return model
    return make_tf


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("strides, pad_mode, unslice_mode", [(1, "drop", "avg"), (2, "constant", "sum"),
                                                             (2, "nopad", "avg")])
def test_network_step_matches_model_on_each_window(framework: str, strides: int, pad_mode: str,
                                                   unslice_mode: str) -> None:
    x = np.random.default_rng(2).normal(size=(4, 5)).astype(np.float32)
    slicer = SlidingSlicer([-1, 2], strides=strides, pad_mode=pad_mode, pad_val=0.25, slice="x", unslice="y_pred",
                           unslice_mode=unslice_mode)
    model = fe.build(mixing_model_fn(framework), optimizer_fn=None)
    network = fe.Network([ModelOp(model=model, inputs="x", outputs="y_pred")], slicers=slicer)
    with network(mode="eval", epoch=1, ds_id="", desired_output_keys={"y_pred"}):
        got = to_number(network.run_step({"x": x})["y_pred"])
    # By hand: run the model on each window, overlap-add, divide by the coverage for 'avg'
    padded = np.concatenate([x, np.full((4, 1), 0.25, np.float32)], axis=1)  # room for a window at 4 (constant)
    starts = {"drop": [0, 1, 2, 3], "constant": [0, 2, 4], "nopad": [0, 2, 3]}[pad_mode]
    total, counts = np.zeros((4, 6)), np.zeros((4, 6))
    for start in starts:
        total[:, start:start + 2] += padded[:, start:start + 2] @ MIX
        counts[:, start:start + 2] += 1
    expected = total[:, :5] / (np.maximum(counts[:, :5], 1) if unslice_mode == "avg" else 1)
    assert counts[:, :5].min() == 1  # every cell covered: nothing filled with pad_val
    assert got.shape == (4, 5)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs, match", [
    ({"window_size": [0]}, r"window_size.*\[0\]"),
    ({"window_size": [-2, 3]}, r"window_size.*\[-2, 3\]"),
    ({"window_size": [1.5]}, r"window_size.*1\.5"),
    ({"window_size": []}, r"window_size.*\[\]"),
    ({"window_size": [True]}, r"window_size.*True"),
    ({"window_size": [2], "strides": 0}, r"strides.*0"),
    ({"window_size": [2], "strides": -1}, r"strides.*-1"),
    ({"window_size": [2, 2], "strides": [1]}, r"strides \[1\]"),
    ({"window_size": [-1, 2], "strides": [1, 1]}, r"strides \[1, 1\].*axes \[0\]"),
    ({"window_size": [2], "strides": [0]}, r"strides \[0\].*axes \[0\]"),
    ({"window_size": [2], "pad_mode": "reflect"}, r"pad_mode.*'mirror'.*'reflect'"),
    ({"window_size": [2], "unslice_mode": "last"}, r"unslice_mode.*'avg'.*'last'"),
    ({"window_size": [2], "pad_val": "zero"}, r"pad_val.*'zero'"),
    ({"window_size": [2], "unslice_shape": [3, 4]}, r"unslice_shape \[3, 4\]"),
    ({"window_size": [2], "unslice_shape": [0]}, r"unslice_shape.*\[0\]"),
    ({"window_size": [2], "squeeze_window": "yes"}, r"squeeze_window.*'yes'"),
])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SlidingSlicer(slice="x", **kwargs)


def test_bad_data_and_pieces() -> None:
    with pytest.raises(ValueError, match=r"un-slices \['y'\].*unslice_shape"):
        SlidingSlicer([2], unslice="y")
    with pytest.raises(ValueError, match=r"window_size \[2, 2\].*shape \[7\]"):
        SlidingSlicer([2, 2], slice="x")._slice_batch(X7)
    with pytest.raises(ValueError, match=r"'nopad'.*length 2.*window_size is 3"):
        SlidingSlicer([3], pad_mode="nopad", slice="x")._slice_batch(np.arange(2))
    with pytest.raises(ValueError, match=r"no window along axis 0.*length 2.*window_size is 3.*'drop'"):
        SlidingSlicer([3], slice="x")._slice_batch(np.arange(2))
    slicer = SlidingSlicer([3], strides=2, slice="x")
    pieces = slicer._slice_batch(X7)
    with pytest.raises(ValueError, match=r"'x'.*2 pieces.*makes 3 windows"):
        slicer._unslice_batch(tuple(pieces[:2]), "x")
    with pytest.raises(ValueError, match=r"'x'.*piece 0 has shape \[2\]"):
        slicer._unslice_batch((pieces[0][:2], *pieces[1:]), "x")
    with pytest.raises(ValueError, match=r"'y'.*sliced nothing yet"):
        SlidingSlicer([3], slice="x")._unslice_batch(tuple(pieces), "y")
