"""enable_deterministic seeds every generator reproducibly."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from fe_ray.backend.determinism import enable_deterministic  # noqa: E402


def draw() -> tuple[float, float, float, float]:
    import tensorflow as tf
    import torch

    return random.random(), float(np.random.rand()), float(torch.rand(1)), float(tf.random.uniform(()))


def test_same_seed_same_numbers() -> None:
    import torch

    enable_deterministic(7)
    first = draw()
    enable_deterministic(7)
    assert draw() == first
    assert torch.are_deterministic_algorithms_enabled()


def test_seed_must_be_int() -> None:
    with pytest.raises(TypeError, match="int seed"):
        enable_deterministic("7")  # type: ignore[arg-type]


# Seeds, draws from every generator (a Keras layer's initial weights included) and prints them as JSON; the argument
# says whether the frameworks are imported before enable_deterministic or only after it.
_DRAW_SCRIPT = """
import json, random, sys
import numpy as np
import fe_ray as fe
if sys.argv[1] == "before":
    import keras, tensorflow, torch
fe.enable_deterministic(3)
imported = sorted(name for name in ("keras", "tensorflow", "torch") if name in sys.modules)
first = [random.random(), float(np.random.rand())]
import torch
import tensorflow as tf
import keras
layer = keras.layers.Dense(2)
layer.build((None, 2))
print(json.dumps({"imported": imported, "deterministic": torch.are_deterministic_algorithms_enabled(),
                  "draws": first + [float(torch.rand(1)), float(tf.random.uniform(())), random.random(),
                                    float(np.random.rand())] + layer.kernel.numpy().ravel().tolist()}))
"""


def _draws(order: str) -> dict:
    import json
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", _DRAW_SCRIPT, order], capture_output=True, text=True, env=env,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_frameworks_are_seeded_when_imported_later_not_imported_to_seed() -> None:
    later = _draws("after")
    assert later["imported"] == [], "enable_deterministic imported a framework the program had not"
    assert later["deterministic"]
    earlier = _draws("before")
    assert earlier["imported"] == ["keras", "tensorflow", "torch"]
    # The same numbers either way: a framework seeded on import draws as one seeded at once, and its import
    # (TensorFlow's draws from Python's generator) leaves Python's and numpy's streams where they were.
    assert later["draws"] == earlier["draws"]


def test_keras_seed_generators_are_seeded_saved_and_restored_as_random_state() -> None:
    import keras

    import fe_ray as fe
    from fe_ray.backend.determinism import get_rng_state, seed_generators, set_rng_state

    model = fe.build(lambda: keras.Sequential([keras.Input((64,)), keras.layers.Dropout(0.5)]), "adam",
                     model_name="dropout")
    x = np.ones((1, 64), np.float32)

    def mask() -> np.ndarray:
        return np.asarray(model(x, training=True)) > 0

    state = get_rng_state([model])
    assert list(state["keras_seeds"]) == ["dropout"]
    first = mask()
    assert not np.array_equal(mask(), first), "each call draws a new mask"
    set_rng_state(state, [model])
    assert np.array_equal(mask(), first), "restoring the random state repeats the mask"
    seed_generators(5, [model])
    seeded = mask()
    seed_generators(5, [model])
    assert np.array_equal(mask(), seeded)
    seed_generators(6, [model])
    assert not np.array_equal(mask(), seeded)


def test_torch_models_add_no_keras_state() -> None:
    import torch

    from fe_ray.backend.determinism import get_rng_state

    assert "keras_seeds" not in get_rng_state([torch.nn.Linear(2, 2)])


def test_tensorflow_global_generator_is_seeded_saved_and_restored_in_place() -> None:
    """TensorFlow's global tf.random.Generator (which tf.random.set_seed leaves alone) is seeded for processes that
    run Keras models, travels with the random state, and is restored into the same object (tf.functions that
    captured it draw the restored stream); a process that made none gets none."""
    import keras
    import tensorflow as tf
    from tensorflow.python.ops import stateful_random_ops

    import fe_ray as fe
    from fe_ray.backend.determinism import get_rng_state, seed_generators, set_rng_state

    model = fe.build(lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), "adam", model_name="m")
    previous = stateful_random_ops.global_generator
    try:
        stateful_random_ops.global_generator = None
        assert "tf_global_generator" not in get_rng_state([model])
        seed_generators(5)  # no Keras model here: making one would initialise TensorFlow's devices for nothing
        assert stateful_random_ops.global_generator is None
        seed_generators(5, [model])
        generator = stateful_random_ops.global_generator
        assert generator is not None

        @tf.function
        def draw() -> Any:
            return tf.random.get_global_generator().normal([4])

        seeded = draw().numpy()
        seed_generators(5, [model])
        assert stateful_random_ops.global_generator is generator
        np.testing.assert_array_equal(draw().numpy(), seeded)
        enable_deterministic(5)  # resets an existing global generator too (it never makes one)
        np.testing.assert_array_equal(draw().numpy(), seeded)

        state = get_rng_state([model])
        following = draw().numpy()
        assert not np.array_equal(following, seeded)
        set_rng_state(state, [model])
        assert stateful_random_ops.global_generator is generator
        np.testing.assert_array_equal(draw().numpy(), following)

        stateful_random_ops.global_generator = None  # a fresh process restoring the checkpoint
        set_rng_state(state, [model])
        np.testing.assert_array_equal(tf.random.get_global_generator().normal([4]).numpy(), following)
    finally:
        stateful_random_ops.global_generator = previous


def test_tf_noise_helpers_draw_from_the_saved_global_generator() -> None:
    """fe_ray's TF random_normal_like / random_uniform_like draw from the global tf.random.Generator, whose state
    the random state (and so a checkpoint) holds: restoring it repeats the noise, inside a tf.function too.
    tf.random.normal's hidden op state could not be saved, so a resumed run drew other noise."""
    import keras
    import tensorflow as tf

    import fe_ray as fe
    from fe_ray.backend import random_normal_like, random_uniform_like
    from fe_ray.backend.determinism import get_rng_state, seed_generators, set_rng_state

    model = fe.build(lambda: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), "adam", model_name="m")
    seed_generators(3, [model])

    @tf.function
    def noise(x: Any) -> Any:
        return random_normal_like(x, std=2.0) + random_uniform_like(x, minval=-1.0, maxval=1.0)

    x = tf.zeros((3, 2))
    noise(x)
    state = get_rng_state([model])
    expected = [noise(x).numpy(), random_normal_like(x, dtype="float64").numpy()]
    tf.random.normal(())  # the op-level stream is not what the helpers draw from
    set_rng_state(state, [model])
    got = [noise(x).numpy(), random_normal_like(x, dtype="float64").numpy()]
    for mine, theirs in zip(got, expected):
        np.testing.assert_array_equal(mine, theirs)
    assert got[1].dtype == np.float64 and not np.array_equal(got[0], noise(x).numpy())


def test_tf_noise_helpers_make_a_seeded_generator_under_enable_deterministic() -> None:
    """With none made yet, TensorFlow's deterministic mode refuses to make a global generator
    (tf.random.get_global_generator raises): the helpers make one from enable_deterministic's seed, outside the
    tf.function being traced, so a seeded program draws the same noise every run."""
    import tensorflow as tf
    from tensorflow.python.ops import stateful_random_ops

    from fe_ray.backend import random_uniform_like

    previous = stateful_random_ops.global_generator
    try:
        draws = []
        for _ in range(2):
            enable_deterministic(11)
            stateful_random_ops.global_generator = None
            draws.append(tf.function(lambda x: random_uniform_like(x))(tf.zeros((4,))).numpy())
        np.testing.assert_array_equal(draws[0], draws[1])
        expected = tf.random.Generator.from_seed(11).uniform((4,)).numpy()
        np.testing.assert_array_equal(draws[0], expected)
    finally:
        stateful_random_ops.global_generator = previous
