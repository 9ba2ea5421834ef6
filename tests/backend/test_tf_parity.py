"""FastEstimator 1.7 parity of the TensorFlow path: losses on activated outputs, FE-named weight files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import fe_ray as fe  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.op.tensorop.tensorop import TensorOp  # noqa: E402

# Inputs that drive a unit-weight classifier's logits to +-30: far past where float32 probabilities saturate.
SATURATING_X = np.array([[30.0], [-30.0]], dtype=np.float32)


def _sigmoid_model() -> keras.Model:
    return keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, activation="sigmoid", kernel_initializer="ones",
                                                                   bias_initializer="zeros")])


def _softmax_model() -> keras.Model:
    return keras.Sequential([keras.Input((1,)), keras.layers.Dense(
        2, activation="softmax", kernel_initializer=keras.initializers.Constant([[1.0, -1.0]]),
        bias_initializer="zeros")])


def _train_once(model_fn: Any, labels: np.ndarray, mixed_precision: bool) -> tuple[float, float, bool]:
    """(eval loss, train-step loss, whether the weights moved) for a confidently wrong classifier."""
    model = fe.build(model_fn, "sgd", mixed_precision=mixed_precision)
    network = fe.Network([ModelOp(model, "x", "pred"), CrossEntropy(["pred", "y"], "ce"), UpdateOp(model, "ce")])
    batch = {"x": SATURATING_X, "y": labels}
    eval_loss = float(network.transform(batch, mode="eval")["ce"])
    before = model.get_weights()[0].copy()
    with network(mode="train", epoch=1, ds_id=""):
        train_loss = float(network.run_step(batch)["ce"])
        # Dynamic loss scaling (mixed precision) skips the steps whose scaled float16 gradients overflow, halving
        # the scale each time (2**15 at first); a real gradient gets through within a few steps.
        for _ in range(10):
            if not np.allclose(before, model.get_weights()[0]):
                break
            network.run_step(batch)
    return eval_loss, train_loss, not np.allclose(before, model.get_weights()[0])


@pytest.mark.parametrize("mixed_precision", [False, True])
def test_binary_cross_entropy_of_a_saturated_sigmoid_uses_its_logits(mixed_precision: bool) -> None:
    # FE 1.7 hands the sigmoid's output straight to Keras' loss, which computes from the logits behind it: a wrong
    # prediction with logit 30 costs 30 and still has a gradient. Clipping the probability instead caps the loss
    # near 16 and zeroes the gradient, so the model can never recover from a saturated mistake.
    eval_loss, train_loss, moved = _train_once(_sigmoid_model, np.array([[0.0], [1.0]], np.float32), mixed_precision)
    assert eval_loss == pytest.approx(30.0, rel=1e-3)
    assert train_loss == pytest.approx(30.0, rel=1e-3)
    assert moved


@pytest.mark.parametrize("mixed_precision", [False, True])
def test_sparse_cross_entropy_of_a_saturated_softmax_uses_its_logits(mixed_precision: bool) -> None:
    # Logits +-30 differ by 60, the exact loss of the wrong class; float16 probabilities (mixed precision) saturate
    # long before that, so the logits must be taken before the loss casts the prediction to float32.
    eval_loss, train_loss, moved = _train_once(_softmax_model, np.array([1, 0]), mixed_precision)
    assert eval_loss == pytest.approx(60.0, rel=1e-3)
    assert train_loss == pytest.approx(60.0, rel=1e-3)
    assert moved


def test_cross_entropy_of_plain_probabilities_is_unchanged() -> None:
    # Probabilities that no activation produced (a user's tensor) still go through Keras' clipped formula.
    y_pred = fe.backend.to_tensor(np.array([[0.9], [0.3]], np.float32), "tf")
    y_true = fe.backend.to_tensor(np.array([[1.0], [0.0]], np.float32), "tf")
    loss = float(fe.backend.binary_crossentropy(y_pred, y_true))
    assert loss == pytest.approx(-(np.log(0.9) + np.log(0.7)) / 2, rel=1e-5)


def _dense_model() -> keras.Model:
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])


def test_weights_path_in_fastestimator_naming_points_at_the_file_fe_ray_wrote(tmp_path: Path) -> None:
    # FE 1.7 saves TF weights as '<name>.h5' (ModelSaver: '<name>_epoch_<n>.h5'); Keras 3 only writes
    # '<name>.weights.h5'. A user who passes the FE-style name gets told which file exists, not an h5py errno.
    model = fe.build(_dense_model, "adam", model_name="clf")
    written = fe.backend.save_model(model, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"clf\.h5.*clf\.weights\.h5"):
        fe.build(_dense_model, "adam", weights_path=str(tmp_path / "clf.h5"))
    with pytest.raises(FileNotFoundError, match="nothing.weights.h5"):
        fe.build(_dense_model, "adam", weights_path=str(tmp_path / "nothing.weights.h5"))
    rebuilt = fe.build(_dense_model, "adam", weights_path=written)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), rebuilt.get_weights()))


def test_legacy_h5_weights_as_fastestimator_writes_them_load(tmp_path: Path) -> None:
    # FE 1.7 wrote TF weights with Keras 2's save_weights('<name>.h5'), the legacy HDF5 layout.
    import h5py
    from keras.src.legacy.saving import legacy_h5_format

    source = _dense_model()
    path = tmp_path / "model.h5"
    with h5py.File(path, "w") as handle:
        legacy_h5_format.save_weights_to_hdf5_group(handle, source)
    model = fe.build(_dense_model, "adam", weights_path=str(path))
    assert all(np.array_equal(a, b) for a, b in zip(source.get_weights(), model.get_weights()))


def test_fastestimator_pickled_optimizer_state_is_refused_by_name(tmp_path: Path) -> None:
    # FE 1.7 pickles a Keras 2 optimizer's variables to '<name>_opt.pkl'; Keras 3 optimizers hold different
    # variables, and fe_ray never unpickles files it loads: say so rather than report a missing '.npz'.
    import h5py
    from keras.src.legacy.saving import legacy_h5_format

    model = fe.build(_dense_model, "adam")
    with h5py.File(tmp_path / "model.h5", "w") as handle:
        legacy_h5_format.save_weights_to_hdf5_group(handle, model)
    (tmp_path / "model_opt.pkl").write_bytes(b"not read")
    with pytest.raises(FileNotFoundError, match=r"model_opt\.pkl.*load_optimizer=False"):
        fe.backend.load_model(model, str(tmp_path / "model.h5"), load_optimizer=True)


class _TimesEpoch(TensorOp):
    """Multiplies an int32 input by the epoch, as a user's op written for FastEstimator may."""

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        return data * state["epoch"]


@pytest.mark.parametrize("single", [True, False])  # a dict runs eagerly, a list of batches as a traced graph
def test_tf_ops_see_the_epoch_as_an_int32_tensor_as_in_fastestimator(single: bool) -> None:
    # FE 1.7's TFNetwork puts tf.convert_to_tensor(epoch) (int32) into the state of every TF context.
    network = fe.Network([_TimesEpoch("x", "y")])
    batch = {"x": np.array([1, 2], dtype=np.int32)}
    result = network.transform(batch if single else [batch], mode="eval", epoch=3)
    result = result if single else result[0]
    assert result["y"].dtype == tf.int32
    np.testing.assert_array_equal(result["y"].numpy(), [3, 6])


def _fully_convolutional() -> keras.Model:
    inputs = keras.Input((8, 8, 3))
    features = keras.layers.Conv2D(4, 3, padding="same")(inputs)
    return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(features))


@pytest.mark.parametrize("single", [True, False])  # eager (one dict) and traced (a list of batches)
def test_functional_model_accepts_inputs_of_another_size_as_in_fastestimator(single: bool) -> None:
    # FE 1.7's build sets model.input_spec = None, so a fully convolutional model declared for 8x8 crops runs on
    # larger images (e.g. inference on whole images); Keras 3 would refuse the shape.
    model = fe.build(_fully_convolutional, "adam")
    images = np.random.default_rng(0).random((2, 16, 16, 3)).astype(np.float32)
    assert tuple(model(images).shape) == (2, 4)
    network = fe.Network([ModelOp(model, "x", "pred")])
    result = network.transform({"x": images} if single else [{"x": images}], mode="infer")
    assert tuple((result if single else result[0])["pred"].shape) == (2, 4)


def test_model_op_relaxes_the_input_spec_of_a_model_rebuilt_elsewhere() -> None:
    # A Ray replica gets the model through Keras' saving format, which drops the relaxed spec; building the
    # ModelOp there (as every process does) relaxes it again.
    import pickle

    model = fe.build(_fully_convolutional, "adam")
    copy = pickle.loads(pickle.dumps(model))
    copy.model_name, copy.fe_compiled = model.model_name, True
    ModelOp(copy, "x", "pred").build("tf")
    assert tuple(copy(np.zeros((1, 12, 12, 3), np.float32)).shape) == (1, 4)


def test_weights_url_is_refused_with_the_fix() -> None:
    # FE 1.7 downloads Google Drive weight links with gdown; fe_ray does not download, and says what to do.
    url = "https://drive.google.com/uc?id=abc"
    with pytest.raises(ValueError, match="Download the file and pass its local path"):
        fe.build(_dense_model, "adam", weights_path=url)


def test_optimizer_fn_with_keras2_lr_alias_names_the_fix() -> None:
    # FE 1.7's build docstring shows `lambda: tf.optimizers.Adam(lr=0.1)`; Keras 3 dropped the `lr` alias.
    with pytest.raises(ValueError, match="learning_rate="):
        fe.build(_dense_model, lambda: tf.optimizers.Adam(lr=0.1))
