"""Dice: hand-computed scores (binary, multi-channel, argmax rule, soft), channel layouts per framework, the
per-sample epoch mean, named and per-dataset keys, error bands, checkpoint state, argument checks and an
in-process Estimator run."""

from __future__ import annotations

import copy
import os
import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.summary import ValWithError  # noqa: E402
from fe_ray.trace import Data  # noqa: E402
from fe_ray.trace.metric import Dice  # noqa: E402
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp  # noqa: E402

# Single-channel masks of 2x2 pixels, channels last (numpy). With threshold 0.5:
#   A: true {0,1}, pred {0,2}  -> 2*1/(2+2) = 0.5       B: true {0}, pred {0} -> 1.0
#   C: both empty               -> no score (NaN)       D: true {3}, pred {}  -> 0.0
TRUE_AB = np.array([[[1, 1], [0, 0]], [[1, 0], [0, 0]]], dtype=np.float32)[..., None]
PRED_AB = np.array([[[0.9, 0.4], [0.6, 0.1]], [[0.7, 0.0], [0.0, 0.0]]], dtype=np.float32)[..., None]
TRUE_CD = np.array([[[0, 0], [0, 0]], [[0, 0], [0, 1]]], dtype=np.float32)[..., None]
PRED_CD = np.array([[[0.2, 0.2], [0.2, 0.2]], [[0.0, 0.0], [0.0, 0.0]]], dtype=np.float32)[..., None]
BINARY = [{"y": TRUE_AB, "pred": PRED_AB}, {"y": TRUE_CD, "pred": PRED_CD}]

# Three channels (0 background, 1 liver, 2 tumor) of 4 pixels in torch layout (batch, C, 1, 4). With threshold 0.5:
#   sample 1: ch0 true {0} pred {0,1} -> 2/3; ch1 true {1,2} pred {1,2,3} -> 0.8; ch2 true {3} pred {} -> 0
#   sample 2: ch0 true all, pred all  -> 1;   ch1 both empty -> no score;        ch2 true {2,3} pred {2} -> 2/3
S1_TRUE = [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
S1_PRED = [[0.8, 0.6, 0.0, 0.0], [0.0, 0.9, 0.7, 0.9], [0.1, 0.0, 0.0, 0.2]]
S2_TRUE = [[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 1, 1]]
S2_PRED = [[0.9, 0.9, 0.9, 0.9], [0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 0.6, 0.0]]
LIVER = 0.8
TUMOR = (0.0 + 2 / 3) / 2


def _channels_first(*samples: list[list[float]]) -> np.ndarray:
    return np.array(samples, dtype=np.float32)[:, :, None, :]  # (batch, C, 1, 4)


def _channels_last(*samples: list[list[float]]) -> np.ndarray:
    return np.moveaxis(_channels_first(*samples), 1, -1)  # (batch, 1, 4, C)


def _epoch(trace: Dice, batches: list[dict[str, Any]], ds_ids: list[str] | None = None) -> dict[str, Any]:
    """Run one epoch of ``batches`` (batch i in dataset ``ds_ids[i]``) and return what the trace logged."""
    trace.system = SimpleNamespace(ds_id="")  # type: ignore[assignment]
    trace.on_epoch_begin(Data())
    for index, batch in enumerate(batches):
        trace.system.ds_id = ds_ids[index] if ds_ids else ""
        trace.on_batch_end(Data(batch))
    data = Data()
    trace.on_epoch_end(data)
    return dict(data.read_logs())


def test_binary_masks_average_per_sample_and_skip_empty_ones() -> None:
    logs = _epoch(Dice("y", "pred"), BINARY)
    # (0.5 + 1 + 0) / 3 over samples; a mean of batch means would give (0.75 + 0) / 2, and counting C as 0 gives 0.375
    assert list(logs) == ["Dice"] and logs["Dice"] == pytest.approx(0.5)
    with_std = _epoch(Dice("y", "pred", include_std=True, output_name="dice"), BINARY)["dice"]
    std = np.sqrt(((0.5 - 0.5) ** 2 + (1 - 0.5) ** 2 + (0 - 0.5) ** 2) / 3)
    assert isinstance(with_std, ValWithError)
    np.testing.assert_allclose(with_std, (0.5 - std, 0.5, 0.5 + std), rtol=1e-6)
    assert str(ValWithError(0.25, 0.5, 0.75)) == "(0.25, 0.5, 0.75)"  # the Logger's rendering
    # batching does not change the value: all four samples in one batch
    joined = {key: np.concatenate([BINARY[0][key], BINARY[1][key]]) for key in ("y", "pred")}
    assert _epoch(Dice("y", "pred"), [joined])["Dice"] == pytest.approx(0.5)


def test_threshold_none_scores_the_soft_predictions() -> None:
    # A: 2*(0.9+0.4)/(2.0+2) = 0.65; B: 2*0.7/(0.7+1); C: prediction not empty (0.2) -> 0, counted; D: 0
    expected = (0.65 + 1.4 / 1.7 + 0.0 + 0.0) / 4
    assert _epoch(Dice("y", "pred", threshold=None), BINARY)["Dice"] == pytest.approx(expected, rel=1e-6)


def test_multi_channel_exclusion_and_named_channels() -> None:
    batches = [{"y": _channels_last(S1_TRUE), "pred": _channels_last(S1_PRED)},
               {"y": _channels_last(S2_TRUE), "pred": _channels_last(S2_PRED)}]
    # all channels: background (2/3 + 1) / 2, liver 0.8 (one score), tumor 1/3
    plain = _epoch(Dice("y", "pred"), batches)
    assert list(plain) == ["Dice"] and plain["Dice"] == pytest.approx((5 / 6 + LIVER + TUMOR) / 3)
    trace = Dice("y", "pred", exclude_channels=0, channel_mapping={1: "liver", 2: "tumor"})
    assert trace.outputs == ["Dice", "Dice_liver", "Dice_tumor"]
    named = _epoch(trace, batches)
    assert list(named) == ["Dice_liver", "Dice_tumor", "Dice"]
    assert named["Dice_liver"] == pytest.approx(LIVER) and named["Dice_tumor"] == pytest.approx(TUMOR)
    assert named["Dice"] == pytest.approx((LIVER + TUMOR) / 2)
    # an unnamed channel is reported by its index; include_std: channel std, and the mean of the channel stds
    partial = _epoch(Dice("y", "pred", exclude_channels=[0], channel_mapping={1: "liver"}, include_std=True), batches)
    assert sorted(partial) == ["Dice", "Dice_2", "Dice_liver"]
    np.testing.assert_allclose(partial["Dice_liver"], (LIVER, LIVER, LIVER), rtol=1e-6)
    np.testing.assert_allclose(partial["Dice_2"], (0.0, TUMOR, 2 * TUMOR), atol=1e-6)
    mean, std = (LIVER + TUMOR) / 2, (0.0 + TUMOR) / 2
    np.testing.assert_allclose(partial["Dice"], (mean - std, mean, mean + std), rtol=1e-6)


def test_channel_keys_need_more_than_one_scored_channel() -> None:
    # only sample 2's liver channel (empty in both): channel 1 never scored, channel 0 excluded but scored
    batch = {"y": _channels_last(S2_TRUE)[:, :, :, :2], "pred": _channels_last(S2_PRED)[:, :, :, :2]}
    logs = _epoch(Dice("y", "pred", exclude_channels=0, channel_mapping={1: "liver"}), [batch])
    assert list(logs) == ["Dice"] and np.isnan(logs["Dice"])
    # nothing excluded: the background channel alone is scored, so no channel keys despite both being named
    logs = _epoch(Dice("y", "pred", channel_mapping={0: "bg", 1: "liver"}), [batch])
    assert list(logs) == ["Dice"] and logs["Dice"] == pytest.approx(1.0)
    # the excluded channel counts towards "more than one": sample 1's background and liver channels, both scored
    scored = {"y": _channels_last(S1_TRUE)[..., :2], "pred": _channels_last(S1_PRED)[..., :2]}
    logs = _epoch(Dice("y", "pred", exclude_channels=0, channel_mapping={1: "liver"}), [scored])
    assert list(logs) == ["Dice_liver", "Dice"] and logs["Dice_liver"] == logs["Dice"] == pytest.approx(LIVER)


def test_channel_axis_follows_the_framework() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    kwargs: dict[str, Any] = {"exclude_channels": 0, "channel_mapping": {1: "liver", 2: "tumor"}}
    first = [{"y": torch.as_tensor(_channels_first(S1_TRUE)), "pred": torch.as_tensor(_channels_first(S1_PRED))},
             {"y": torch.as_tensor(_channels_first(S2_TRUE)), "pred": torch.as_tensor(_channels_first(S2_PRED))}]
    last = [{"y": tf.constant(_channels_last(S1_TRUE)), "pred": tf.constant(_channels_last(S1_PRED))},
            {"y": tf.constant(_channels_last(S2_TRUE)), "pred": tf.constant(_channels_last(S2_PRED))}]
    for batches in (first, last):
        logs = _epoch(Dice("y", "pred", **kwargs), batches)
        assert logs["Dice_liver"] == pytest.approx(LIVER) and logs["Dice_tumor"] == pytest.approx(TUMOR)


def test_mask_overlap_false_keeps_each_pixels_top_channel() -> None:
    # Pixels a, b, c (channels last); a and b belong to channel 1, c to channel 0; c ties channels 0 and 1.
    y_pred = np.array([[[[0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.4, 0.4, 0.2]]]], dtype=np.float32)
    y_true = np.array([[[[0, 1, 0], [0, 1, 0], [1, 0, 0]]]], dtype=np.float32)
    batch = {"y": y_true, "pred": y_pred}
    # argmax rule: ch0 pred {c} -> 1; ch1 pred {a, c} (a tie keeps both) vs {a, b} -> 0.5; ch2 pred {b}, true {} -> 0
    names = {0: "bg", 1: "one", 2: "two"}
    argmax = _epoch(Dice("y", "pred", threshold=0.0, mask_overlap=False, channel_mapping=names), [batch])
    assert (argmax["Dice_bg"], argmax["Dice_one"], argmax["Dice_two"]) == pytest.approx((1.0, 0.5, 0.0))
    assert argmax["Dice"] == pytest.approx(0.5)
    # overlapping masks at threshold 0.0: every pixel in every channel -> 2/4, 4/5, 0
    overlap = _epoch(Dice("y", "pred", threshold=0.0), [batch])
    assert overlap["Dice"] == pytest.approx((0.5 + 0.8 + 0.0) / 3)


def test_per_sample_logs() -> None:
    trace = Dice("y", "pred", exclude_channels=0, channel_mapping={1: "liver", 2: "tumor"})
    data = Data({"y": _channels_last(S1_TRUE, S2_TRUE), "pred": _channels_last(S1_PRED, S2_PRED)})
    trace.on_epoch_begin(Data())
    trace.on_batch_end(data)
    logs = data.read_per_instance_logs()
    assert sorted(logs) == ["Dice", "Dice_liver", "Dice_tumor"]
    np.testing.assert_allclose(logs["Dice_tumor"], [0.0, 2 / 3], rtol=1e-6)
    assert logs["Dice_liver"][0] == pytest.approx(0.8) and np.isnan(logs["Dice_liver"][1])
    # a sample's value is the mean of its kept channels (NaN if one is unscored)
    assert logs["Dice"][0] == pytest.approx(0.4) and np.isnan(logs["Dice"][1])


def test_per_dataset_keys() -> None:
    s1 = {"y": _channels_last(S1_TRUE), "pred": _channels_last(S1_PRED)}
    s2 = {"y": _channels_last(S2_TRUE), "pred": _channels_last(S2_PRED)}
    kwargs: dict[str, Any] = {"exclude_channels": 0, "channel_mapping": {1: "liver", 2: "tumor"}}
    trace = Dice("y", "pred", **kwargs)
    assert trace.get_outputs(["a", "b"]) == ["Dice", "Dice_liver", "Dice_tumor", "Dice|a", "Dice_liver|a",
                                             "Dice_tumor|a", "Dice|b", "Dice_liver|b", "Dice_tumor|b"]
    logs = _epoch(trace, [s1, s2, s1], ds_ids=["a", "b", "a"])
    # a: liver 0.8, tumor 0 (twice); b: liver unscored, so only the tumor channel (2/3) is left, without channel keys
    assert logs["Dice_liver|a"] == pytest.approx(0.8) and logs["Dice_tumor|a"] == pytest.approx(0.0)
    assert logs["Dice|a"] == pytest.approx(0.4)
    assert logs["Dice|b"] == pytest.approx(2 / 3) and "Dice_liver|b" not in logs and "Dice_tumor|b" in logs
    assert logs["Dice"] == pytest.approx((0.8 + 2 / 9) / 2)  # tumor over all: (0 + 2/3 + 0) / 3
    for off in (Dice("y", "pred", per_ds=False, **kwargs), Dice("y", "pred", output_name="Dice|x", **kwargs)):
        logs = _epoch(off, [s1, s2], ds_ids=["a", "b"])
        assert not any(key.endswith(("|a", "|b")) for key in logs) and off.get_outputs(["a"]) == off.outputs


def test_state_round_trip_mid_epoch_gives_the_uninterrupted_value() -> None:
    s1 = {"y": _channels_last(S1_TRUE), "pred": _channels_last(S1_PRED)}
    s2 = {"y": _channels_last(S2_TRUE), "pred": _channels_last(S2_PRED)}
    batches, ds_ids = [s1, s2, s2, s1], ["a", "b", "a", "b"]

    def make() -> Dice:
        return Dice("y", "pred", exclude_channels=0, channel_mapping={1: "liver", 2: "tumor"}, include_std=True)

    expected = _epoch(make(), batches, ds_ids)
    first = make()
    first.system = SimpleNamespace(ds_id="")  # type: ignore[assignment]
    first.on_epoch_begin(Data())
    for batch, ds_id in zip(batches[:2], ds_ids[:2]):
        first.system.ds_id = ds_id
        first.on_batch_end(Data(batch))
    state = pickle.loads(pickle.dumps(copy.deepcopy(first.state_dict())))  # as a checkpoint stores it
    first.on_batch_end(Data(batches[2]))  # later batches must not leak into the saved state
    resumed = make()
    resumed.system = SimpleNamespace(ds_id="")  # type: ignore[assignment]
    resumed.load_state_dict(state)
    for batch, ds_id in zip(batches[2:], ds_ids[2:]):
        resumed.system.ds_id = ds_id
        resumed.on_batch_end(Data(batch))
    data = Data()
    resumed.on_epoch_end(data)
    assert dict(data.read_logs()) == expected and "Dice_tumor|b" in expected  # exactly, not approximately
    resumed.on_epoch_begin(Data())
    assert resumed.state_dict() == {"scores": {}, "ds_scores": {}}  # a new epoch starts over


@pytest.mark.parametrize("kwargs, message", [
    ({"threshold": "0.5"}, r"threshold must be a number or None, got '0.5'"),
    ({"threshold": float("nan")}, r"threshold must be a number or None, got nan"),
    ({"exclude_channels": -1}, r"exclude_channels must be .* indices \(ints >= 0\), got -1; e.g. exclude_channels=0"),
    ({"exclude_channels": ["0"]}, r"exclude_channels .* got \['0'\]"),
    ({"channel_mapping": ["liver"]}, r"channel_mapping must be a dict .* got \['liver'\]"),
    ({"channel_mapping": {"1": "liver"}}, r"channel_mapping keys must be channel indices .* got \['1'\]"),
    ({"channel_mapping": {1: "a|b"}}, r"free of '\|' .* got \['a\|b'\]"),
    ({"output_name": ""}, r"output_name must be a non-empty string, got ''"),
])
def test_argument_errors_name_the_value_and_the_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Dice("y", "pred", **kwargs)


def test_mask_errors_name_the_key_and_the_fix() -> None:
    trace = Dice("y", "pred")
    with pytest.raises(ValueError, match=r"predicted mask values in \[0, 1\], got values from -2 to 0.7 under 'pred'"):
        trace.on_batch_end(Data({"y": TRUE_AB, "pred": PRED_AB * 3 - 2}))
    with pytest.raises(ValueError, match=r"ground-truth mask values .* from 0 to 2 under 'y'.*one-hot"):
        trace.on_batch_end(Data({"y": TRUE_AB * 2, "pred": PRED_AB}))
    with pytest.raises(ValueError, match=r"predicted mask values .* got values from nan"):
        trace.on_batch_end(Data({"y": TRUE_AB, "pred": PRED_AB * np.nan}))
    with pytest.raises(ValueError, match=r"one shape, got \[2, 2, 2\] under 'y' and \[2, 2, 2, 1\] under 'pred'"):
        trace.on_batch_end(Data({"y": TRUE_AB[..., 0], "pred": PRED_AB}))
    assert trace.scores == {}


def test_estimator_logs_dice_per_dataset(capsys: pytest.CaptureFixture) -> None:
    """In-process fit: masks from the pipeline reach the trace as torch tensors (channels first), two eval
    datasets give per-dataset keys, and the Logger prints the values."""
    train, evaluation = digits_arrays(n_train=8, n_eval=5)
    masks, preds = _channels_first(S1_TRUE, S2_TRUE, S1_TRUE, S2_TRUE, S2_TRUE), \
        _channels_first(S1_PRED, S2_PRED, S1_PRED, S2_PRED, S2_PRED)
    evaluation.update(mask=masks, mask_pred=preds)
    pipeline = ToyPipeline(train, evaluation, batch_size=8)
    # a: samples 1, 2, 1; b: samples 2, 2
    pipeline.data["eval"] = {"a": {key: value[:3] for key, value in evaluation.items()},
                             "b": {key: value[3:] for key, value in evaluation.items()}}
    trace = Dice("mask", "mask_pred", exclude_channels=0, channel_mapping={1: "liver", 2: "tumor"})
    estimator = fe.Estimator(pipeline, classifier_network(torch_mlp()), epochs=1, traces=[trace], log_steps=1)
    history = estimator.fit().history["eval"]
    # liver: 0.8 twice (sample 2 unscored); tumor: 0, 2/3, 0, 2/3, 2/3 -> 0.4
    assert history["Dice_liver"][1] == pytest.approx(0.8) and history["Dice_tumor"][1] == pytest.approx(0.4)
    assert history["Dice"][1] == pytest.approx(0.6)
    assert history["Dice|a"][1] == pytest.approx((0.8 + 2 / 9) / 2)
    assert history["Dice|b"][1] == pytest.approx(2 / 3) and "Dice_liver|b" not in history
    assert "Dice_liver: 0.8;" in capsys.readouterr().out
