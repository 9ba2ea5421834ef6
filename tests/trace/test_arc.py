"""LRScheduler(lr_fn="arc"): the controller's inputs, its weights file (found, missing, downloaded), its decisions
applied to the learning rate during a fit, and its history in checkpoints."""

from __future__ import annotations

import io
import os
import urllib.request
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

pytest.importorskip("tensorflow")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_lr  # noqa: E402
from fe_ray.schedule import ARC  # noqa: E402
from fe_ray.schedule.arc import MULTIPLIERS, build_controller, default_weights_path, stretch  # noqa: E402
from fe_ray.trace.adapt import LRScheduler  # noqa: E402
from tests.estimator_helpers import ToyPipeline, classifier_network, digits_arrays, torch_mlp  # noqa: E402


def _write_weights(path: str, choice: int | None = None, seed: int = 0) -> Any:
    """Save a controller in the legacy HDF5 weights layout FastEstimator's arc.h5 uses; with ``choice``, its last
    layer always picks that class."""
    import h5py
    import keras
    from keras.src.legacy.saving import legacy_h5_format

    keras.utils.set_random_seed(seed)
    model = build_controller()
    if choice is not None:
        kernel, bias = model.layers[-1].get_weights()
        bias = np.zeros_like(bias)
        bias[choice] = 10.0
        model.layers[-1].set_weights([np.zeros_like(kernel), bias])
    with h5py.File(path, "w") as file:
        legacy_h5_format.save_weights_to_hdf5_group(file, model)
    return model


@pytest.fixture
def weights(tmp_path: Any) -> str:
    path = str(tmp_path / "arc.h5")
    _write_weights(path, choice=2)
    return path


# ------------------------------------------------------------------------------------------------ the inputs
def test_stretch_is_opencv_style_linear_and_nearest_resampling() -> None:
    # linear: destination i reads the source at (i + 0.5) * n / size - 0.5, clamped: -0.25, 0.25, 0.75, 1.25
    assert stretch([0.0, 10.0], 4).ravel().tolist() == [0.0, 2.5, 7.5, 10.0]
    assert stretch([1.0, 2.0, 3.0], 6, nearest=True).ravel().tolist() == [1, 1, 2, 2, 3, 3]
    assert stretch([4.0, 8.0, 6.0, 2.0], 2, nearest=True).ravel().tolist() == [4.0, 6.0]
    assert stretch([5.0], 3).shape == (3, 1)
    with pytest.raises(ValueError, match="empty"):
        stretch([], 3)


def test_controller_inputs_pad_missing_cycles(weights: str) -> None:
    arc = ARC(frequency=1, weights_path=weights)
    with pytest.raises(ValueError, match="no complete training cycle"):
        arc.controller_inputs()
    for loss in (3.0, 2.0, 1.0, 0.0):
        arc.accumulate_single_train_loss(loss)
    arc.accumulate_all_lrs(0.01)
    arc.gather_multiple_train_losses()
    arc.accumulate_single_eval_loss(5.0)
    arc.accumulate_single_eval_loss(7.0)
    arc.gather_multiple_eval_losses()
    inputs = arc.controller_inputs()
    assert inputs.shape == (1, 300, 3) and inputs.dtype == np.float32
    train, evals, rates = inputs[0, :, 0], inputs[0, :, 1], inputs[0, :, 2]
    # one cycle seen: the first 200 points are padding (0 for the losses, 1 for the rate ratio)
    assert np.all(train[:200] == 0) and np.all(evals[:200] == 0) and np.all(rates == 1.0)
    stretched = np.interp((np.arange(100) + 0.5) * 0.04 - 0.5, np.arange(4), [3.0, 2.0, 1.0, 0.0])
    expected = (stretched - stretched.mean()) / stretched.std()
    np.testing.assert_allclose(train[200:], expected, rtol=1e-5, atol=1e-6)
    # the evaluation losses are standardised first (-1, +1), then repeated
    assert evals[200:250].tolist() == [-1.0] * 50 and evals[250:].tolist() == [1.0] * 50
    # a second cycle at a lower rate: the rates are relative to the oldest one seen
    arc.accumulate_single_train_loss(0.5)
    arc.accumulate_all_lrs(0.005)
    arc.gather_multiple_train_losses()
    rates = arc.controller_inputs()[0, :, 2]
    assert np.all(rates[:100] == 1.0) and np.all(rates[100:200] == 1.0) and np.all(rates[200:] == 0.5)


# ----------------------------------------------------------------------------------------------- the weights
def test_weights_load_from_the_legacy_h5_layout(tmp_path: Any) -> None:
    path = str(tmp_path / "arc.h5")
    saved = _write_weights(path, seed=3)
    arc = ARC(weights_path=path)
    for mine, theirs in zip(arc.model().get_weights(), saved.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    arc.accumulate_single_train_loss(1.0)
    arc.accumulate_single_train_loss(0.5)
    arc.accumulate_all_lrs(0.1)
    arc.gather_multiple_train_losses()
    probabilities = np.asarray(saved(arc.controller_inputs(), training=False))
    assert arc.predict_next_multiplier() == MULTIPLIERS[int(np.argmax(probabilities))]


def test_missing_weights_are_downloaded_to_the_cache_or_named(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                               weights: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cache = default_weights_path()
    assert cache == str(tmp_path / "home" / "fastestimator_data" / "arc_model" / "arc.h5")
    with pytest.raises(FileNotFoundError, match="is not a file"):
        ARC(weights_path=str(tmp_path / "nowhere.h5"))
    with pytest.raises(FileNotFoundError, match="copy FastEstimator's arc.h5 there"):
        ARC(download=False)

    def offline(url: str, timeout: float) -> Any:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError, match="downloading them from .* failed"):
        ARC()
    assert os.listdir(os.path.dirname(cache)) == []  # no partial file left behind

    with open(weights, "rb") as file:
        payload = file.read()
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(payload))
    arc = ARC()
    assert arc.weights_path == cache and open(cache, "rb").read() == payload
    assert ARC(download=False).weights_path == cache  # the cached file is used from now on
    model = torch_mlp()
    classifier_network(model)  # its UpdateOp names the loss 'ce'
    assert LRScheduler(model, lr_fn="arc").frequency == 3  # the ARC's default
    scheduler = LRScheduler(model, lr_fn="arc", frequency=4)
    assert isinstance(scheduler.lr_fn, ARC) and scheduler.lr_fn.frequency == 4 and scheduler.inputs == ["ce"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="frequency must be a positive int"):
        ARC(frequency=0)
    model = torch_mlp()
    with pytest.raises(ValueError, match="'arc' or an ARC"):
        LRScheduler(model, lr_fn="cosine")
    with pytest.raises(ValueError, match="loss keys"):  # no UpdateOp named the model's loss yet
        LRScheduler(model, lr_fn="arc")


# ------------------------------------------------------------------------------------------------ in a fit
def _fit(arc: ARC, epochs: int) -> tuple[Any, LRScheduler, Any]:
    model = torch_mlp(lr=0.05)
    network = classifier_network(model)
    scheduler = LRScheduler(model, lr_fn=arc)
    train, evaluation = digits_arrays(n_train=16, n_eval=8)
    estimator = fe.Estimator(ToyPipeline(train, evaluation, batch_size=8), network, epochs=epochs,
                             traces=[scheduler], log_steps=None)
    estimator.fit()
    return model, scheduler, estimator


def test_arc_multiplies_the_rate_every_frequency_epochs(weights: str, capsys: pytest.CaptureFixture) -> None:
    model, scheduler, _ = _fit(ARC(frequency=2, weights_path=weights), epochs=5)
    assert scheduler.inputs == ["ce"] and scheduler.frequency == 2
    # decisions at the start of epochs 3 and 5 (1, N+1, 2N+1, ... but never before any cycle): 0.618 twice
    expected = np.float32(np.float32(0.05 * 0.618) * 0.618)
    assert get_lr(model) == pytest.approx(float(expected), rel=1e-6)
    assert capsys.readouterr().out.count("FastEstimator-ARC: Multiplying LR by 0.618") == 2
    arc = scheduler.lr_fn
    # cycles closed at the ends of epochs 2 and 4: 2 train steps per epoch -> 4 losses per cycle, 2 eval losses
    assert [len(cycle) for cycle in arc.all_train_loss if cycle] == [4, 4]
    assert [len(cycle) for cycle in arc.all_eval_loss if cycle] == [2, 2]
    assert arc.train_loss_one_cycle == [pytest.approx(value) for value in arc.train_loss_one_cycle]
    assert len(arc.train_loss_one_cycle) == 2 and len(arc.eval_loss_one_cycle) == 1  # epoch 5, still open
    assert all(np.isfinite(arc.all_train_loss[-1]))


def test_arc_history_is_checkpointed(weights: str) -> None:
    _, scheduler, _ = _fit(ARC(frequency=1, weights_path=weights), epochs=3)
    state = scheduler.state_dict()
    assert set(state) == {"lr", "arc"}
    model = torch_mlp(lr=0.05)
    classifier_network(model)
    fresh = LRScheduler(model, lr_fn=ARC(frequency=1, weights_path=weights))
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.lr_fn.controller_inputs(), scheduler.lr_fn.controller_inputs())
    assert get_lr(model) == pytest.approx(state["lr"])
    plain = LRScheduler(torch_mlp(), lr_fn=lambda epoch: 0.1)
    with pytest.raises(ValueError, match="no ARC history"):
        fresh.load_state_dict(plain.state_dict() | {"lr": 0.1})
    # pickling (a checkpoint of the trace object, a copy to another process) leaves the Keras network behind
    import pickle

    scheduler.lr_fn.model()
    copy = pickle.loads(pickle.dumps(scheduler.lr_fn))
    assert copy._model is None and copy.state_dict() == scheduler.lr_fn.state_dict()
