"""Average, GradientOp, Watch and the TensorOp meta ops (Fuse, Repeat, Sometimes, OneOf), run through in-process
torch and TF Networks (TF steps traced as tf.function) and checked against hand-computed values."""

from __future__ import annotations

import os
from typing import Any

import cloudpickle
import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend, reduce_max  # noqa: E402
from fe_ray.network import TFNetwork, TorchNetwork  # noqa: E402
from fe_ray.op.tensorop import Average, Dice, LambdaOp  # noqa: E402
from fe_ray.op.tensorop.gradient import GradientOp, Watch  # noqa: E402
from fe_ray.op.tensorop.loss import MeanSquaredError  # noqa: E402
from fe_ray.op.tensorop.meta import Fuse, OneOf, Repeat, Sometimes  # noqa: E402
from fe_ray.op.tensorop.model import ModelOp, UpdateOp  # noqa: E402
from tests.helpers.models import linear, weights  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
W0 = np.array([1.0, 2.0, 3.0])
X = np.array([[1.0, 0.0, 1.0], [0.5, 1.0, 0.0]], np.float32)
Y = np.array([[1.0], [0.0]], np.float32)


def network_of(framework: str, ops: list[Any]) -> Any:
    return TorchNetwork(ops) if framework == "torch" else TFNetwork(ops)


def step(network: Any, batch: dict[str, Any], mode: str = "train", steps: int = 1) -> dict[str, Any]:
    with network(mode=mode, epoch=1):
        for _ in range(steps):
            out = network.run_step(batch)
    return out


def numpy_of(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [numpy_of(v) for v in value]
    return np.asarray(get_backend(value).to_numpy(value))


def test_fe_module_paths() -> None:
    """The ops sit at FastEstimator's paths under `import fe_ray as fe`."""
    assert fe.op.tensorop.Average is Average and fe.op.tensorop.LambdaOp is LambdaOp
    assert fe.op.tensorop.gradient.GradientOp is GradientOp and fe.op.tensorop.gradient.Watch is Watch
    assert fe.op.tensorop.meta.Sometimes is Sometimes and fe.op.tensorop.meta.OneOf is OneOf
    assert fe.op.tensorop.meta.Repeat is Repeat and fe.op.tensorop.meta.Fuse is Fuse
    for name in ("Hinge", "L1_Loss", "FocalLoss", "DiceLoss", "L2Regularizaton", "SuperLoss"):
        assert hasattr(fe.op.tensorop.loss, name)


# --------------------------------------------------------------------------------------------------------- Average
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_average(framework: str) -> None:
    a, b, c = (np.full((2, 2), v, np.float32) for v in (1.0, 2.0, 6.0))
    out = step(network_of(framework, [Average(inputs=("a", "b", "c"), outputs="avg"),
                                      Average(inputs="a", outputs="same")]), {"a": a, "b": b, "c": c})
    np.testing.assert_allclose(numpy_of(out["avg"]), np.full((2, 2), 3.0))
    np.testing.assert_allclose(numpy_of(out["same"]), a)


# ------------------------------------------------------------------------------------------------------------ Dice
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dice_scores_per_sample_and_channel(framework: str) -> None:
    """Sample 0: channel 0 overlaps 2 of 2 + 4 pixels (2*2/6), channel 1 is a perfect match (1); sample 1: no
    overlap (0) and a perfect match (1). Channels last here, moved to axis 1 for torch."""
    pred = np.zeros((2, 3, 3, 2), np.float32)
    true = np.zeros((2, 3, 3, 2), np.float32)
    pred[0, 0, :2, 0] = 1
    true[0, :2, :2, 0] = 1
    pred[:, 2, 2, 1] = true[:, 2, 2, 1] = 1
    pred[1, 0, 0, 0], true[1, 1, 1, 0] = 1, 1
    if framework == "torch":
        pred, true = np.moveaxis(pred, -1, 1), np.moveaxis(true, -1, 1)
    expected = np.array([[4 / 6, 1.0], [0.0, 1.0]])
    out = step(network_of(framework, [Dice(inputs=("p", "y"), outputs="dice"),
                                      Dice(inputs=("p", "y"), outputs="neg", sample_average=True,
                                           channel_average=True, negate=True)]), {"p": pred, "y": true})
    np.testing.assert_allclose(numpy_of(out["dice"]), expected, rtol=1e-5)
    assert float(numpy_of(out["neg"])) == pytest.approx(-expected.mean(), rel=1e-5)


# -------------------------------------------------------------------------------------------- GradientOp / Watch
def mse_weight_grad(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (2 * (x @ W0 - y[:, 0])[:, None] * x).mean(axis=0)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gradient_op_wrt_model_weights_in_eval(framework: str) -> None:
    model = linear(framework)
    network = network_of(framework, [ModelOp(model=model, inputs="x", outputs="pred"),
                                     MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
                                     GradientOp(finals="mse", outputs="grads", model=model)])
    out = step(network, {"x": X, "y": Y}, mode="eval")
    grads = numpy_of(out["grads"])
    assert len(grads) == 1
    np.testing.assert_allclose(grads[0].reshape(-1), mse_weight_grad(X, Y), rtol=1e-5)
    np.testing.assert_array_equal(weights(model), W0)  # a gradient, no update


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gradient_op_wrt_watched_input_twice(framework: str) -> None:
    """d mse / d x = 2 (w.x - y) w / N. Two GradientOps on the same graph: the first must keep it (torch frees a
    graph after its first backward unless told otherwise)."""
    model = linear(framework)
    network = network_of(framework, [Watch(inputs="x"), ModelOp(model=model, inputs="x", outputs="pred"),
                                     MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
                                     GradientOp(inputs="x", finals="mse", outputs="dx"),
                                     GradientOp(inputs="pred", finals="mse", outputs="dpred")])
    out = step(network, {"x": X, "y": Y}, mode="eval")
    err = X @ W0 - Y[:, 0]
    np.testing.assert_allclose(numpy_of(out["dx"]), 2 * err[:, None] * W0[None, :] / len(X), rtol=1e-5)
    np.testing.assert_allclose(numpy_of(out["dpred"]), 2 * err[:, None] / len(X), rtol=1e-5)


def test_gradient_op_argument_errors() -> None:
    model = linear("torch")
    with pytest.raises(ValueError, match="exactly one of inputs"):
        GradientOp(finals="loss", outputs="g", inputs="x", model=model)
    with pytest.raises(ValueError, match="exactly one of inputs"):
        GradientOp(finals="loss", outputs="g")
    with pytest.raises(ValueError, match="one output key"):
        GradientOp(finals=["a", "b"], outputs="g", model=model)
    with pytest.raises(TypeError, match="torch nn.Module or a Keras model"):
        GradientOp(finals="loss", outputs="g", model=object())


# ------------------------------------------------------------------------------------------------------------ Fuse
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_fuse_runs_ops_in_order_and_trains(framework: str) -> None:
    model = linear(framework, lr=0.1)
    fused = Fuse([ModelOp(model=model, inputs="x", outputs="pred", mode="train"),
                  MeanSquaredError(inputs=("pred", "y"), outputs="mse", mode="train"),
                  UpdateOp(model=model, loss_name="mse")])  # FastEstimator's rule: one mode for all
    assert fused.inputs == ["x", "y"] and fused.outputs == ["pred", "mse"]
    assert fused.get_fe_models() == {model} and fused.get_fe_loss_keys() == {"mse"}
    out = step(network_of(framework, [fused, LambdaOp(fn=lambda m: m * 2, inputs="mse", outputs="double")]),
               {"x": X, "y": Y})
    err = X @ W0 - Y[:, 0]
    assert float(numpy_of(out["double"])) == pytest.approx(2 * np.mean(err ** 2), rel=1e-5)
    np.testing.assert_allclose(weights(model), W0 - 0.1 * mse_weight_grad(X, Y), rtol=1e-5)


def test_fuse_rejects_mixed_modes_and_non_tensor_ops() -> None:
    with pytest.raises(ValueError, match="share mode"):
        Fuse([LambdaOp(fn=abs, inputs="x", outputs="y", mode="train"), LambdaOp(fn=abs, inputs="y", outputs="z")])
    with pytest.raises(TypeError, match="wraps TensorOps"):
        Fuse([lambda x: x])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        Fuse([])


# ---------------------------------------------------------------------------------------------------------- Repeat
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_repeat_fixed_count(framework: str) -> None:
    ops = [Repeat(LambdaOp(fn=lambda x: x + 1, inputs="x", outputs="x"), repeat=3),
           Repeat(LambdaOp(fn=lambda x: x * 2, inputs="x", outputs="y"), repeat=2)]
    out = step(network_of(framework, ops), {"x": np.array([[1.0]], np.float32)})
    assert float(numpy_of(out["x"])[0, 0]) == 4.0
    assert float(numpy_of(out["y"])[0, 0]) == 8.0  # y = 2x twice from the same x: 8, not 16


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(("max_iter", "expected"), [(None, 192.0), (3, 24.0)])
def test_repeat_while_condition(framework: str, max_iter: int | None, expected: float) -> None:
    """Doubling 3 while max(x) < 100: 6, 12, ..., 192 (six runs); max_iter=3 stops at 24. TF: a tf.while_loop."""
    op = Repeat(LambdaOp(fn=lambda x: x * 2, inputs="x", outputs="x"), repeat=lambda x: reduce_max(x) < 100,
                max_iter=max_iter)
    out = step(network_of(framework, [op]), {"x": np.array([[3.0, 1.0]], np.float32)})
    assert float(numpy_of(out["x"])[0, 0]) == expected


def test_repeat_argument_errors() -> None:
    op = LambdaOp(fn=abs, inputs="x", outputs="x")
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        Repeat(op, repeat=0)
    with pytest.raises(ValueError, match="drop max_iter"):
        Repeat(op, repeat=2, max_iter=3)
    with pytest.raises(TypeError, match="int .* or a function"):
        Repeat(op, repeat="twice")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_iter must be an int >= 1"):
        Repeat(op, repeat=lambda x: True, max_iter=0)
    assert Repeat(op, repeat=lambda x, limit: True).inputs == ["x", "limit"]


# ------------------------------------------------------------------------------------------- Sometimes and OneOf
def coin_network(framework: str, prob: float) -> Any:
    return network_of(framework, [LambdaOp(fn=lambda x: x * 0, inputs="x", outputs="hit"),
                                  Sometimes(LambdaOp(fn=lambda x: x * 0 + 1, inputs="x", outputs="hit"), prob=prob)])


def coin_sequence(network: Any, steps: int) -> list[int]:
    batch = {"x": np.ones((2, 1), np.float32)}
    hits = []
    with network(mode="train", epoch=1):
        for _ in range(steps):
            value = numpy_of(network.run_step(batch)["hit"])
            assert value.min() == value.max()  # one draw for the whole batch
            hits.append(int(value[0, 0]))
    return hits


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sometimes_draws_per_step_and_resumes_exactly(framework: str) -> None:
    np.random.seed(7)
    network = coin_network(framework, 0.5)
    first = coin_sequence(network, 40)
    assert 8 < sum(first) < 32  # a fresh draw every step, also inside one traced TF graph
    saved = network.state_dict()
    later = coin_sequence(network, 20)
    np.random.seed(7)
    same_seed = coin_network(framework, 0.5)
    assert coin_sequence(same_seed, 60) == first + later  # reproducible under a seeded numpy
    resumed = coin_network(framework, 0.5)
    resumed.load_state_dict(saved)
    assert coin_sequence(resumed, 20) == later  # a checkpoint continues the stream where it was


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sometimes_extremes_and_wrapped_update(framework: str) -> None:
    assert coin_sequence(coin_network(framework, 0.0), 5) == [0] * 5
    assert coin_sequence(coin_network(framework, 1.0), 5) == [1] * 5
    for prob, moved in ((0.0, False), (1.0, True)):
        model = linear(framework, lr=0.1)
        network = network_of(framework, [ModelOp(model=model, inputs="x", outputs="pred"),
                                         MeanSquaredError(inputs=("pred", "y"), outputs="mse"),
                                         Sometimes(UpdateOp(model=model, loss_name="mse"), prob=prob)])
        step(network, {"x": X, "y": Y})
        assert not np.allclose(weights(model), W0) if moved else np.allclose(weights(model), W0)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_of_chooses_uniformly_and_copies_agree(framework: str) -> None:
    np.random.seed(11)
    one_of = OneOf(*[LambdaOp(fn=lambda x, v=v: x * 0 + v, inputs="x", outputs="pick") for v in (0.0, 1.0, 2.0)])
    network = network_of(framework, [one_of])
    # A copy made now (what each Ray replica receives) makes the same choices as the original.
    twin = network_of(framework, [cloudpickle.loads(cloudpickle.dumps(one_of))])
    batch = {"x": np.ones((1, 1), np.float32)}
    picks, twin_picks = [], []
    for net, into in ((network, picks), (twin, twin_picks)):
        with net(mode="train", epoch=1):
            into.extend(int(numpy_of(net.run_step(batch)["pick"])[0, 0]) for _ in range(60))
    assert picks == twin_picks
    counts = np.bincount(picks, minlength=3)
    assert counts.min() >= 8, counts


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_of_follows_probs_from_its_own_stream(framework: str) -> None:
    def picks(probs: list[float] | None, seed: int = 13, steps: int = 200) -> list[int]:
        np.random.seed(seed)
        ops = [LambdaOp(fn=lambda x, v=v: x * 0 + v, inputs="x", outputs="pick") for v in (0.0, 1.0, 2.0)]
        network = network_of(framework, [OneOf(*ops, probs=probs)])
        with network(mode="train", epoch=1):
            return [int(numpy_of(network.run_step({"x": np.ones((1, 1), np.float32)})["pick"])[0, 0])
                    for _ in range(steps)]

    weighted = picks([0.7, 0.0, 0.3])
    counts = np.bincount(weighted, minlength=3)
    assert counts[1] == 0 and 110 < counts[0] < 170, counts  # never the zero-probability op; about 140 of 200
    assert picks([0.7, 0.0, 0.3]) == weighted  # seeded: the same choices again
    # The same stream draws as without probs: each choice is the draw's interval in the cumulative probabilities.
    uniform = picks(None)
    np.random.seed(13)
    stream_ops = [LambdaOp(fn=lambda x: x, inputs="x", outputs="pick")] * 3
    draws_of = OneOf(*stream_ops).stream
    draws_of.build(framework)
    draws = [float(numpy_of(draws_of.uniform())) for _ in range(200)]
    assert uniform == [min(int(d * 3), 2) for d in draws]
    assert weighted == [0 if d < 0.7 else 2 for d in draws]
    assert picks([0.0, 0.0, 1.0], steps=20) == [2] * 20
    assert picks([], steps=30) == uniform[:30]  # empty means equal probabilities, as in FastEstimator


def test_one_of_probs_errors() -> None:
    ops = [LambdaOp(fn=abs, inputs="x", outputs="x"), LambdaOp(fn=abs, inputs="x", outputs="x")]
    with pytest.raises(ValueError, match="one probability per op: 2 ops but 3"):
        OneOf(*ops, probs=[0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="non-negative"):
        OneOf(*ops, probs=[1.5, -0.5])
    with pytest.raises(ValueError, match="sum to 1"):
        OneOf(*ops, probs=[0.5, 0.4])
    with pytest.raises(TypeError):
        OneOf(*ops, [0.5, 0.5])  # type: ignore[arg-type]  # probs is keyword only, as in FastEstimator
    assert OneOf(*ops, probs=[0.25, 0.75]).probs == [0.25, 0.75]


def test_meta_argument_errors() -> None:
    with pytest.raises(ValueError, match=r"probability in \[0, 1\], got 1.5"):
        Sometimes(LambdaOp(fn=abs, inputs="x", outputs="x"), prob=1.5)
    with pytest.raises(ValueError, match="share outputs"):
        OneOf(LambdaOp(fn=abs, inputs="x", outputs="x"), LambdaOp(fn=abs, inputs="x", outputs="y"))
    with pytest.raises(ValueError, match="at least one"):
        OneOf()
    with pytest.raises(ValueError, match="unknown keys"):
        Sometimes(LambdaOp(fn=abs, inputs="x", outputs="x")).load_state_dict({"seed": 1})


def test_tf_meta_ops_run_eagerly_too() -> None:
    """Network.transform on one batch runs TF eagerly: tf.cond / switch_case / while_loop take their eager paths."""
    np.random.seed(3)
    ops = [LambdaOp(fn=lambda x: x * 0, inputs="x", outputs="hit"),
           Sometimes(LambdaOp(fn=lambda x: x * 0 + 1, inputs="x", outputs="hit"), prob=1.0),
           OneOf(LambdaOp(fn=lambda x: x + 10, inputs="x", outputs="pick"),
                 LambdaOp(fn=lambda x: x + 10, inputs="x", outputs="pick")),
           Repeat(LambdaOp(fn=lambda x: x * 2, inputs="x", outputs="x"), repeat=lambda x: reduce_max(x) < 100)]
    out = TFNetwork(ops).transform({"x": np.array([[3.0]], np.float32)}, mode="train")
    assert (float(numpy_of(out["hit"])[0, 0]), float(numpy_of(out["pick"])[0, 0])) == (1.0, 13.0)
    assert float(numpy_of(out["x"])[0, 0]) == 192.0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_stateful_ops_continue_identically_in_a_replica_copy(framework: str) -> None:
    """Ops shipped the way fe_ray.distributed ships them to Ray replicas (no Ray started) carry SuperLoss's running
    thresholds and Sometimes' random position: the copy's network continues step for step like the original."""
    serialization = pytest.importorskip("fe_ray.distributed.serialization")
    from fe_ray.op.tensorop.loss import SuperLoss

    np.random.seed(5)
    model = linear(framework, lr=0.05)
    ops = [ModelOp(model=model, inputs="x", outputs="pred"),
           SuperLoss(MeanSquaredError(inputs=("pred", "y"), outputs="mse")),
           Sometimes(UpdateOp(model=model, loss_name="mse"), prob=0.5)]
    original = network_of(framework, ops)
    batches = [{"x": X * (1 + k / 10), "y": Y} for k in range(8)]
    with original(mode="train", epoch=1):
        for batch in batches[:3]:
            original.run_step(batch)
    copied_ops = serialization.loads_ops(serialization.dumps_ops(original.ops, original.models))
    replica = network_of(framework, copied_ops)
    results = []
    for network in (original, replica):
        with network(mode="train", epoch=1):
            results.append([float(numpy_of(network.run_step(batch)["mse"])) for batch in batches[3:]])
        results.append(weights(network.models[0]))
    np.testing.assert_allclose(results[0], results[2], rtol=1e-6)
    np.testing.assert_allclose(results[1], results[3], rtol=1e-6)
    assert not np.allclose(results[1], W0)
