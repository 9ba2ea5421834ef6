"""End-to-end FastEstimator-1.7 programs, written as FastEstimator's apphub and tutorials write them, run with
``import fe_ray as fe``: in-process, on 2 Ray replicas, and through a checkpoint resume.

The programs follow apphub/image_classification/cifar10_fast (torch), apphub/semantic_segmentation/unet (TF),
tutorial/advanced/t12_hyperparameter_search, the advanced tutorials' meta ops and metric traces,
apphub/image_generation/dcgan (torch), apphub/adversarial_training/fgsm (TF) and the beginner tutorials' schedulers
(an optimizer per epoch). The downloading loaders are
replaced with synthetic data of the same shapes and dtypes (CIFAR-10: 32x32x3 uint8 images, (N, 1) uint8 labels)
or scikit-learn's digits, and the epochs are cut to a few steps.
"""

from __future__ import annotations

import csv
import math
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.dataset import BatchDataset, NumpyDataset  # noqa: E402
from fe_ray.io.checkpoint import CheckpointStore  # noqa: E402
from fe_ray.op.numpyop.meta import Sometimes  # noqa: E402
from fe_ray.op.numpyop.multivariate import HorizontalFlip, PadIfNeeded, RandomCrop, Rotate  # noqa: E402
from fe_ray.op.numpyop.univariate import ChannelTranspose, CoarseDropout, Minmax, Normalize, Onehot  # noqa: E402
from fe_ray.op.tensorop import Dice  # noqa: E402
from fe_ray.op.tensorop.loss import CrossEntropy, DiceLoss  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from fe_ray.schedule import EpochScheduler, RepeatScheduler, cosine_decay  # noqa: E402
from fe_ray.search import GridSearch  # noqa: E402
from fe_ray.trace import Trace  # noqa: E402
from fe_ray.trace.adapt import LRScheduler, ReduceLROnPlateau, TerminateOnNaN  # noqa: E402
from fe_ray.trace.io import BestModelSaver, CSVLogger, RestoreWizard  # noqa: E402
from fe_ray.trace.metric import Accuracy, F1Score  # noqa: E402

TIMING_KEYS = {"steps/sec", "epoch_time(sec)", "total_time(sec)"}


class Interrupted(RuntimeError):
    pass


class InterruptAt(Trace):
    """Raises before training step ``step`` runs (a crashed driver); never with None. Every run of a program that is
    resumed has one, as a checkpoint restores only into the same traces."""

    def __init__(self, step: int | None = None) -> None:
        super().__init__(mode="train")
        self.step = step

    def on_batch_begin(self, data: Any) -> None:
        if self.system.global_step == self.step:
            raise Interrupted(f"before step {self.step}")


def _history(summary: Any) -> dict:
    return {mode: {key: dict(steps) for key, steps in keys.items() if key not in TIMING_KEYS}
            for mode, keys in summary.history.items()}


def _fit_history(estimator: Any, distributed: bool) -> dict:
    """``estimator.fit()``'s history without timings; a distributed network's replicas are stopped afterwards."""
    try:
        return _history(estimator.fit())
    finally:
        if distributed:
            estimator.network.shutdown()


def _weights(model: Any) -> list[np.ndarray]:
    from fe_ray.backend import get_backend

    state = get_backend(model).get_state(model)["model"]
    return [np.array(v) for v in (state.values() if isinstance(state, dict) else state)]


def _scalar(value: Any) -> float:
    return float(np.asarray(value, dtype=np.float64).reshape(()))


def _assert_finite(history: dict, mode: str, keys: list[str]) -> None:
    for key in keys:
        values = history[mode][key]
        assert values, f"{mode}/{key} never recorded"
        for step, value in values.items():
            assert np.all(np.isfinite(np.asarray(value, dtype=np.float64))), f"{mode}/{key} at step {step}: {value!r}"


def _assert_same_run(hist_a: dict, weights_a: list, hist_b: dict, weights_b: list) -> None:
    assert hist_a.keys() == hist_b.keys()
    for mode in hist_a:
        assert hist_a[mode].keys() == hist_b[mode].keys(), mode
        for key in hist_a[mode]:
            assert hist_a[mode][key].keys() == hist_b[mode][key].keys(), (mode, key)
            for step, a in hist_a[mode][key].items():
                np.testing.assert_allclose(np.asarray(a, dtype=np.float64),
                                           np.asarray(hist_b[mode][key][step], dtype=np.float64), atol=1e-5,
                                           rtol=1e-5, err_msg=f"{mode}/{key} at step {step}")
    assert len(weights_a) == len(weights_b)
    for a, b in zip(weights_a, weights_b):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# 1. torch CIFAR-10 (apphub/image_classification/cifar10_fast, with FastEstimator's ResNet9)


def cifar_like(n: int, seed: int) -> NumpyDataset:
    rng = np.random.default_rng(seed)
    return NumpyDataset({"x": rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8),
                         "y": rng.integers(0, 10, size=(n, 1), dtype=np.uint8)})


def get_cifar_estimator(save_dir: str, epochs: int = 2, batch_size: int = 8, num_replicas: int | None = None,
                        restore_dir: str | None = None, interrupt_step: int | None = None) -> tuple[Any, Any]:
    from fe_ray.architecture.pytorch import ResNet9

    fe.enable_deterministic(42)
    train_data, test_data = cifar_like(32, seed=0), cifar_like(16, seed=1)
    pipeline = fe.Pipeline(
        train_data=train_data,
        eval_data=test_data,
        batch_size=batch_size,
        ops=[
            Normalize(inputs="x", outputs="x", mean=(0.4914, 0.4822, 0.4465), std=(0.2471, 0.2435, 0.2616)),
            PadIfNeeded(min_height=40, min_width=40, image_in="x", image_out="x", mode="train"),
            RandomCrop(32, 32, image_in="x", image_out="x", mode="train"),
            Sometimes(HorizontalFlip(image_in="x", image_out="x", mode="train")),
            CoarseDropout(inputs="x", outputs="x", mode="train", max_holes=1),
            ChannelTranspose(inputs="x", outputs="x"),
            Onehot(inputs="y", outputs="y", mode="train", num_classes=10, label_smoothing=0.2)
        ])
    model = fe.build(model_fn=ResNet9, optimizer_fn="adam", model_name="resnet9")
    network = fe.Network(ops=[
        ModelOp(model=model, inputs="x", outputs="y_pred"),
        CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
        UpdateOp(model=model, loss_name="ce")
    ], **({"num_replicas": num_replicas} if num_replicas else {}))
    traces = [
        Accuracy(true_key="y", pred_key="y_pred"),
        F1Score(true_key="y", pred_key="y_pred"),
        BestModelSaver(model=model, save_dir=save_dir, metric="accuracy", save_best_mode="max"),
        LRScheduler(model=model, lr_fn=lambda step: cosine_decay(step, cycle_length=8, init_lr=1e-3)),
        CSVLogger(filename=os.path.join(save_dir, "log.csv")),
        TerminateOnNaN(monitor_names="ce"),
    ]
    if restore_dir is not None:
        traces.append(RestoreWizard(directory=restore_dir, steps=3))
    if restore_dir is not None:
        traces.append(InterruptAt(interrupt_step))
    estimator = fe.Estimator(pipeline=pipeline, network=network, epochs=epochs, traces=traces, log_steps=2)
    return estimator, model


def _check_cifar_run(summary: Any, save_dir: str) -> dict:
    history = _history(summary)
    _assert_finite(history, "train", ["ce", "resnet9_lr"])
    _assert_finite(history, "eval", ["ce", "accuracy", "f1_score"])
    assert sorted(history["eval"]["accuracy"]) == [4, 8]  # 4 steps per epoch, evaluated after each
    assert max(history["train"]["ce"]) == 8
    lrs = history["train"]["resnet9_lr"]
    assert _scalar(lrs[max(lrs)]) < _scalar(lrs[min(lrs)])  # the cosine schedule reached the optimizer
    assert os.path.isfile(os.path.join(save_dir, "resnet9_best_accuracy.pt"))
    with open(os.path.join(save_dir, "log.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and {"mode", "step", "epoch"} <= set(rows[0])
    assert {row["mode"] for row in rows} >= {"train", "eval"}
    return history


@pytest.mark.timeout(120)
def test_cifar10_torch_in_process(tmp_path: Any) -> None:
    estimator, model = get_cifar_estimator(save_dir=str(tmp_path))
    summary = estimator.fit()
    _check_cifar_run(summary, str(tmp_path))


@pytest.fixture(scope="module")
def cifar_replica_runs(ray_session: None, tmp_path_factory: Any) -> dict[str, Any]:
    """The 2-replica CIFAR program run uninterrupted, and run again interrupted before step 8 then resumed from its
    RestoreWizard directory (both runs checkpoint alike: every 3 steps and after each epoch)."""
    root = tmp_path_factory.mktemp("cifar_replicas")
    runs: dict[str, Any] = {}
    for name in ("reference", "resumed"):
        save_dir, ckpt = str(root / name), str(root / f"ckpt_{name}")
        os.makedirs(save_dir)
        if name == "resumed":
            estimator, model = get_cifar_estimator(save_dir, num_replicas=2, restore_dir=ckpt, interrupt_step=8)
            try:
                with pytest.raises(Interrupted):
                    estimator.fit()
            finally:
                estimator.network.shutdown()
            store = CheckpointStore(ckpt)
            runs["interrupted_at"] = store.manifest(store.latest())["info"]["global_step"]
        estimator, model = get_cifar_estimator(save_dir, num_replicas=2, restore_dir=ckpt)
        try:
            runs[name] = (_check_cifar_run(estimator.fit(), save_dir), _weights(model))
        finally:
            estimator.network.shutdown()
    return runs


@pytest.mark.timeout(240)
def test_cifar10_torch_on_replicas_resumes_exactly(cifar_replica_runs: dict[str, Any]) -> None:
    # The interrupted run's last checkpoint is mid-epoch 2 (after step 6), so the resumed run restarts mid-epoch,
    # with the random pipeline ops' draws, the cosine LRScheduler and BestModelSaver's best value where they were.
    assert cifar_replica_runs["interrupted_at"] == 6
    (reference, reference_weights), (resumed, resumed_weights) = (cifar_replica_runs["reference"],
                                                                  cifar_replica_runs["resumed"])
    train_only = ({"train": reference["train"]}, {"train": resumed["train"]})
    _assert_same_run(train_only[0], reference_weights, train_only[1], resumed_weights)
    for key in ("accuracy", "f1_score", "max_accuracy", "since_best_accuracy"):
        assert reference["eval"][key].keys() == resumed["eval"][key].keys(), key
        for step, value in reference["eval"][key].items():
            np.testing.assert_array_equal(value, resumed["eval"][key][step], err_msg=f"eval/{key} at step {step}")


@pytest.mark.timeout(240)
def test_cifar10_torch_on_replicas_resumed_eval_history_is_exact(cifar_replica_runs: dict[str, Any]) -> None:
    # BatchNorm's running statistics are each replica's own during an epoch; at its end every replica takes rank
    # 0's (the checkpoint's), so a resumed run evaluates exactly as the uninterrupted one.
    (reference, reference_weights), (resumed, resumed_weights) = (cifar_replica_runs["reference"],
                                                                  cifar_replica_runs["resumed"])
    _assert_same_run(reference, reference_weights, resumed, resumed_weights)


# ---------------------------------------------------------------------------------------------------------------
# 2. TF segmentation (apphub/semantic_segmentation/unet, with FastEstimator's UNet)


def segmentation_like(n: int, size: int, seed: int) -> NumpyDataset:
    """Gray images with a bright disc, and the disc's mask (as montgomery's lung masks: one channel, 0/255)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    images = rng.integers(0, 80, size=(n, size, size, 1)).astype(np.uint8)
    masks = np.zeros((n, size, size, 1), dtype=np.uint8)
    for i in range(n):
        cy, cx, r = rng.integers(4, size - 4), rng.integers(4, size - 4), rng.integers(2, 5)
        disc = (yy - cy) ** 2 + (xx - cx) ** 2 <= r ** 2
        masks[i, disc, 0] = 255
        images[i, disc, 0] = 200
    return NumpyDataset({"image": images, "mask": masks})


def get_unet_estimator(save_dir: str, loss: str, epochs: int = 2, num_replicas: int | None = None) -> tuple[Any, Any]:
    import tensorflow as tf

    from fe_ray.architecture.tensorflow import UNet

    fe.enable_deterministic(3)
    size = 16  # the smallest input FastEstimator's UNet accepts (4 poolings)
    data = segmentation_like(12, size, seed=0)
    pipeline = fe.Pipeline(
        train_data=data,
        eval_data=data.split(0.33),
        batch_size=4,
        ops=[
            Sometimes(numpy_op=HorizontalFlip(image_in="image", mask_in="mask", mode="train")),
            Sometimes(numpy_op=Rotate(image_in="image", mask_in="mask", limit=(-10, 10), border_mode=0,
                                      mode="train")),
            Minmax(inputs="image", outputs="image"),
            Minmax(inputs="mask", outputs="mask", mode="!infer")
        ])
    model = fe.build(model_fn=lambda: UNet(input_size=(size, size, 1)),
                     optimizer_fn=lambda: tf.keras.optimizers.Adam(learning_rate=0.0001),
                     model_name="lung_segmentation")
    loss_op = (CrossEntropy(inputs=("pred_segment", "mask"), outputs="loss", form="binary") if loss == "ce" else
               DiceLoss(inputs=("pred_segment", "mask"), outputs="loss"))
    network = fe.Network(ops=[
        ModelOp(inputs="image", model=model, outputs="pred_segment"),
        loss_op,
        Dice(inputs=("pred_segment", "mask"), outputs="dice", sample_average=True, channel_average=True),
        UpdateOp(model=model, loss_name="loss")
    ], **({"num_replicas": num_replicas} if num_replicas else {}))
    traces = [
        BestModelSaver(model=model, save_dir=save_dir, metric="dice", save_best_mode="max"),
        ReduceLROnPlateau(model=model, metric="dice", best_mode="max", patience=1, factor=0.5),
    ]
    estimator = fe.Estimator(network=network, pipeline=pipeline, epochs=epochs, log_steps=2, traces=traces,
                             monitor_names="dice")
    return estimator, model


def _check_unet_run(summary: Any, save_dir: str, model: Any) -> None:
    from fe_ray.backend import get_lr

    history = _history(summary)
    _assert_finite(history, "train", ["loss", "dice"])
    _assert_finite(history, "eval", ["loss", "dice"])
    dice = [_scalar(v) for _, v in sorted(history["eval"]["dice"].items())]
    assert len(dice) == 2 and all(0.0 <= v <= 1.0 for v in dice)
    assert os.path.isfile(os.path.join(save_dir, "lung_segmentation_best_dice.weights.h5"))
    # ReduceLROnPlateau(patience=1) halves the rate after the second evaluation unless the Dice score improved.
    reduced = history["eval"].get("lung_segmentation_lr", {})
    if dice[1] > dice[0]:
        assert not reduced and get_lr(model) == pytest.approx(1e-4)
    else:
        assert list(reduced) == [max(history["eval"]["dice"])]
        assert _scalar(next(iter(reduced.values()))) == pytest.approx(5e-5)
        assert get_lr(model) == pytest.approx(5e-5)  # the driver's model after fit (rank 0's with replicas)


@pytest.mark.timeout(120)
def test_unet_tf_in_process(tmp_path: Any) -> None:
    estimator, model = get_unet_estimator(str(tmp_path), "ce")
    _check_unet_run(estimator.fit(), str(tmp_path), model)


@pytest.mark.timeout(180)
def test_unet_tf_on_replicas(ray_session: None, tmp_path: Any) -> None:
    estimator, model = get_unet_estimator(str(tmp_path), "dice", num_replicas=2)
    try:
        _check_unet_run(estimator.fit(), str(tmp_path), model)
    finally:
        estimator.network.shutdown()


# ---------------------------------------------------------------------------------------------------------------
# 3. fe.search.GridSearch over tiny estimators (tutorial/advanced/t12_hyperparameter_search, FE 1.7's eval_fn)


def get_digits_estimator(batch_size: int, lr: float) -> Any:
    import torch
    from sklearn.datasets import load_digits

    from fe_ray.architecture.pytorch import LeNet
    from fe_ray.op.numpyop.univariate import ExpandDims

    digits = load_digits()
    x = np.kron(digits.images[:96], np.ones((1, 4, 4))).astype(np.uint8)  # 8x8 -> 32x32, as a 28x28-ish MNIST
    y = digits.target[:96].astype(np.uint8)
    train_data = NumpyDataset({"x": x[:64], "y": y[:64]})
    test_data = NumpyDataset({"x": x[64:], "y": y[64:]})
    pipeline = fe.Pipeline(train_data=train_data, test_data=test_data, batch_size=batch_size,
                           ops=[ExpandDims(inputs="x", outputs="x", axis=0), Minmax(inputs="x", outputs="x")])
    model = fe.build(model_fn=lambda: LeNet(input_shape=(1, 32, 32)),
                     optimizer_fn=lambda x: torch.optim.Adam(x, lr=lr))
    network = fe.Network(ops=[
        ModelOp(model=model, inputs="x", outputs="y_pred"),
        CrossEntropy(inputs=("y_pred", "y"), outputs="ce"),
        UpdateOp(model=model, loss_name="ce")
    ])
    return fe.Estimator(pipeline=pipeline, network=network, epochs=1, train_steps_per_epoch=4, log_steps=None)


@pytest.mark.timeout(120)
def test_grid_search_of_estimators(tmp_path: Any) -> None:
    def eval_fn(search_idx: int, batch_size: int, lr: float) -> dict:
        est = get_digits_estimator(batch_size, lr)
        est.fit()
        hist = est.test(summary="myexp")
        return {"test_loss": float(hist.history["test"]["ce"][4])}

    search = GridSearch(eval_fn=eval_fn, params={"batch_size": [8, 16], "lr": [1e-2, 1e-3]}, best_mode="min",
                        optimize_field="test_loss")
    search.fit(save_dir=str(tmp_path))
    results = search.get_search_summary()
    assert len(results) == 4
    assert {(r["param"]["batch_size"], r["param"]["lr"]) for r in results} == {(8, 1e-2), (8, 1e-3), (16, 1e-2),
                                                                                (16, 1e-3)}
    losses = [r["result"]["test_loss"] for r in results]
    assert all(math.isfinite(v) for v in losses)
    best = search.get_best_results()
    assert best["result"]["test_loss"] == min(losses)
    assert os.path.isfile(os.path.join(str(tmp_path), "grid_search.json"))
    # A second search on the same directory resumes: nothing is evaluated again.
    again = GridSearch(eval_fn=lambda **kwargs: pytest.fail("re-evaluated"),
                       params={"batch_size": [8, 16], "lr": [1e-2, 1e-3]}, best_mode="min",
                       optimize_field="test_loss")
    again.fit(save_dir=str(tmp_path))
    assert again.get_best_results() == best


# ---------------------------------------------------------------------------------------------------------------
# 4. torch digits with the other ported pieces: numpy OneOf, a TensorOp meta Sometimes, SuperLoss, the label
#    metrics, EarlyStopping and Pipeline.benchmark (tutorial/advanced t03/t04/t09 style)


def get_digits_program(num_replicas: int | None = None) -> tuple[Any, Any]:
    from sklearn.datasets import load_digits

    from fe_ray.architecture.pytorch import LeNet
    from fe_ray.backend import random_normal_like
    from fe_ray.op.numpyop.meta import OneOf
    from fe_ray.op.numpyop.multivariate import VerticalFlip
    from fe_ray.op.numpyop.univariate import ExpandDims
    from fe_ray.op.tensorop import LambdaOp
    from fe_ray.op.tensorop.loss import SuperLoss
    from fe_ray.op.tensorop.meta import Sometimes as TensorSometimes
    from fe_ray.trace.adapt import EarlyStopping
    from fe_ray.trace.metric import MCC, ConfusionMatrix, Precision, Recall

    fe.enable_deterministic(5)
    digits = load_digits()
    x = np.kron(digits.images[:96], np.ones((1, 4, 4))).astype(np.uint8)
    y = digits.target[:96].astype(np.int64)
    pipeline = fe.Pipeline(
        train_data=NumpyDataset({"x": x[:64], "y": y[:64]}),
        eval_data=NumpyDataset({"x": x[64:], "y": y[64:]}),
        batch_size=16,
        ops=[ExpandDims(inputs="x", outputs="x", axis=-1),
             OneOf(HorizontalFlip(image_in="x", mode="train"), VerticalFlip(image_in="x", mode="train")),
             Minmax(inputs="x", outputs="x"),
             ChannelTranspose(inputs="x", outputs="x")])
    model = fe.build(model_fn=lambda: LeNet(input_shape=(1, 32, 32)), optimizer_fn="adam", model_name="lenet")
    network = fe.Network(ops=[
        TensorSometimes(LambdaOp(fn=lambda t: t + random_normal_like(t, std=0.01), inputs="x", outputs="x",
                                 mode="train"), prob=0.5),
        ModelOp(model=model, inputs="x", outputs="y_pred"),
        SuperLoss(CrossEntropy(inputs=("y_pred", "y"), outputs="ce")),
        UpdateOp(model=model, loss_name="ce")
    ], **({"num_replicas": num_replicas} if num_replicas else {}))
    traces = [Accuracy(true_key="y", pred_key="y_pred"), Precision(true_key="y", pred_key="y_pred"),
              Recall(true_key="y", pred_key="y_pred"), MCC(true_key="y", pred_key="y_pred"),
              ConfusionMatrix(true_key="y", pred_key="y_pred", num_classes=10),
              EarlyStopping(monitor="ce", patience=5)]
    return fe.Estimator(pipeline=pipeline, network=network, epochs=2, traces=traces, log_steps=2), pipeline


def _check_digits_run(summary: Any) -> None:
    history = _history(summary)
    _assert_finite(history, "train", ["ce"])
    _assert_finite(history, "eval", ["ce", "accuracy", "precision", "recall", "mcc", "confusion_matrix"])
    assert sorted(history["eval"]["accuracy"]) == [4, 8]
    for matrix in history["eval"]["confusion_matrix"].values():
        assert np.asarray(matrix).shape == (10, 10)


@pytest.mark.timeout(120)
def test_digits_torch_meta_ops_and_label_metrics_in_process(capsys: Any) -> None:
    estimator, pipeline = get_digits_program()
    pipeline.benchmark(mode="train", num_steps=3, log_interval=1)
    assert "FastEstimator-Benchmark" in capsys.readouterr().out
    _check_digits_run(estimator.fit())


@pytest.mark.timeout(180)
def test_digits_torch_meta_ops_and_label_metrics_on_replicas(ray_session: None) -> None:
    estimator, pipeline = get_digits_program(num_replicas=2)
    try:
        _check_digits_run(estimator.fit())
    finally:
        estimator.network.shutdown()


# ---------------------------------------------------------------------------------------------------------------
# 5. torch DCGAN (apphub/image_generation/dcgan): two models, each with its own UpdateOp, the generator's loss taken
#    through the discriminator, the noise drawn by a Pipeline LambdaOp from numpy's global generator


def _dcgan_models() -> tuple[Any, Any]:
    import torch

    class Generator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LeakyReLU(0.2), torch.nn.Linear(32, 64))

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.fc(z)).view(-1, 1, 8, 8)

    class Discriminator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(64, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.nn.functional.leaky_relu(self.conv(x), 0.2).flatten(1))

    return Generator, Discriminator


class GLoss(fe.op.tensorop.TensorOp):
    """The generator's loss as the apphub writes it: BCE of the fake scores against ones."""

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        import torch

        return torch.nn.functional.binary_cross_entropy_with_logits(data, torch.ones_like(data))


class DLoss(fe.op.tensorop.TensorOp):
    """The discriminator's loss: BCE of the true scores against ones plus the fake scores against zeros."""

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        import torch

        true_score, fake_score = data
        bce = torch.nn.functional.binary_cross_entropy_with_logits
        return bce(true_score, torch.ones_like(true_score)) + bce(fake_score, torch.zeros_like(fake_score))


def get_dcgan_estimator(save_dir: str, num_replicas: int | None = None, restore_dir: str | None = None,
                        interrupt_step: int | None = None) -> tuple[Any, Any, Any]:
    import torch
    from sklearn.datasets import load_digits

    from fe_ray.op.numpyop import LambdaOp as NumpyLambdaOp
    from fe_ray.op.numpyop.univariate import ExpandDims
    from fe_ray.trace.io import ModelSaver

    fe.enable_deterministic(11)
    images = load_digits().images[:48].astype(np.float32)  # 0..16
    pipeline = fe.Pipeline(
        train_data=NumpyDataset({"x": images}),
        batch_size=8,
        ops=[ExpandDims(inputs="x", outputs="x", axis=0),
             Normalize(inputs="x", outputs="x", mean=1.0, std=1.0, max_pixel_value=8.0),
             NumpyLambdaOp(fn=lambda: np.random.normal(size=[16]).astype("float32"), outputs="z")])
    generator, discriminator = _dcgan_models()
    gen_model = fe.build(model_fn=generator, optimizer_fn=lambda x: torch.optim.Adam(x, lr=1e-3), model_name="gen")
    disc_model = fe.build(model_fn=discriminator, optimizer_fn=lambda x: torch.optim.Adam(x, lr=1e-3),
                          model_name="disc")
    network = fe.Network(ops=[
        ModelOp(model=gen_model, inputs="z", outputs="x_fake"),
        ModelOp(model=disc_model, inputs="x_fake", outputs="fake_score"),
        GLoss(inputs="fake_score", outputs="gloss"),
        UpdateOp(model=gen_model, loss_name="gloss"),
        ModelOp(inputs="x", model=disc_model, outputs="true_score"),
        DLoss(inputs=("true_score", "fake_score"), outputs="dloss"),
        UpdateOp(model=disc_model, loss_name="dloss")
    ], **({"num_replicas": num_replicas} if num_replicas else {}))
    traces: list[Any] = [ModelSaver(model=gen_model, save_dir=save_dir, frequency=2)]
    if restore_dir is not None:
        traces += [RestoreWizard(directory=restore_dir, steps=4), InterruptAt(interrupt_step)]
    estimator = fe.Estimator(pipeline=pipeline, network=network, epochs=3, traces=traces, log_steps=3)
    return estimator, gen_model, disc_model


def _run_dcgan(save_dir: str, **kwargs: Any) -> tuple[dict, list[np.ndarray]]:
    estimator, gen_model, disc_model = get_dcgan_estimator(save_dir, **kwargs)
    history = _fit_history(estimator, distributed=bool(kwargs.get("num_replicas")))
    _assert_finite(history, "train", ["gloss", "dloss"])
    assert max(history["train"]["gloss"]) == 18  # 3 epochs of 6 batches
    assert os.path.isfile(os.path.join(save_dir, "gen_epoch_2.pt"))
    return history, _weights(gen_model) + _weights(disc_model)


@pytest.mark.timeout(120)
def test_dcgan_torch_in_process_trains_both_models(tmp_path: Any) -> None:
    estimator, gen_model, disc_model = get_dcgan_estimator(str(tmp_path))
    before = _weights(gen_model) + _weights(disc_model)
    history, after = _run_dcgan(str(tmp_path))
    assert not any(np.array_equal(a, b) for a, b in zip(before, after))  # every tensor of both models trained


@pytest.mark.timeout(240)
def test_dcgan_torch_on_replicas_equals_in_process_and_resumes_exactly(ray_session: None, tmp_path: Any) -> None:
    """Two replicas train both models as one process does (the gradients of each UpdateOp all-reduced on their own),
    and a run interrupted before step 11 resumes from its step-8 checkpoint with the pipeline's noise, both
    optimizers and the ModelSaver where they were: its whole history (steps 1-8 restored, 9-18 trained again) and
    both models' final weights are the uninterrupted in-process run's."""
    local_history, local_weights = _run_dcgan(str(tmp_path / "local"))
    assert local_history["train"].pop("num_device") == {0: 1}
    ckpt = str(tmp_path / "ckpt")
    with pytest.raises(Interrupted):
        _run_dcgan(str(tmp_path / "resumed"), num_replicas=2, restore_dir=ckpt, interrupt_step=11)
    store = CheckpointStore(ckpt)
    assert store.manifest(store.latest())["info"]["global_step"] == 8
    resumed_history, resumed_weights = _run_dcgan(str(tmp_path / "resumed"), num_replicas=2, restore_dir=ckpt)
    assert resumed_history["train"].pop("num_device") == {0: 2}
    _assert_same_run(local_history, local_weights, resumed_history, resumed_weights)


# ---------------------------------------------------------------------------------------------------------------
# 6. Schedulers as FastEstimator's tutorials use them (tutorial/beginner/t09_scheduler): an optimizer per epoch,
#    here RepeatScheduler([Adam, SGD with momentum]) so that Adam's moments from epoch 1 are needed again in epoch 3,
#    and an eval batch size per epoch; with a BatchDataset mixing two datasets in every training batch,
#    train_steps_per_epoch and merge_grad


def get_scheduled_program(framework: str, num_replicas: int | None = None, restore_dir: str | None = None,
                          interrupt_step: int | None = None) -> tuple[Any, Any]:
    from sklearn.datasets import load_digits

    from fe_ray.op.numpyop.univariate import ExpandDims

    fe.enable_deterministic(5)
    digits = load_digits()
    x, y = digits.images.astype(np.float32), digits.target.astype(np.int64)
    if framework == "torch":
        import torch

        def model_fn() -> Any:
            return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 10), torch.nn.Softmax(dim=-1))

        optimizers = [lambda params: torch.optim.Adam(params, lr=1e-3),
                      lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9)]
    else:
        import keras

        def model_fn() -> Any:
            return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                     keras.layers.Dense(32, activation="relu"),
                                     keras.layers.Dense(10, activation="softmax")])

        optimizers = [lambda: keras.optimizers.Adam(1e-3), lambda: keras.optimizers.SGD(0.05, momentum=0.9)]
    pipeline = fe.Pipeline(
        train_data=BatchDataset([NumpyDataset({"x": x[:300], "y": y[:300]}),
                                 NumpyDataset({"x": x[300:500], "y": y[300:500]})], num_samples=[6, 4]),
        eval_data=NumpyDataset({"x": x[1500:1560], "y": y[1500:1560]}),
        batch_size=EpochScheduler({1: 20, 3: 15}),  # the eval batches' (a BatchDataset makes its own)
        ops=[ExpandDims(inputs="x", outputs="x", axis=0 if framework == "torch" else -1),
             Minmax(inputs="x", outputs="x")])
    model = fe.build(model_fn=model_fn, optimizer_fn=RepeatScheduler(optimizers), model_name="digits")
    network = fe.Network(ops=[ModelOp(model=model, inputs="x", outputs="pred"),
                              CrossEntropy(inputs=("pred", "y"), outputs="ce"),
                              UpdateOp(model=model, loss_name="ce", merge_grad=2)],
                         **({"num_replicas": num_replicas} if num_replicas else {}))
    traces: list[Any] = [Accuracy(true_key="y", pred_key="pred")]
    if restore_dir is not None:
        traces += [RestoreWizard(directory=restore_dir, steps=3), InterruptAt(interrupt_step)]
    estimator = fe.Estimator(pipeline=pipeline, network=network, epochs=4, train_steps_per_epoch=5, traces=traces,
                             log_steps=2)
    return estimator, model


def _run_scheduled(framework: str, **kwargs: Any) -> tuple[dict, list[np.ndarray]]:
    estimator, model = get_scheduled_program(framework, **kwargs)
    history = _fit_history(estimator, distributed=bool(kwargs.get("num_replicas")))
    _assert_finite(history, "train", ["ce"])
    assert max(history["train"]["ce"]) == 20 and sorted(history["eval"]["accuracy"]) == [5, 10, 15, 20]
    history["train"].pop("num_device")
    return history, _weights(model)


def _interrupt_and_resume(framework: str, ckpt: str, **kwargs: Any) -> tuple[dict, list[np.ndarray]]:
    """Interrupted before step 8 (epoch 2, the SGD's), resumed from the step-6 checkpoint."""
    from fe_ray.io.state_files import read_checkpoint

    with pytest.raises(Interrupted):
        _run_scheduled(framework, restore_dir=ckpt, interrupt_step=8, **kwargs)
    store = CheckpointStore(ckpt)
    assert store.manifest(store.latest())["info"]["global_step"] == 6
    # The merge_grad accumulator as it was after step 6 (six gradients counted, the sum just applied); on replicas
    # rank 0's, not the driver's copy from the end of epoch 1 (five counted, the fifth step's gradient held).
    update_op = read_checkpoint(store.latest())["network"]["ops"][-1]
    assert update_op["type"] == "UpdateOp" and update_op["state"]["step"] == 6
    assert not any(np.any(total) for total in update_op["state"]["grad_sum"])
    return _run_scheduled(framework, restore_dir=ckpt, **kwargs)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_an_optimizer_per_epoch_resumes_exactly_in_process(framework: str, tmp_path: Any) -> None:
    """Resumed in the SGD's epoch, the run restores both optimizers (before the fix, the checkpoint held only the
    current one's state, which restoring loaded into the Adam, current before the first epoch: torch raised
    KeyError 'step' and TF a variable-count error), and its history and weights are the uninterrupted run's."""
    history, weights = _run_scheduled(framework)
    resumed_history, resumed_weights = _interrupt_and_resume(framework, str(tmp_path / "ckpt"))
    _assert_same_run(history, weights, resumed_history, resumed_weights)


@pytest.mark.timeout(180)
def test_an_optimizer_per_epoch_on_replicas_resumes_as_in_process(ray_session: None, tmp_path: Any) -> None:
    """On two replicas (each with its own two optimizers; the driver's copies synced from replica rank 0), a run
    resumed in the SGD's epoch matches the uninterrupted in-process run: Adam's moments from epoch 1 reach the
    replicas' Adam for epoch 3, and the merge_grad accumulator resumes from rank 0's live state (a background save
    mid-epoch took the driver's stale copy of the ops' states until 2026-11-27)."""
    history, weights = _run_scheduled("torch")
    resumed_history, resumed_weights = _interrupt_and_resume("torch", str(tmp_path / "ckpt"), num_replicas=2)
    _assert_same_run(history, weights, resumed_history, resumed_weights)
