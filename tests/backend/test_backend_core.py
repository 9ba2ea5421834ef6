"""Backend functions of both frameworks: converters, gradients, updates, optimizers, persistence, snapshots."""

from __future__ import annotations

import copy
import os
import pickle
import warnings
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fe_ray as fe  # noqa: E402
from fe_ray.backend import get_backend  # noqa: E402
from tests.helpers.models import linear, tf_dense, torch_linear, weights  # noqa: E402

FRAMEWORKS = ["torch", "tf"]
NAMES = ["adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax"]


def model_of(framework: str, optimizer_def: Any = "sgd", **kwargs: Any) -> Any:
    return (torch_linear if framework == "torch" else tf_dense)(optimizer_def, **kwargs)


def tensor(framework: str, values: Any) -> Any:
    return get_backend(framework).to_tensor(np.asarray(values, dtype=np.float32))


def optimizer_state(model: Any) -> list[np.ndarray]:
    """Every slot (moments, step counts) of the model's current optimizer as numpy, in a stable order."""
    return optimizer_slots(model.current_optimizer)


def optimizer_slots(optimizer: Any) -> list[np.ndarray]:
    """Every slot of one optimizer (torch or Keras) as numpy, in a stable order."""
    if hasattr(optimizer, "param_groups"):
        state = optimizer.state_dict()["state"]
        return [np.array(v.detach().numpy() if hasattr(v, "detach") else v)  # copies: .numpy() shares memory
                for idx in sorted(state) for _, v in sorted(state[idx].items())]
    return [np.array(v.numpy()) for v in optimizer.variables]


def sgd_grad(framework: str, values: tuple[float, ...] = (1.0, 1.0, 1.0)) -> list[Any]:
    shape = (1, 3) if framework == "torch" else (3, 1)
    return [tensor(framework, np.reshape(values, shape))]


# ---------------------------------------------------------------------------------------------- tensors
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_converters_nested_round_trip(framework: str) -> None:
    backend = get_backend(framework)
    data = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.ones(2), (np.zeros(1, dtype=np.int64),)],
            "s": "keep"}
    tensors = backend.to_tensor(data)
    assert get_backend(tensors["a"]) is backend and get_backend(tensors["b"][1][0]) is backend
    assert tensors["s"] == "keep" and isinstance(tensors["b"][1], tuple)
    back = backend.to_numpy(tensors)
    np.testing.assert_array_equal(back["a"], data["a"])
    np.testing.assert_array_equal(back["b"][0], data["b"][0])
    assert back["b"][1][0].dtype == np.int64


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_scalars_stay_scalars_and_reversed_views_convert(framework: str) -> None:
    """A 0-d value (a replica's loss) stays 0-d (np.ascontiguousarray made torch's shape (1,)); a view with negative
    strides, which torch rejects as is, converts with its values; so does a big-endian array (as read from some
    files), which torch rejects too."""
    backend = get_backend(framework)
    converted = backend.to_tensor({"loss": np.float32(2.5), "zero_d": np.array(3.0), "rev": np.arange(4.0)[::-1],
                                   "big_endian": np.arange(3, dtype=">f4")})
    assert tuple(converted["loss"].shape) == () and tuple(converted["zero_d"].shape) == ()
    np.testing.assert_array_equal(backend.to_numpy(converted["rev"]), [3.0, 2.0, 1.0, 0.0])
    big_endian = backend.to_numpy(converted["big_endian"])
    np.testing.assert_array_equal(big_endian, [0.0, 1.0, 2.0])
    assert big_endian.dtype == np.float32


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_reduce_concat_stack(framework: str) -> None:
    backend = get_backend(framework)
    a, b = tensor(framework, [[1, 2]]), tensor(framework, [[3, 4]])
    assert float(backend.to_numpy(backend.reduce_mean(a))) == pytest.approx(1.5)
    assert backend.to_numpy(backend.concat([a, b], 0)).shape == (2, 2)
    assert backend.to_numpy(backend.stack([a, b], 1)).shape == (1, 2, 2)


def test_cross_framework_conversion() -> None:
    torch_t = get_backend("torch").to_tensor(np.array([1.0, 2.0], dtype=np.float32))
    tf_t = get_backend("tf").to_tensor(torch_t)
    assert get_backend(tf_t).__name__.endswith(".tf")
    np.testing.assert_array_equal(get_backend("torch").to_numpy(get_backend("torch").to_tensor(tf_t)), [1.0, 2.0])


# ---------------------------------------------------------------------------------------------- gradients / updates
def test_get_gradient_torch_known_function() -> None:
    import torch

    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    unused = torch.zeros(2, requires_grad=True)
    grads = get_backend("torch").get_gradient((x ** 2).sum(), [x, unused])
    np.testing.assert_allclose(grads[0].numpy(), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(grads[1].numpy(), [0.0, 0.0])  # unused sources get zeros, never None


def test_get_gradient_tf_known_function_and_missing_tape() -> None:
    import tensorflow as tf

    backend = get_backend("tf")
    x = tf.Variable([1.0, -2.0, 3.0])
    unused = tf.Variable([0.0, 0.0])
    with tf.GradientTape(persistent=True) as tape:
        y = tf.reduce_sum(x ** 2)
    grads = backend.get_gradient(y, [x, unused], tape=tape)
    np.testing.assert_allclose(grads[0].numpy(), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(grads[1].numpy(), [0.0, 0.0])
    with pytest.raises(ValueError, match="GradientTape"):
        backend.get_gradient(y, [x])


def test_torch_get_gradient_of_a_non_scalar_target_is_that_of_its_sum() -> None:
    import torch

    # FastEstimator's torch backend (and TF's tape) differentiate a vector target as the sum of its entries: the
    # per-sample scores of a batch at once (SaliencyNet's use). torch alone refuses a non-scalar target.
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
    grads = get_backend("torch").get_gradient(x.prod(dim=1), [x])
    np.testing.assert_allclose(grads[0].numpy(), [[2.0, 1.0], [-1.0, 3.0]])


def test_tf_get_gradient_of_a_single_source_is_a_single_gradient() -> None:
    import tensorflow as tf

    x = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as tape:
        y = x * x
    # One variable in, one gradient out (not one per row of the variable, rows the tape never saw).
    np.testing.assert_allclose(get_backend("tf").get_gradient(y, x, tape=tape).numpy(), [2.0, 4.0, 6.0])


def test_tf_get_gradient_of_higher_order_stays_on_the_tape() -> None:
    import tensorflow as tf

    backend = get_backend("tf")
    x = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as tape:
        y = x * x
        first = backend.get_gradient(y, [x], tape=tape)[0]
        recorded = backend.get_gradient(y, [x], tape=tape, higher_order=True)[0]
    np.testing.assert_allclose(recorded.numpy(), [2.0, 4.0, 6.0])
    # Only the recorded gradient can be differentiated again (d(2x)/dx = 2); the other one is off the tape.
    np.testing.assert_allclose(backend.get_gradient(recorded, [x], tape=tape)[0].numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(backend.get_gradient(first, [x], tape=tape)[0].numpy(), [0.0, 0.0, 0.0])


def test_torch_get_gradient_of_a_single_source_and_of_higher_order() -> None:
    import torch

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x ** 3).sum()
    backend = get_backend("torch")
    first = backend.get_gradient(y, x, higher_order=True)  # one tensor in, one gradient out: 3x^2
    np.testing.assert_allclose(first.detach().numpy(), [3.0, 12.0, 27.0])
    # The gradient keeps its graph, so it can be differentiated again: d(sum 3x^2)/dx = 6x.
    np.testing.assert_allclose(backend.get_gradient(first.sum(), [x])[0].numpy(), [6.0, 12.0, 18.0])
    assert not backend.get_gradient((x ** 2).sum(), [x])[0].requires_grad  # first order only: no graph kept


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_public_get_gradient_takes_fastestimators_argument_order(framework: str) -> None:
    from fe_ray import backend as fe_backend

    if framework == "torch":
        import torch

        x = torch.tensor([1.0, 2.0], requires_grad=True)
        grads = fe_backend.get_gradient((x * x).sum(), [x], True)  # FE: (target, sources, higher_order, tape)
        assert grads[0].requires_grad
    else:
        import tensorflow as tf

        x = tf.Variable([1.0, 2.0])
        with tf.GradientTape(persistent=True) as tape:
            y = tf.reduce_sum(x * x)
            grads = fe_backend.get_gradient(y, [x], True, tape)
        np.testing.assert_allclose(tape.gradient(grads[0], x).numpy(), [2.0, 2.0])
    np.testing.assert_allclose(np.asarray(grads[0].detach() if framework == "torch" else grads[0]), [2.0, 4.0])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_public_get_gradient_gives_none_for_sources_the_target_does_not_reach(framework: str) -> None:
    # As FastEstimator's (torch.autograd.grad with allow_unused / tape.gradient); the backends' own get_gradient,
    # which UpdateOp, GradientOp and the reducers use, still fills in zeros.
    from fe_ray import backend as fe_backend

    if framework == "torch":
        import torch

        used, unused = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
        targets = [(used * 3).sum() for _ in range(4)]
        tape = None
    else:
        import tensorflow as tf

        used, unused = tf.Variable([1.0, 1.0]), tf.Variable([1.0, 1.0, 1.0])
        with tf.GradientTape(persistent=True) as tape:
            targets = [tf.reduce_sum(used * 3) for _ in range(4)]
    listed = fe_backend.get_gradient(targets[0], [used, unused], tape=tape)
    assert isinstance(listed, list) and listed[1] is None
    np.testing.assert_allclose(np.asarray(listed[0]), [3.0, 3.0])
    paired = fe_backend.get_gradient(targets[1], (used, unused), tape=tape)
    assert isinstance(paired, tuple) and len(paired) == 2 and paired[1] is None  # a tuple stays a tuple
    assert fe_backend.get_gradient(targets[2], unused, tape=tape) is None
    zeros = get_backend(framework).get_gradient(targets[3], [used, unused], tape=tape)
    np.testing.assert_array_equal(np.asarray(zeros[1]), [0.0, 0.0, 0.0])


def test_torch_save_model_refuses_architecture_and_a_missing_optimizer(tmp_path: Any) -> None:
    from fe_ray import backend as fe_backend

    with pytest.raises(ValueError, match=r"save_architecture=True cannot save torch model 'net'.*weights only"):
        fe_backend.save_model(model_of("torch", "sgd", name="net"), str(tmp_path), save_architecture=True)
    with pytest.raises(ValueError, match=r"optimizer of model 'bare'.*save_optimizer=False"):
        fe_backend.save_model(model_of("torch", None, name="bare"), str(tmp_path), save_optimizer=True)
    assert not os.listdir(tmp_path)  # refused before anything was written


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_update_model_sgd_is_minus_lr_times_grad(framework: str) -> None:
    model = linear(framework, lr=0.1)
    get_backend(framework).update_model(model, sgd_grad(framework, (1.0, -2.0, 0.5)))
    np.testing.assert_allclose(weights(model), np.array([1, 2, 3]) - 0.1 * np.array([1.0, -2.0, 0.5]), atol=1e-7)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_update_model_defer_waits_for_step_end(framework: str) -> None:
    model = linear(framework, lr=0.1)
    deferred: dict[str, list[Any]] = {}
    get_backend(framework).update_model(model, sgd_grad(framework), defer=True, deferred=deferred)
    np.testing.assert_array_equal(weights(model), [1, 2, 3])
    for fn in deferred[model.model_name]:
        fn()
    np.testing.assert_allclose(weights(model), [0.9, 1.9, 2.9], atol=1e-7)


# ---------------------------------------------------------------------------------------------- optimizers
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", NAMES + ["ADAM"])
def test_make_optimizer_names(framework: str, name: str) -> None:
    model = model_of(framework, None)
    optimizer = get_backend(framework).make_optimizer(model, name, False)
    assert type(optimizer).__name__.lower() == name.lower()
    if framework == "torch":
        assert optimizer.scaler is None


@pytest.mark.parametrize("name, rate", [("adadelta", 1.0), ("adagrad", 0.01), ("adam", 0.001), ("adamax", 0.002),
                                        ("rmsprop", 0.01), ("sgd", 0.01)])
def test_torch_optimizer_names_take_fastestimators_learning_rates(name: str, rate: float) -> None:
    # FastEstimator builds torch optimizers from names with torch's defaults (SGD: 0.01); a ported program must train
    # at the same rates (rmsprop was 0.001).
    optimizer = get_backend("torch").make_optimizer(model_of("torch", None), name, False)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(rate)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_make_optimizer_unknown_name_and_none(framework: str) -> None:
    backend = get_backend(framework)
    model = model_of(framework, None)
    with pytest.raises(ValueError, match=r"'adamw2'.*\['adadelta', 'adagrad', 'adam', 'adamax', 'rmsprop', 'sgd'\]"):
        backend.make_optimizer(model, "adamw2", False)
    with pytest.raises(TypeError, match="optimizer_fn"):
        backend.make_optimizer(model, 3, False)
    assert backend.make_optimizer(model, None, False) is None


def test_make_optimizer_mixed_precision() -> None:
    import keras
    import torch

    torch_opt = get_backend("torch").make_optimizer(model_of("torch", None), "sgd", True)
    assert (torch_opt.scaler is not None) == torch.cuda.is_available()
    tf_opt = get_backend("tf").make_optimizer(model_of("tf", None), "adam", True)
    assert isinstance(tf_opt, keras.optimizers.LossScaleOptimizer)
    with pytest.raises(TypeError, match="returned int"):
        get_backend("tf").make_optimizer(model_of("tf", None), lambda: 1, False)


def test_tf_get_lr_is_a_float32_scalar() -> None:
    """FastEstimator's TF get_lr returns the variable's numpy value, so the Finish line shows 0.0009997196 (float32),
    not float64's 0.0009997196029871702."""
    from fe_ray.backend import get_lr

    model = linear("tf", lr=0.0009997196)
    lr = get_lr(model)
    assert isinstance(lr, np.float32) and str(lr) == "0.0009997196"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_set_and_get_lr(framework: str) -> None:
    backend = get_backend(framework)
    model = linear(framework, lr=0.1)
    assert backend.get_lr(model) == pytest.approx(0.1)
    backend.set_lr(model, 0.25)
    assert backend.get_lr(model) == pytest.approx(0.25)
    backend.update_model(model, sgd_grad(framework))
    np.testing.assert_allclose(weights(model), [0.75, 1.75, 2.75], atol=1e-7)
    with pytest.raises(ValueError, match="has no optimizer"):
        backend.get_lr(model_of(framework, None))


def test_set_lr_weight_decay_tf_follows_the_rate_as_fastestimator() -> None:
    import keras

    from fe_ray.backend import get_lr, set_lr
    from fe_ray.backend.tf_optim import get_weight_decay

    model = model_of("tf", lambda: keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.02))
    set_lr(model, 0.05)  # no weight_decay given: it scales with the rate (0.02 * 0.05 / 0.1)
    assert get_lr(model) == pytest.approx(0.05) and get_weight_decay(model.current_optimizer) == pytest.approx(0.01)
    set_lr(model, 0.2, 0.5)  # FastEstimator's third argument
    assert get_lr(model) == pytest.approx(0.2) and get_weight_decay(model.current_optimizer) == pytest.approx(0.5)
    set_lr(model, 0.2, weight_decay=0.25)
    assert get_weight_decay(model.current_optimizer) == pytest.approx(0.25)
    plain = model_of("tf", "adam")  # no weight decay: nothing to scale, and a given one is not invented
    set_lr(plain, 0.01)
    set_lr(plain, 0.02, 0.3)
    assert plain.current_optimizer.weight_decay is None and get_lr(plain) == pytest.approx(0.02)


def test_tf_weight_decay_set_by_set_lr_reaches_compiled_steps_and_snapshots() -> None:
    """Keras holds an optimizer's weight decay as a float that a tf.function step bakes in when traced: the decay
    set_lr scales never reached a compiled step (its weights differed from an eager run's), and snapshots
    (checkpoints, replica pushes) did not hold it, so a resumed run decayed by another value."""
    import keras

    from fe_ray.backend import set_lr
    from fe_ray.backend.tf_optim import get_weight_decay
    from fe_ray.io.state_files import flatten_state, unflatten_state
    from fe_ray.network import Network
    from fe_ray.op.tensorop.loss import MeanSquaredError
    from fe_ray.op.tensorop.model import ModelOp, UpdateOp

    def adamw() -> Any:
        keras.utils.set_random_seed(0)
        return model_of("tf", lambda: keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5))

    def train(eager: bool) -> Any:
        model = adamw()
        network = Network([ModelOp(model=model, inputs="x", outputs="p"),
                           MeanSquaredError(inputs=("p", "y"), outputs="loss"),
                           UpdateOp(model=model, loss_name="loss")])
        batch = {"x": np.ones((4, 3), np.float32), "y": np.zeros((4, 1), np.float32)}
        with network(mode="train", epoch=1, eager=eager) as running:
            for lr in (0.1, 0.01, 0.001):  # the decay follows: 0.5, 0.05, 0.005
                set_lr(model, lr)
                running.run_step(batch)
        return model

    compiled = train(eager=False)
    assert all(np.allclose(a, b, atol=1e-7) for a, b in zip(compiled.get_weights(), train(eager=True).get_weights()))
    backend = get_backend("tf")
    arrays: dict[str, np.ndarray] = {}
    stored = unflatten_state(flatten_state(backend.get_state(compiled), arrays), arrays)  # as a checkpoint holds it
    restored = adamw()
    backend.set_state(restored, stored)
    assert get_weight_decay(restored.current_optimizer) == pytest.approx(0.005)
    assert "optimizer_weight_decay" not in backend.get_state(model_of("tf", "adam"))  # nothing to keep


def test_tf_snapshot_keeps_each_scheduled_optimizers_weight_decay() -> None:
    """With a Scheduler of optimizers, every scheduled optimizer's weight decay (which set_lr scales with the rate)
    is in the snapshot, through a checkpoint's flattening, and restored into its own optimizer whichever is current;
    the snapshot held none of them, so a resumed run decayed by the initial values."""
    import keras

    import fe_ray as fe
    from fe_ray.backend import set_lr
    from fe_ray.backend.optimizers import scheduled_optimizers
    from fe_ray.backend.tf_optim import get_weight_decay
    from fe_ray.io.state_files import flatten_state, unflatten_state
    from fe_ray.schedule import RepeatScheduler

    def scheduled() -> Any:
        return fe.build(lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)]), model_name="sched",
                        optimizer_fn=RepeatScheduler([lambda: keras.optimizers.AdamW(0.1, weight_decay=0.5),
                                                      lambda: keras.optimizers.Adam(0.1),
                                                      lambda: keras.optimizers.AdamW(0.1, weight_decay=0.2)]))

    model = scheduled()
    adamw, adam, second_adamw = scheduled_optimizers(model)
    set_lr(model, 0.01)  # the first AdamW is current: 0.5 -> 0.05
    model.current_optimizer = second_adamw
    set_lr(model, 0.05)  # 0.2 -> 0.1
    backend = get_backend("tf")
    arrays: dict[str, np.ndarray] = {}
    stored = unflatten_state(flatten_state(backend.get_state(model), arrays), arrays)
    restored = scheduled()  # its current optimizer is the first AdamW
    backend.set_state(restored, stored)
    assert [get_weight_decay(each) for each in scheduled_optimizers(restored)] == pytest.approx([0.05, None, 0.1])


def test_set_lr_weight_decay_torch() -> None:
    import torch

    from fe_ray.backend import get_lr, set_lr

    model = model_of("torch", lambda params: torch.optim.AdamW(params, lr=0.1, weight_decay=0.02))
    set_lr(model, 0.05)  # torch's decoupled decay already scales with the rate: left as it is
    group = model.current_optimizer.param_groups[0]
    assert get_lr(model) == pytest.approx(0.05) and group["weight_decay"] == pytest.approx(0.02)
    set_lr(model, 0.05, 0.3)
    assert group["weight_decay"] == pytest.approx(0.3)


def test_tf_known_lr_remembers_writes_and_reads_without_reading_the_variable() -> None:
    backend = get_backend("tf")
    model = linear("tf", lr=0.1)
    assert backend.known_lr(model) == pytest.approx(0.1)  # unknown yet: read once
    backend.set_lr(model, 0.25)
    assert backend.known_lr(model) == pytest.approx(0.25)
    model.current_optimizer.learning_rate.assign(0.5)  # behind set_lr's back
    assert backend.known_lr(model) == pytest.approx(0.25)  # not read again: that is the point
    assert backend.get_lr(model) == pytest.approx(0.5)  # a read refreshes it
    assert backend.known_lr(model) == pytest.approx(0.5)
    state = backend.get_state(model)
    backend.set_lr(model, 0.75)
    backend.set_state(model, state)  # restores the optimizer's variables, the rate among them
    assert backend.known_lr(model) == pytest.approx(0.5)


def test_torch_known_lr_is_the_current_rate() -> None:
    backend = get_backend("torch")
    model = linear("torch", lr=0.1)
    model.current_optimizer.param_groups[0]["lr"] = 0.5
    assert backend.known_lr(model) == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------- persistence
def adam_step(framework: str, model: Any, values: tuple[float, ...]) -> None:
    get_backend(framework).update_model(model, sgd_grad(framework, values))


RAN: list[str] = []


def _record(text: str) -> None:
    RAN.append(text)


class _CodeOnUnpickle:
    """An object whose unpickling calls a function: what a malicious .pt file would carry."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _record, ("payload ran",)


def test_torch_load_model_refuses_code_in_a_weights_file(tmp_path: Any) -> None:
    import torch

    path = str(tmp_path / "model.pt")
    torch.save({"weight": _CodeOnUnpickle()}, path)
    with pytest.raises(pickle.UnpicklingError):  # weights_only=True: only tensors and plain containers
        get_backend("torch").load_model(torch_linear("sgd"), path)
    assert RAN == []


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_save_load_restores_weights_and_optimizer(framework: str, tmp_path: Any) -> None:
    backend = get_backend(framework)
    model = model_of(framework, "adam", name="net")
    adam_step(framework, model, (1.0, -1.0, 2.0))
    path = backend.save_model(model, str(tmp_path), save_optimizer=True)
    assert os.path.basename(path) == ("net.pt" if framework == "torch" else "net.weights.h5")
    saved_w, saved_opt = weights(model), optimizer_state(model)
    adam_step(framework, model, (3.0, 3.0, 3.0))  # perturb weights and moments
    assert not np.allclose(weights(model), saved_w)
    backend.load_model(model, path, load_optimizer=True)
    np.testing.assert_array_equal(weights(model), saved_w)
    for got, want in zip(optimizer_state(model), saved_opt, strict=True):
        np.testing.assert_array_equal(got, want)
    # A fresh model whose optimizer has never run (no slots yet) restores the same state.
    fresh = model_of(framework, "adam", name="net", weights=(0.0, 0.0, 0.0))
    backend.load_model(fresh, path, load_optimizer=True)
    np.testing.assert_array_equal(weights(fresh), saved_w)
    for got, want in zip(optimizer_state(fresh), saved_opt, strict=True):
        np.testing.assert_array_equal(got, want)
    # Continuing training from the checkpoint matches continuing from the original.
    adam_step(framework, model, (0.5, 0.5, 0.5))
    adam_step(framework, fresh, (0.5, 0.5, 0.5))
    np.testing.assert_array_equal(weights(fresh), weights(model))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_load_optimizer_missing_file(framework: str, tmp_path: Any) -> None:
    backend = get_backend(framework)
    model = model_of(framework, "adam")
    path = backend.save_model(model, str(tmp_path))
    backend.load_model(model, path)
    with pytest.raises(FileNotFoundError, match="save_optimizer=True"):
        backend.load_model(model, path, load_optimizer=True)


def test_tf_save_model_with_architecture_reloads_without_the_code(tmp_path: Any) -> None:
    import keras

    backend = get_backend("tf")
    model = model_of("tf", "adam", name="arch", weights=(0.5, -1.0, 2.0))
    backend.save_model(model, str(tmp_path), save_architecture=True)
    restored = keras.models.load_model(os.path.join(str(tmp_path), "arch.keras"))
    x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    np.testing.assert_allclose(np.asarray(restored(x)), np.asarray(model(x)))


def test_tf_architecture_of_an_unconfigurable_subclassed_model_is_exported_as_a_saved_model(
        tmp_path: Any, capsys: Any) -> None:
    """Keras cannot write a .keras archive of a subclassed model whose constructor takes a value it cannot save
    (no get_config): the model is exported as FastEstimator's SavedModel folder instead, and no broken file is
    left (it used to leave a 0-byte <name>.keras and raise at the end of the epoch)."""
    import keras
    import tensorflow as tf

    class Sub(keras.Model):
        def __init__(self, units: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(units)

        def call(self, x: Any) -> Any:
            return self.dense(x)

    def make() -> Any:
        model = Sub(3)
        model(np.ones((1, 4), np.float32))
        return model

    model = fe.build(make, "adam", model_name="sub")
    backend = get_backend("tf")
    for _ in range(2):  # a second save of the same name replaces the folder
        assert backend.save_model(model, str(tmp_path), save_architecture=True).endswith("sub.weights.h5")
        assert sorted(os.listdir(tmp_path)) == ["sub", "sub.weights.h5"]
    assert capsys.readouterr().out.count("exported it as the inference SavedModel") == 2
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"Cannot export model 'other' .* is no SavedModel"):
        backend.save_model(model, str(tmp_path), model_name="other", save_architecture=True)
    assert os.listdir(tmp_path / "other") == ["notes.txt"]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no staging folder left
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    exported = tf.saved_model.load(str(tmp_path / "sub"))  # held: its functions need the loaded variables alive
    np.testing.assert_allclose(np.asarray(exported.serve(x)), np.asarray(model(x)), rtol=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_load_model_takes_a_pathlib_path(framework: str, tmp_path: Any) -> None:
    backend = get_backend(framework)
    model = model_of(framework, "adam", name="p", weights=(0.5, -1.0, 2.0))
    path = backend.save_model(model, tmp_path, save_optimizer=True)  # tmp_path is a pathlib.Path
    other = model_of(framework, "adam", name="p")
    backend.load_model(other, type(tmp_path)(path), load_optimizer=True)
    np.testing.assert_allclose(weights(other), weights(model))


def test_tf_save_optimizer_of_a_model_without_one_is_refused(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match=r"optimizer of model 'bare'.*save_optimizer=False"):
        get_backend("tf").save_model(model_of("tf", None, name="bare"), str(tmp_path), save_optimizer=True)


def test_torch_get_state_copies_unless_told_not_to() -> None:
    backend = get_backend("torch")
    model = model_of("torch", "adam")
    adam_step("torch", model, (1.0, -1.0, 2.0))
    copied, viewed = backend.get_state(model), backend.get_state(model, copy=False)
    before = weights(model).copy()
    adam_step("torch", model, (3.0, 3.0, 3.0))
    # The copy is a snapshot of the past; the views follow the live weights and Adam moments (no extra memory).
    np.testing.assert_array_equal(np.concatenate([v.reshape(-1) for v in copied["model"].values()]), before)
    np.testing.assert_array_equal(np.concatenate([v.reshape(-1) for v in viewed["model"].values()]), weights(model))
    live = next(iter(model.current_optimizer.state.values()))["exp_avg"].numpy()
    assert np.shares_memory(next(iter(viewed["optimizer"]["optimizer"]["state"].values()))["exp_avg"], live)
    assert not np.shares_memory(next(iter(copied["optimizer"]["optimizer"]["state"].values()))["exp_avg"], live)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_get_state_set_state_exact_and_picklable(framework: str) -> None:
    backend = get_backend(framework)
    model = model_of(framework, "adam")
    adam_step(framework, model, (1.0, -1.0, 2.0))
    snapshot = pickle.loads(pickle.dumps(backend.get_state(model)))
    saved_w, saved_opt = weights(model), optimizer_state(model)
    adam_step(framework, model, (3.0, 3.0, 3.0))
    other = model_of(framework, "adam", weights=(9.0, 9.0, 9.0))
    for target in (model, other):
        backend.set_state(target, snapshot)
        np.testing.assert_array_equal(weights(target), saved_w)
        for got, want in zip(optimizer_state(target), saved_opt, strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_weights_only_snapshot_restores_the_weights_and_keeps_the_optimizer_state(framework: str) -> None:
    backend = get_backend(framework)
    model = model_of(framework, "adam")
    adam_step(framework, model, (1.0, -1.0, 2.0))
    snapshot = backend.get_state(model, weights_only=True)
    assert snapshot["optimizer"] is None
    saved_w = weights(model)
    adam_step(framework, model, (3.0, 3.0, 3.0))
    moments = optimizer_state(model)
    backend.set_state(model, snapshot)
    np.testing.assert_array_equal(weights(model), saved_w)
    for got, want in zip(optimizer_state(model), moments, strict=True):  # the later step's moments stay
        np.testing.assert_array_equal(got, want)


def _momentum_sgd(framework: str) -> Any:
    if framework == "torch":
        import torch

        return lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9)
    import keras

    return lambda: keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_snapshot_restores_every_scheduled_optimizer_into_its_own(framework: str) -> None:
    """A model built with RepeatScheduler([adam, sgd]) holds two optimizers. A snapshot taken while the SGD one is
    current restores Adam's moments too (they are needed again in epoch 3), each into its own optimizer, also into a
    model whose current optimizer is the Adam (a resumed run's, before its first epoch). A snapshot of the current
    optimizer alone lost Adam's moments, and restoring it into the Adam raised (torch: KeyError 'step'; TF: the
    variable counts differ)."""
    import fe_ray as fe
    from fe_ray.backend.optimizers import SCHEDULED_KEY, scheduled_optimizers
    from fe_ray.schedule import RepeatScheduler

    backend = get_backend(framework)

    def build(values: tuple[float, ...]) -> Any:
        return fe.build(lambda: model_of(framework, weights=values),
                        optimizer_fn=RepeatScheduler(["adam", _momentum_sgd(framework)]), model_name="m")

    model = build((1.0, 2.0, 3.0))
    adam, sgd = scheduled_optimizers(model)
    assert model.current_optimizer is adam
    adam_step(framework, model, (1.0, -1.0, 2.0))  # epoch 1
    model.current_optimizer = model.optimizer.get_current_value(2)
    assert model.current_optimizer is sgd
    adam_step(framework, model, (3.0, 3.0, -3.0))  # epoch 2
    snapshot = pickle.loads(pickle.dumps(backend.get_state(model)))
    assert snapshot[SCHEDULED_KEY]["current"] == 1 and snapshot[SCHEDULED_KEY]["states"][1] is None  # not twice
    saved_w, saved = weights(model), [optimizer_slots(adam), optimizer_slots(sgd)]
    target = build((9.0, 9.0, 9.0))
    assert target.current_optimizer is scheduled_optimizers(target)[0]
    backend.set_state(target, snapshot)
    np.testing.assert_array_equal(weights(target), saved_w)
    for optimizer, want in zip(scheduled_optimizers(target), saved, strict=True):
        got = optimizer_slots(optimizer)
        assert len(got) == len(want) and got
        for got_slot, want_slot in zip(got, want):
            np.testing.assert_array_equal(got_slot, want_slot)
    # Epoch 3 goes on with Adam's moments from epoch 1 in both.
    for each in (model, target):
        each.current_optimizer = each.optimizer.get_current_value(3)
        adam_step(framework, each, (0.5, 0.5, 0.5))
    np.testing.assert_array_equal(weights(target), weights(model))


def test_torch_set_state_without_copy_adopts_owned_arrays_only() -> None:
    backend = get_backend("torch")
    model = model_of("torch", "adam")
    adam_step("torch", model, (1.0, -1.0, 2.0))
    owned = pickle.loads(pickle.dumps(backend.get_state(model)))
    frozen = pickle.loads(pickle.dumps(backend.get_state(model)))
    moments = [next(iter(s["optimizer"]["optimizer"]["state"].values()))["exp_avg"] for s in (owned, frozen)]
    moments[1].flags.writeable = False  # what an object-store view looks like
    saved = moments[1].copy()
    for snapshot, shared in ((owned, True), (frozen, False)):
        target = model_of("torch", "adam", weights=(9.0, 9.0, 9.0))
        backend.set_state(target, snapshot, copy=False)
        live = next(iter(target.current_optimizer.state.values()))["exp_avg"].numpy()
        assert np.shares_memory(live, moments[0] if shared else moments[1]) is shared
        np.testing.assert_array_equal(live, saved)
        adam_step("torch", target, (3.0, 3.0, 3.0))  # updates its state in place; a read-only array would raise
    np.testing.assert_array_equal(moments[1], saved)
    assert not np.array_equal(moments[0], saved)  # adopted: the optimizer's step changed the snapshot's array


def test_torch_set_state_copies_into_the_optimizers_own_tensors_when_layouts_match() -> None:
    backend = get_backend("torch")
    source = model_of("torch", "adam")
    adam_step("torch", source, (1.0, -1.0, 2.0))
    source.current_optimizer.param_groups[0]["lr"] = 0.25
    snapshot = pickle.loads(pickle.dumps(backend.get_state(source)))
    for array in _arrays(snapshot):
        array.flags.writeable = False  # object-store views are read-only
    target = model_of("torch", "adam", weights=(9.0, 9.0, 9.0))
    adam_step("torch", target, (3.0, 3.0, 3.0))  # the same layout of state: moments and step counts
    live = {key: value for key, value in next(iter(target.current_optimizer.state.values())).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "NumPy array is not writable" warning either
        backend.set_state(target, snapshot)
    state = next(iter(target.current_optimizer.state.values()))
    assert all(state[key] is tensor for key, tensor in live.items())  # the same tensors, overwritten
    np.testing.assert_array_equal(weights(target), weights(source))
    for got, want in zip(optimizer_state(target), optimizer_state(source), strict=True):
        np.testing.assert_array_equal(got, want)
    assert target.current_optimizer.param_groups[0]["lr"] == 0.25
    # The copy is the optimizer's own: training on does not touch the snapshot, and matches the source's step.
    adam_step("torch", target, (0.5, 0.5, 0.5))
    adam_step("torch", source, (0.5, 0.5, 0.5))
    np.testing.assert_array_equal(weights(target), weights(source))
    # An optimizer without state (another layout) gets new tensors instead.
    fresh = model_of("torch", "adam")
    backend.set_state(fresh, snapshot)
    for got, want in zip(optimizer_state(fresh), _opt_arrays(snapshot), strict=True):
        np.testing.assert_array_equal(got, want)
    exp_avg = next(iter(fresh.current_optimizer.state.values()))["exp_avg"].numpy()
    assert not any(np.shares_memory(exp_avg, array) for array in _arrays(snapshot))


def _arrays(data: Any) -> list[np.ndarray]:
    if isinstance(data, np.ndarray):
        return [data]
    if isinstance(data, dict):
        return [a for value in data.values() for a in _arrays(value)]
    if isinstance(data, (list, tuple)):
        return [a for value in data for a in _arrays(value)]
    return []


def _opt_arrays(snapshot: dict[str, Any]) -> list[np.ndarray]:
    state = snapshot["optimizer"]["optimizer"]["state"]
    return [np.asarray(v) for idx in sorted(state) for _, v in sorted(state[idx].items())]


def test_tf_set_state_rejects_other_architecture() -> None:
    backend = get_backend("tf")
    snapshot = backend.get_state(tf_dense("sgd"))
    snapshot["model"] = snapshot["model"] + snapshot["model"]
    with pytest.raises(ValueError, match="different architecture"):
        backend.set_state(tf_dense("sgd"), snapshot)


def test_torch_device_helpers() -> None:
    import torch

    backend = get_backend("torch")
    assert backend.get_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    model = torch_linear("adam")
    backend.move_model(model, "cpu")
    assert get_backend("tf").get_device() is None


@pytest.mark.parametrize("indexed", [False, True], ids=["no_context", "in_context"])
def test_torch_feed_forward_sets_the_mode_and_keeps_a_models_own_train_override(indexed: bool) -> None:
    import torch

    backend = get_backend("torch")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5), torch.nn.Linear(2, 1))
    x = torch.ones(4, 2)
    enter = backend.enter_context if indexed else (lambda *args: None)
    enter([model], "train", None)
    for training in (True, True, False, False, True):
        backend.feed_forward(model, x, training=training)
        assert all(module.training == training for module in model.modules())
    model[1].eval()  # a submodule switched by user code between steps is put back, as model.train() would
    backend.feed_forward(model, x, training=True)
    assert model[1].training

    class FrozenNorm(torch.nn.Module):
        """Keeps its BatchNorm in eval mode whatever mode it is put in (a common detection-model pattern)."""

        def __init__(self) -> None:
            super().__init__()
            self.norm, self.calls = torch.nn.BatchNorm1d(2), 0

        def train(self, mode: bool = True) -> FrozenNorm:
            super().train(mode)
            self.norm.eval()
            self.calls += 1
            return self

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(x)

    frozen = FrozenNorm()
    enter([frozen], "train", None)
    for _ in range(3):
        backend.feed_forward(frozen, x, training=True)
    # A model with its own train() gets the call every time (from the first step on, when all its flags still
    # read True), so the norm stays frozen.
    assert frozen.calls == 3 and frozen.training and not frozen.norm.training


def test_torch_context_index_keeps_per_step_facts_and_sees_new_modules_from_the_next_context() -> None:
    import torch

    from fe_ray.backend import torch_modules

    backend = get_backend("torch")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    backend.enter_context([model], "train", None)
    assert backend.trainable_variables(model) == list(model.parameters())
    model[0].weight.requires_grad_(False)  # freezing inside an epoch takes effect at the next step
    assert backend.trainable_variables(model) == [model[0].bias, *model[1].parameters()]
    model.append(torch.nn.Dropout(0.5))  # structure changes are read when the next context starts
    model.eval()
    model[2].train()
    backend.feed_forward(model, torch.ones(3, 2), training=False)
    assert model[2].training  # not in this context's index
    backend.exit_context([model], "train", None)
    assert model not in torch_modules._TREES  # no index outlives its context
    backend.feed_forward(model, torch.ones(3, 2), training=False)  # without an index: the full walk
    assert not model[2].training
    backend.enter_context([model], "eval", None)
    model[2].train()
    backend.feed_forward(model, torch.ones(3, 2), training=False)
    assert not model[2].training
    backend.exit_context([model], "eval", None)


def test_torch_deferred_device_tensor_copies_into_a_host_buffer_exactly() -> None:
    import torch

    from fe_ray.backend import torch_io
    from fe_ray.io.snapshot import SnapshotBuffers

    # Built directly over CPU tensors (the class is what get_state(deferred=True) returns for accelerator tensors).
    half = torch_io._DeviceTensor(torch.tensor([[1.5, -2.25]], dtype=torch.bfloat16))
    assert half.shape == (1, 2) and half.dtype == np.float32 and half.nbytes == 8  # bfloat16 travels as float32
    full = torch_io._DeviceTensor(torch.arange(6, dtype=torch.int64))
    copied = SnapshotBuffers(1).copy({"a": half, "b": [full]})
    np.testing.assert_array_equal(copied["a"], [[1.5, -2.25]])
    np.testing.assert_array_equal(copied["b"][0], np.arange(6))
    assert copied["b"][0].dtype == np.int64
    # On the CPU nothing is deferred: the snapshot is the same as without the flag.
    model = torch.nn.Linear(2, 1)
    state = get_backend("torch").get_state(model, copy=False, deferred=True)
    assert all(isinstance(value, np.ndarray) for value in state["model"].values())


def test_torch_context_index_never_keeps_a_model_alive() -> None:
    import gc
    import weakref

    import torch

    from fe_ray.backend import torch_modules

    backend = get_backend("torch")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    before = len(torch_modules._TREES)
    backend.enter_context([model], "train", None)  # a context that never ends (it failed to start)
    assert len(torch_modules._TREES) == before + 1
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None and len(torch_modules._TREES) == before


def test_tf_to_number_takes_a_0d_bfloat16_tensor() -> None:
    """numpy 2 cannot make an array from a 0-d bfloat16 tensor's __array__ ("object __array__ method not producing
    an array"), so logging such an output, or a replica returning it, raised; FastEstimator's .numpy() works."""
    import tensorflow as tf

    from fe_ray.backend import to_number
    from fe_ray.trace.trace import to_loggable

    scalar = tf.cast(tf.constant(0.5), tf.bfloat16)
    value = to_number(scalar)
    assert isinstance(value, np.ndarray) and value.shape == () and str(value.dtype) == "bfloat16"
    assert float(value) == 0.5 and float(to_loggable(scalar)) == 0.5
    nested = to_number({"s": scalar, "v": tf.Variable(1.5, dtype=tf.bfloat16), "b": tf.ones((2,), tf.bfloat16)})
    assert float(nested["s"]) == 0.5 and float(nested["v"]) == 1.5 and nested["b"].shape == (2,)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_weights_fingerprint_moves_with_writes_only(framework: str) -> None:
    """What tells a distributed driver that its weights were written since the replicas had them: reads and rate
    changes leave it, a weight write (in place, or set_state as load_model does) moves it."""
    from fe_ray.backend import set_lr

    model = model_of(framework, "adam")
    backend = get_backend(framework)
    before = backend.weights_fingerprint(model)
    backend.get_state(model)
    set_lr(model, 0.5)
    assert backend.weights_fingerprint(model) == before
    state = backend.get_state(model)
    backend.set_state(model, state)
    after_load = backend.weights_fingerprint(model)
    if framework == "tf":  # the same values again: a checksum cannot tell
        assert after_load == before
        model.set_weights([weight * 2 for weight in model.get_weights()])
    else:  # the version counters can
        assert after_load != before
        before = after_load
        import torch

        with torch.no_grad():
            next(model.parameters()).mul_(2)
    assert backend.weights_fingerprint(model) != before


def test_a_keras_optimizer_built_before_a_layer_froze_restores_into_a_fresh_frozen_model() -> None:
    # Fine-tuning: the optimizer has slots for a layer frozen later. A fresh copy of the model with the layer frozen
    # (a resumed process, a restarted replica) builds its optimizer for the same weights, so the state fits.
    import keras

    import fe_ray as fe

    def make() -> Any:
        keras.utils.set_random_seed(0)
        return fe.build(lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                                   keras.layers.Dense(2)]), optimizer_fn="adam")

    backend = get_backend("tf")
    trained = make()
    backend.build_optimizer(trained)
    trained.current_optimizer.variables[0].assign(7)  # the step counter: something to carry over
    trained.layers[0].trainable = False
    state = backend.get_state(trained)
    fresh = make()
    fresh.layers[0].trainable = False
    backend.set_state(fresh, state)
    for mine, theirs in zip(optimizer_state(fresh), optimizer_state(trained)):
        np.testing.assert_array_equal(mine, theirs)
    assert len(fresh.current_optimizer.variables) == len(trained.current_optimizer.variables) == 10


def test_the_torch_fingerprint_moves_when_the_optimizer_state_is_replaced() -> None:
    # A driver resetting or reloading its optimizer between fits: the replicas must be sent the new state.
    backend = get_backend("torch")
    model = model_of("torch", "adam")
    backend.update_model(model, sgd_grad("torch"))
    before = backend.weights_fingerprint(model)
    saved = copy.deepcopy(model.current_optimizer.state_dict())  # as torch.load of a saved state gives
    model.current_optimizer.state.clear()
    cleared = backend.weights_fingerprint(model)
    assert cleared != before
    model.current_optimizer.load_state_dict(saved)
    assert backend.weights_fingerprint(model) not in (before, cleared)
