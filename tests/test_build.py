"""fe.build details that need a process of their own or both frameworks: Keras imported by model_fn itself, and an
optimizer_fn written for the other framework."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

import fe_ray as fe


def test_mixed_precision_applies_when_model_fn_imports_keras_itself() -> None:
    """A script whose model_fn is the first to import Keras still gets float16 layers (the policy could not be set
    before model_fn ran); Keras stays unimported for builds that do not need it. Seeded, that build's weights are
    those of any later build with the same seed: the second run of model_fn starts from the random state the first
    one started from (Keras draws its initializers' seeds from Python's generator)."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import fe_ray as fe

        def model_fn():
            import keras
            return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(2)])

        assert "keras" not in sys.modules
        fe.enable_deterministic(13)
        model = fe.build(model_fn, optimizer_fn="adam", mixed_precision=True)
        import keras
        print(model.layers[-1].compute_dtype, keras.mixed_precision.global_policy().name)
        fe.enable_deterministic(13)
        again = fe.build(model_fn, optimizer_fn="adam", mixed_precision=True)
        print(all(np.array_equal(a, b) for a, b in zip(model.get_weights(), again.get_weights())))
    """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=240,
                         check=True)
    # float32 compute before; the global policy put back; the same weights
    assert out.stdout.split()[-3:] == ["float16", "float32", "True"]


def test_a_torch_build_with_keras_imported_needs_no_tensorflow() -> None:
    """Keras may be imported in a torch program (Keras 3 on its torch backend, another library): fe.build of a torch
    model sets Keras' dtype policy around model_fn without fe_ray's TF backend, which needs TensorFlow (it raised
    ImportError here, and imported TensorFlow on every torch build where TensorFlow is installed)."""
    script = textwrap.dedent("""
        import os, sys
        os.environ["KERAS_BACKEND"] = "torch"
        sys.modules["tensorflow"] = None  # as if TensorFlow were not installed
        import keras, torch
        import fe_ray as fe

        for flag in (False, True):
            model = fe.build(lambda: torch.nn.Linear(2, 2), optimizer_fn="adam", mixed_precision=flag)
            print(type(model).__name__, keras.mixed_precision.global_policy().name)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["Linear", "float32", "Linear", "float32"]  # the policy put back after each


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_an_empty_optimizer_list_builds_models_without_optimizers(framework: str) -> None:
    from tests.test_network import linear_model_fn

    model = fe.build(linear_model_fn(framework), optimizer_fn=[])  # FastEstimator: to_list, then [None] * models
    assert model.optimizer is None and model.current_optimizer is None


@pytest.mark.parametrize("framework, optimizer_fn, match", [
    ("tf", lambda params: None, r"A TF optimizer_fn is called with no arguments .* same framework"),
    ("torch", lambda: None, r"A torch optimizer_fn is called with the model's parameters .* same framework"),
])
def test_an_optimizer_fn_for_the_other_framework_is_named(framework: str, optimizer_fn: object, match: str) -> None:
    from tests.test_network import linear_model_fn

    with pytest.raises(TypeError, match=match):
        fe.build(linear_model_fn(framework), optimizer_fn=optimizer_fn)


@pytest.mark.parametrize("framework, instead", [
    ("tf", "a zero-argument callable such as `lambda: tf.optimizers.SGD(0.1)`"),
    ("torch", "a callable such as `lambda params: torch.optim.SGD(params, lr=0.1)`"),
])
def test_an_unknown_optimizer_name_lists_the_valid_ones(framework: str, instead: str) -> None:
    from tests.test_network import linear_model_fn

    valid = "['adadelta', 'adagrad', 'adam', 'adamax', 'rmsprop', 'sgd']"
    with pytest.raises(ValueError, match=re.escape(f"Unknown optimizer 'AdamW'; valid names are {valid}, or pass "
                                                   f"{instead}.")):
        fe.build(linear_model_fn(framework), optimizer_fn="AdamW")
    assert type(fe.build(linear_model_fn(framework), optimizer_fn="SGD").optimizer).__name__ == "SGD"  # any case


@pytest.mark.parametrize("input_shape", [(17, 28, 1), (28, 10, 3)])
def test_tf_lenet_names_inputs_too_small_for_it(input_shape: tuple[int, int, int]) -> None:
    from fe_ray.architecture.tensorflow import LeNet

    with pytest.raises(ValueError, match=r"at least 18x18 pixels, got input_shape " + re.escape(repr(input_shape))):
        fe.build(lambda: LeNet(input_shape), optimizer_fn="adam")


def test_a_torch_model_instance_as_model_fn_is_named() -> None:
    """An nn.Module is callable, so without the check build would run its forward pass with no input."""
    import torch

    with pytest.raises(TypeError, match=r"model_fn must be a function that creates the model\(s\), got a Linear "
                                        r"instance"):
        fe.build(torch.nn.Linear(2, 2), optimizer_fn="adam")


def test_a_repeat_scheduler_of_optimizers_alternates_them_by_epoch() -> None:
    import torch

    from fe_ray.schedule import RepeatScheduler
    from tests.estimator_helpers import classifier_network

    model = fe.build(lambda: torch.nn.Linear(2, 1), optimizer_fn=RepeatScheduler(["sgd", "adam"]))
    assert isinstance(model.optimizer, RepeatScheduler)
    first, second = model.optimizer.repeat_list
    assert (type(first).__name__, type(second).__name__) == ("SGD", "Adam")
    assert model.current_optimizer is first  # epoch 1's
    network = classifier_network(model)
    for epoch, expected in ((1, first), (2, second), (3, first)):
        with network(mode="train", epoch=epoch):
            assert model.current_optimizer is expected


def test_build_names_what_it_cannot_take() -> None:
    import torch

    from fe_ray.schedule import Scheduler

    two = lambda: [torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)]  # noqa: E731
    with pytest.raises(TypeError, match="model_fn must be a zero-argument callable returning model"):
        fe.build("LeNet", optimizer_fn="adam")
    with pytest.raises(TypeError, match="model_fn must return torch nn.Module or Keras Model objects, got dict"):
        fe.build(lambda: {"net": torch.nn.Linear(2, 1)}, optimizer_fn="adam")
    with pytest.raises(ValueError, match=r"inconsistent counts \{'models': 2, 'optimizers': 2, 'model names': 1, "
                                         r"'weights paths': 2\}"):
        fe.build(two, optimizer_fn=["adam", "sgd"], model_name="only_one")
    with pytest.raises(ValueError, match=r"Model names must be unique case-insensitively, got \['gen', 'GEN'\]"):
        fe.build(two, optimizer_fn=["adam", "sgd"], model_name=["gen", "GEN"])

    class EveryOther(Scheduler):
        def get_current_value(self, epoch):
            return "adam"

        def get_all_values(self):
            return ["adam"]

    with pytest.raises(TypeError, match="Unsupported optimizer scheduler EveryOther; use EpochScheduler or "):
        fe.build(lambda: torch.nn.Linear(2, 1), optimizer_fn=EveryOther())
