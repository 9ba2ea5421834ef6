"""Seeding every random number generator fe_ray may use, without importing a framework the program does not."""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from fe_ray.backend.import_hooks import when_imported

_last_seed: int | None = None


def enable_deterministic(seed: int) -> None:
    """Seed Python, numpy, and (when installed) torch and TensorFlow, and ask them for deterministic kernels.

    Python's and numpy's generators are seeded now. A framework that is already imported is seeded now too; one
    that is installed but not imported yet is seeded the moment the program imports it (before any of its code
    can draw from it), so a torch program never loads TensorFlow only to seed it, nor a TensorFlow one torch. Such
    an import leaves Python's and numpy's generators where they were (TensorFlow's draws from Python's), so the
    numbers drawn are the same whether the program imports its framework before this call or after it. Calling
    again before that import replaces the waiting seed.

    Args:
        seed: The seed for every generator.

    Raises:
        TypeError: If ``seed`` is not an int.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"enable_deterministic needs an int seed, got {seed!r} ({type(seed).__name__}).")
    global _last_seed
    _last_seed = seed
    os.environ["PYTHONHASHSEED"] = str(seed)  # only affects subprocesses (e.g. Ray workers) started from now on
    random.seed(seed)
    np.random.seed(seed)
    for name, seed_it in (("torch", _seed_torch), ("tensorflow", _seed_tensorflow)):
        _when_installed(name, "fe_ray.enable_deterministic", functools.partial(seed_it, seed))
    keras = sys.modules.get("keras")
    if keras is not None:
        # Keras makes its global seed generator from Python's generator when first needed; one made before this
        # call is dropped. (A Keras imported later starts without one, so it needs no seeding of its own.)
        keras.utils.set_random_seed(seed)


def use_deterministic_kernels() -> None:
    """Ask torch and TensorFlow (now, or when the program imports them) for deterministic kernels, without seeding.

    :func:`enable_deterministic`'s switches for a process seeded otherwise: replicas, which get a seed per rank.
    """
    for name, switch in (("torch", _torch_kernels), ("tensorflow", _tensorflow_kernels)):
        _when_installed(name, "fe_ray.use_deterministic_kernels", switch)


def _when_installed(name: str, key: str, callback: Callable[[ModuleType], None]) -> None:
    """``callback(module)`` now if ``name`` is imported, when it is imported if installed (without that import
    moving Python's and numpy's generators), never if it is absent."""
    if name in sys.modules or importlib.util.find_spec(name) is not None:
        when_imported(name, key, callback, keep_global_random=True)


def deterministic_kernels(framework: str) -> bool | None:
    """Whether ``framework`` ("torch" or "tf") runs deterministic kernels in this process (None: not imported)."""
    if framework == "torch" and "torch" in sys.modules:
        return bool(sys.modules["torch"].are_deterministic_algorithms_enabled())
    if framework == "tf" and "tensorflow" in sys.modules:
        from tensorflow.python.framework import config  # no public getter for the switch

        return bool(config.is_op_determinism_enabled())
    return None


def _seed_torch(seed: int, torch: ModuleType) -> None:
    torch.manual_seed(seed)
    _torch_kernels(torch)


def _torch_kernels(torch: ModuleType) -> None:
    # Deterministic cuBLAS needs this workspace setting; it is read when CUDA initialises, which is later.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    # warn_only: ops without a deterministic kernel warn instead of failing the whole run.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


def _seed_tensorflow(seed: int, tf: ModuleType) -> None:
    # Not through tf.keras: importing Keras imports TensorFlow, so this may run while Keras is half imported.
    # No global tf.random.Generator is made here (that would initialise TensorFlow's devices on import); without
    # one, TensorFlow's deterministic mode makes the program set its own.
    _seed_tensorflow_generators(tf, seed, create=False)
    _tensorflow_kernels(tf)


def _tensorflow_kernels(tf: ModuleType) -> None:
    tf.config.experimental.enable_op_determinism()


def last_seed() -> int | None:
    """The seed of the latest :func:`enable_deterministic` call in this process (None if never called)."""
    return _last_seed


def seed_generators(seed: int, models: Sequence[Any] = ()) -> None:
    """Seed Python's, numpy's and (if imported) torch's and TensorFlow's global generators, and the Keras seed
    generators of ``models`` (their Dropout layers' and the like), without the determinism switches."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    tf = sys.modules.get("tensorflow")
    keras_models = _keras_models(models)
    if tf is not None:
        # A global tf.random.Generator is made only for a process that runs Keras models: a tf.Variable initialises
        # TensorFlow's devices, which a torch process that merely imported TensorFlow must not pay for (or lose GPU
        # memory to).
        _seed_tensorflow_generators(tf, seed % 2**63, create=bool(keras_models))
    for model in keras_models:
        _tf_io().reseed_generators(model, seed)


def get_rng_state(models: Sequence[Any] = ()) -> dict[str, Any]:
    """The states of Python's, numpy's and (if imported) torch's global generators (CPU, and CUDA if in use), of
    TensorFlow's global ``tf.random.Generator`` (if the program made one), and of the Keras seed generators of
    ``models`` by model name (which ``model.weights`` and so checkpoints leave out)."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state()}
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = torch.get_rng_state().numpy().copy()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = [s.numpy().copy() for s in torch.cuda.get_rng_state_all()]
    generator = _existing_global_generator(sys.modules.get("tensorflow"))
    if generator is not None:
        state["tf_global_generator"] = {"state": generator.state.numpy().copy(), "algorithm": int(generator.algorithm)}
    keras_models = _keras_models(models)
    if keras_models:
        state["keras_seeds"] = {model.model_name: _tf_io().seed_generator_states(model) for model in keras_models}
    return state


def set_rng_state(state: Mapping[str, Any], models: Sequence[Any] = ()) -> None:
    """Restore a :func:`get_rng_state` snapshot (parts for absent frameworks, devices or models are skipped)."""
    if "python" in state:
        random.setstate(state["python"])
    if "numpy" in state:
        np.random.set_state(state["numpy"])
    torch = sys.modules.get("torch")
    if torch is not None and "torch" in state:
        torch.set_rng_state(torch.from_numpy(np.array(state["torch"], dtype=np.uint8)))  # writable copy
    if torch is not None and state.get("cuda") and torch.cuda.is_available():
        cuda = [torch.from_numpy(np.array(s, dtype=np.uint8)) for s in state["cuda"]]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
    tf = sys.modules.get("tensorflow")
    if tf is not None and state.get("tf_global_generator"):
        _restore_global_generator(tf, state["tf_global_generator"])
    seeds = state.get("keras_seeds") or {}
    for model in _keras_models(models):
        if model.model_name in seeds:
            _tf_io().set_seed_generator_states(model, seeds[model.model_name])


def _existing_global_generator(tf: ModuleType | None) -> Any:
    """TensorFlow's global ``tf.random.Generator``, or None while nothing made one (or TensorFlow is not imported).

    ``tf.random.get_global_generator()`` would make one (from a non-deterministic state, or raise under deterministic
    mode), hence the module attribute behind it.
    """
    if tf is None:
        return None
    from tensorflow.python.ops import stateful_random_ops  # TensorFlow is already imported

    return stateful_random_ops.global_generator


def tf_global_generator() -> Any:
    """TensorFlow's global ``tf.random.Generator``, made now if none exists: from the seed of
    :func:`enable_deterministic` when it was called (TensorFlow's deterministic mode refuses to make one from a
    non-deterministic state), otherwise as ``tf.random.get_global_generator()`` makes it. Safe inside a tf.function:
    the generator is made outside the graph being traced."""
    import tensorflow as tf  # callers are TF code paths: TensorFlow is imported already

    generator = _existing_global_generator(tf)
    if generator is not None:
        return generator
    if _last_seed is None:
        return tf.random.get_global_generator()
    with tf.init_scope():
        generator = tf.random.Generator.from_seed(_last_seed % 2**63)
    tf.random.set_global_generator(generator)
    return generator


def _seed_tensorflow_generators(tf: ModuleType, seed: int, create: bool) -> None:
    """``tf.random.set_seed``, and the global ``tf.random.Generator``, which it leaves alone: an existing one is
    reseeded, and one is made only if ``create``."""
    tf.random.set_seed(seed)
    generator = _existing_global_generator(tf)
    if generator is not None:
        generator.reset_from_seed(seed % 2**63)  # in place: tf.functions that captured it draw the new stream
    elif create:
        tf.random.set_global_generator(tf.random.Generator.from_seed(seed % 2**63))


def _restore_global_generator(tf: ModuleType, saved: Mapping[str, Any]) -> None:
    values = np.asarray(saved["state"], dtype=np.int64)
    algorithm = int(saved["algorithm"])
    generator = _existing_global_generator(tf)
    if generator is not None and int(generator.algorithm) == algorithm:  # the algorithm fixes the state's size
        generator.reset(values)  # in place, as above
    else:
        tf.random.set_global_generator(tf.random.Generator.from_state(values, alg=algorithm))


def _keras_models(models: Sequence[Any]) -> list[Any]:
    from fe_ray.backend import get_framework  # no framework is imported by it

    return [model for model in models if get_framework(model) == "tf"]


def _tf_io() -> ModuleType:
    from fe_ray.backend import tf_io  # only reached with a Keras model, so TensorFlow is already imported

    return tf_io
