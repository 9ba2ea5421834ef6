"""Persistence for Keras models: weight files, checkpoints, and in-memory snapshots of weights + optimizer.

Optimizer state is stored as a numpy ``.npz`` archive (loaded with ``allow_pickle=False``) of the optimizer's
variables in order, so loading a checkpoint never unpickles arbitrary objects.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import keras
import numpy as np

from fe_ray.backend.optimizers import (
    SCHEDULED_KEY,
    model_optimizers,
    restore_scheduled,
    scheduled_optimizers,
    scheduled_states,
)

WEIGHTS_SUFFIX = ".weights.h5"
OPTIMIZER_SUFFIX = "_opt.npz"
ARCHITECTURE_SUFFIX = ".keras"


#: Optimizer attribute holding the learning rate last written or read through the TF backend (``known_lr``).
KNOWN_LR_ATTR = "_fe_ray_known_lr"

#: A snapshot's entry holding the current optimizer's weight decay, which ``backend.set_lr`` scales with the learning
#: rate (as FastEstimator does for AdamW / SGDW) and which is not among the optimizer's Keras variables.
WEIGHT_DECAY_KEY = "optimizer_weight_decay"

#: With a Scheduler of optimizers, the entry holding every scheduled optimizer's weight decay (None for one without),
#: in the schedule's order, next to :data:`fe_ray.backend.optimizers.SCHEDULED_KEY`.
SCHEDULED_DECAY_KEY = "scheduled_weight_decays"


#: A snapshot's entry naming the weights (positions in ``model.weights``) the optimizer was built for, when they are
#: not the model's trainable weights: a layer frozen after the optimizer was built keeps its slots in the optimizer,
#: so an optimizer restored elsewhere must be built for the same weights to take the saved variables.
BUILT_FOR_KEY = "optimizer_built_for"

#: A snapshot's entry holding Keras' build config of the model (its input shapes), so that a copy never run (the
#: driver's, while replicas train a Sequential without an Input or a subclassed model) can create its weights.
BUILD_CONFIG_KEY = "build_config"


def build_optimizer(model: Any, optimizer: Any = None, built_for: Sequence[int] | None = None) -> None:
    """Create the variables (slots, iteration count) of ``optimizer`` (default: the current one) if it has none yet.

    Needed before reading/restoring optimizer state and before a traced update; a no-op for unbuilt models
    (no trainable variables yet), whose optimizer builds on first use. Building early changes nothing: a fresh
    optimizer's variables hold what its first use would create. ``built_for``: build it for these weights (positions
    in ``model.weights``, a snapshot's :data:`BUILT_FOR_KEY`) instead of the trainable ones.
    """
    optimizer = getattr(model, "current_optimizer", None) if optimizer is None else optimizer
    if optimizer is None or optimizer.built:
        return
    if built_for is not None:
        weights = model.weights
        optimizer.build([weights[index] for index in built_for])
    elif model.trainable_variables:
        optimizer.build(model.trainable_variables)


def _built_for(model: Any, optimizer: Any) -> list[int] | None:
    """The positions in ``model.weights`` of the weights ``optimizer`` was built for, when they are not the model's
    trainable weights (None otherwise, or when Keras does not say)."""
    built = getattr(optimizer, "_trainable_variables", None)
    if not built or [id(v) for v in built] == [id(v) for v in model.trainable_variables]:
        return None
    position = {id(weight): index for index, weight in enumerate(model.weights)}
    return [position[id(v)] for v in built] if all(id(v) in position for v in built) else None


#: FastEstimator 1.7's names for TF files: weights (Keras 2 ``save_weights``) and pickled optimizer state.
FE_WEIGHTS_SUFFIX = ".h5"
FE_OPTIMIZER_SUFFIX = "_opt.pkl"


def load_weights(model: keras.Model, path: str) -> None:
    """Load a Keras weights file into ``model`` (weights only; see :func:`save_model`).

    Reads fe_ray's ``*.weights.h5`` and, through Keras' legacy reader, the ``*.h5`` files FastEstimator 1.7 wrote
    with Keras 2's ``save_weights``.

    Raises:
        FileNotFoundError: If ``path`` does not exist, naming the ``.weights.h5`` file fe_ray wrote in its place
            when there is one (FastEstimator names the same weights ``<name>.h5``).
        ValueError: If ``path`` is an http(s) URL (FastEstimator downloads Google Drive links; fe_ray does not).
    """
    path = os.fspath(path)  # a pathlib.Path too, as the torch backend and Keras take
    if path.startswith(("http://", "https://")):
        raise ValueError(f"weights_path {path!r} is a URL; fe_ray loads weights from files only (FastEstimator's "
                         "Google Drive download is not supported). Download the file and pass its local path.")
    if "://" not in path and not os.path.exists(path):  # other remote paths (gs://...) are Keras' to resolve
        raise FileNotFoundError(_missing_weights_message(path))
    with _optimizer_hidden(model):
        model.load_weights(path)


def _missing_weights_message(path: str) -> str:
    message = f"Weights file {path!r} does not exist."
    if path.endswith(FE_WEIGHTS_SUFFIX) and not path.endswith(WEIGHTS_SUFFIX):
        # A FastEstimator-style name ('<name>.h5', as FE 1.7's save_model and ModelSaver write them): Keras 3 can
        # only write weights as '<name>.weights.h5', which is what fe_ray saved.
        sibling = path[:-len(FE_WEIGHTS_SUFFIX)] + WEIGHTS_SUFFIX
        if os.path.exists(sibling):
            return (f"{message} fe_ray (Keras 3) saves TF weights as '<name>{WEIGHTS_SUFFIX}' where FastEstimator "
                    f"used '<name>{FE_WEIGHTS_SUFFIX}': pass weights_path={sibling!r}.")
    return f"{message} Pass the path fe_ray.backend.save_model returned (or ModelSaver logged)."


@contextmanager
def _optimizer_hidden(model: keras.Model) -> Iterator[None]:
    """Temporarily detach optimizers held as model attributes (``optimizer``/``current_optimizer``, set by build).

    Keras saves and loads every optimizer it finds on the model along with the weights; fe_ray keeps optimizer
    state in its own file so that ``load_optimizer=False`` really leaves the optimizer untouched, and so an unbuilt
    optimizer does not make Keras refuse the saved variables.
    """
    hidden = {key: value for key, value in vars(model).items() if isinstance(value, keras.optimizers.Optimizer)}
    for key in hidden:
        setattr(model, key, None)
    try:
        yield
    finally:
        for key, value in hidden.items():
            setattr(model, key, value)


def save_model(model: keras.Model, save_dir: str, model_name: str | None = None, save_optimizer: bool = False,
               save_architecture: bool = False) -> str:
    """Write ``<name>.weights.h5``, optionally ``<name>_opt.npz`` (optimizer variables) and ``<name>.keras``.

    Args:
        model: The model (built by :func:`fe_ray.build`).
        save_dir: The directory to write into (created if missing).
        model_name: The files' base name; the model's ``model_name`` by default.
        save_optimizer: Also write the current optimizer's variables.
        save_architecture: Also write the whole model (architecture and weights) as a Keras 3 ``.keras`` archive
            for ``keras.models.load_model`` (FastEstimator's option; Keras 3 saves whole models in this format
            rather than as a SavedModel directory). Built-in layers reload without the code that built the model;
            a subclassed model or custom layer needs its class registered
            (``keras.saving.register_keras_serializable``). A model Keras cannot describe as a config (a subclassed
            model without ``get_config``) is exported instead as an inference SavedModel folder ``<name>``
            (``tf.saved_model.load``), as FastEstimator wrote it, with a note saying so.

    Returns:
        The path of the weights file.

    Raises:
        ValueError: If ``save_optimizer`` is set but the model has no optimizer.
    """
    name = model_name or model.model_name
    if save_optimizer and getattr(model, "current_optimizer", None) is None:
        raise ValueError(f"Cannot save the optimizer of model {name!r}: it has none. Pass save_optimizer=False, or "
                         "build the model with an optimizer_fn.")
    os.makedirs(save_dir, exist_ok=True)
    path = os.path.join(save_dir, f"{name}{WEIGHTS_SUFFIX}")
    with _optimizer_hidden(model):
        model.save_weights(path)
        if save_architecture:
            # Optimizer state stays in its own file (save_optimizer), as for the weights.
            save_architecture_file(model, save_dir, name)
    if save_optimizer:
        build_optimizer(model)
        arrays = _optimizer_arrays(model.current_optimizer)
        np.savez(_optimizer_path(path), **{f"v{i}": value for i, value in enumerate(arrays)})
    return path


def save_architecture_file(model: keras.Model, save_dir: str, name: str) -> str:
    """Write the whole model as ``<save_dir>/<name>.keras``, or, where Keras cannot describe it as a config, export
    it as the SavedModel folder ``<save_dir>/<name>``; return the path written.

    Each is written beside its final name first and then moved there, so a failed save leaves no broken file and an
    earlier one of the same name stays whole until the new one is complete.
    """
    staging = tempfile.mkdtemp(prefix=f".{name}-", dir=save_dir)
    try:
        try:
            staged, final = os.path.join(staging, f"{name}{ARCHITECTURE_SUFFIX}"), \
                os.path.join(save_dir, f"{name}{ARCHITECTURE_SUFFIX}")
            model.save(staged)
        except NotImplementedError as error:  # a subclassed model whose constructor arguments Keras cannot save
            staged, final = os.path.join(staging, name), os.path.join(save_dir, name)
            if os.path.isdir(final) and not os.path.isfile(os.path.join(final, "saved_model.pb")):
                raise FileExistsError(f"Cannot export model {name!r} to {final!r}: a folder of that name exists and "
                                      "is no SavedModel, so fe_ray leaves it alone. Move it, or save into another "
                                      "save_dir.") from error
            model.export(staged, verbose=False)
            reason = " ".join(str(error).split())[:120]
            print(f"FastEstimator-Warn: model {name!r} cannot be saved as a .keras archive ({reason}...); "
                  f"exported it as the inference SavedModel {final!r} instead (tf.saved_model.load). Give its class "
                  "a get_config() to get a .keras archive.", flush=True)
        if os.path.isdir(final):
            shutil.rmtree(final)  # an earlier export of the same name (checked above to be a SavedModel)
        os.replace(staged, final)
        return final
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def architecture_paths(save_dir: str, name: str) -> list[str]:
    """The paths :func:`save_architecture_file` may have written for ``name`` (either of them may be missing)."""
    return [os.path.join(save_dir, f"{name}{ARCHITECTURE_SUFFIX}"), os.path.join(save_dir, name)]


def load_model(model: keras.Model, weights_path: str, load_optimizer: bool = False) -> None:
    """Load weights written by :func:`save_model`, and the optimizer state next to them when asked.

    Raises:
        FileNotFoundError: If ``load_optimizer`` is set but ``<name>_opt.npz`` does not exist.
        ValueError: If the model has no optimizer, or the saved optimizer has a different number of variables.
    """
    weights_path = os.fspath(weights_path)
    load_weights(model, weights_path)
    if not load_optimizer:
        return
    if getattr(model, "current_optimizer", None) is None:
        raise ValueError(f"Cannot load optimizer state into model {model.model_name!r}: it has no optimizer.")
    opt_path = _optimizer_path(weights_path)
    if not os.path.exists(opt_path):
        fe_path = os.path.splitext(weights_path)[0] + FE_OPTIMIZER_SUFFIX
        if os.path.exists(fe_path):
            # FastEstimator 1.7 pickled a Keras 2 optimizer's variables, whose layout Keras 3 optimizers do not
            # share; and loading must not unpickle (see the module docstring).
            raise FileNotFoundError(f"Optimizer state {opt_path!r} not found; {fe_path!r} is FastEstimator's pickled "
                                    "Keras 2 optimizer state, which fe_ray cannot load. Load the weights with "
                                    "load_optimizer=False (the optimizer starts fresh).")
        raise FileNotFoundError(f"Optimizer state {opt_path!r} not found; save it with save_optimizer=True or load "
                                "with load_optimizer=False.")
    with np.load(opt_path, allow_pickle=False) as archive:
        arrays = [archive[f"v{i}"] for i in range(len(archive.files))]
    _assign_optimizer(model, arrays)


def _optimizer_path(weights_path: str) -> str:
    stem = weights_path[:-len(WEIGHTS_SUFFIX)] if weights_path.endswith(WEIGHTS_SUFFIX) else weights_path
    return f"{stem}{OPTIMIZER_SUFFIX}"


def _optimizer_arrays(optimizer: Any) -> list[np.ndarray]:
    return [np.array(keras.ops.convert_to_numpy(v)) for v in optimizer.variables]


def _assign_optimizer(model: Any, arrays: list[np.ndarray], optimizer: Any = None,
                      built_for: Sequence[int] | None = None) -> None:
    """Assign saved variables to ``optimizer`` (default: the model's current one), building it first (for the
    weights ``built_for`` names, when given: see :data:`BUILT_FOR_KEY`)."""
    optimizer = model.current_optimizer if optimizer is None else optimizer
    build_optimizer(model, optimizer, built_for)
    variables = optimizer.variables
    if len(variables) != len(arrays):
        raise ValueError(f"Saved optimizer state has {len(arrays)} variables but the optimizer of model "
                         f"{model.model_name!r} has {len(variables)}; it was saved from a different optimizer or "
                         "model configuration.")
    for variable, value in zip(variables, arrays):
        variable.assign(value)
    # The learning rate is one of these variables: forget the value backend.tf.known_lr remembers for it.
    optimizer.__dict__.pop(KNOWN_LR_ATTR, None)


def get_state(model: keras.Model, copy: bool = True, deferred: bool = False,
              weights_only: bool = False) -> dict[str, Any]:
    """An in-memory, picklable (numpy-only) snapshot of all weights and the current optimizer's variables (with a
    Scheduler of optimizers, every scheduled optimizer's: :mod:`fe_ray.backend.optimizers`). ``weights_only``: the
    optimizer's entry is None, so :func:`set_state` of the snapshot keeps the optimizer's variables as they are.

    ``copy`` and ``deferred`` are accepted for interface parity with torch; reading a TF variable always yields a
    new host array.
    """
    optimizer = None if weights_only else getattr(model, "current_optimizer", None)

    def optimizer_state(each: Any) -> list[np.ndarray]:
        build_optimizer(model, each)
        return _optimizer_arrays(each)

    state = {"model": [np.array(keras.ops.convert_to_numpy(v)) for v in model.weights],
             "optimizer": optimizer_state(optimizer) if optimizer is not None else None}
    built_for = _built_for(model, optimizer) if optimizer is not None else None
    if built_for is not None:
        state[BUILT_FOR_KEY] = built_for
    build_config = model.get_build_config() if model.built else None
    if build_config:
        state[BUILD_CONFIG_KEY] = build_config
    decay = tf_optim().get_weight_decay(optimizer)
    if decay is not None:  # not one of the optimizer's variables (see tf_optim.live_weight_decay)
        state[WEIGHT_DECAY_KEY] = decay
    scheduled = None if weights_only else scheduled_states(model, optimizer, optimizer_state)
    if scheduled is not None:
        state[SCHEDULED_KEY] = scheduled
        decays = [tf_optim().get_weight_decay(each) for each in scheduled_optimizers(model)]
        if any(decay is not None for decay in decays):
            state[SCHEDULED_DECAY_KEY] = decays
    return state


def get_buffers(model: keras.Model) -> list[np.ndarray]:
    """Copies of the model's non-trainable weights (BatchNorm moving statistics and the like)."""
    return [np.array(keras.ops.convert_to_numpy(v)) for v in model.non_trainable_weights]


def set_buffers(model: keras.Model, buffers: Sequence[Any]) -> None:
    """Assign :func:`get_buffers`' arrays to the model's non-trainable weights.

    Raises:
        ValueError: If their number differs from the model's.
    """
    own = model.non_trainable_weights
    if len(own) != len(buffers):
        raise ValueError(f"{len(buffers)} buffers do not match model {getattr(model, 'model_name', model.name)!r}'s "
                         f"{len(own)} non-trainable weights; they belong to a different architecture.")
    for variable, value in zip(own, buffers):
        variable.assign(value)


def weights_fingerprint(model: keras.Model) -> tuple[int, tuple[Any, ...]]:
    """A checksum of the values of the model's weights (trainable and not), with its optimizers' identities and step
    counters (another optimizer, or one whose ``iterations`` was reset or restored). TF counts no writes to a
    variable, so the weights' values are read; equal fingerprints mean no weight was written in between, but for a
    2**-32 chance. The optimizers' slot variables are left out: building an optimizer (as reading its state does)
    creates them without any write."""
    checksum = 0
    for variable in model.weights:
        values = np.ascontiguousarray(variable.numpy())  # .numpy(): a 0-d bfloat16 weight too (see tf.to_numpy)
        checksum = zlib.crc32(values.reshape(-1).view(np.uint8), checksum)
    optimizers = model_optimizers(model)
    states = tuple((id(optimizer), int(optimizer.iterations.numpy())) for optimizer in optimizers)
    return checksum, states


def weight_layout(model: keras.Model) -> list[list[int]]:
    """The shapes of the model's weights, in order (JSON-ready; no names: Keras numbers its layers' names per
    process, so a resumed process may name the same layers differently): equal layouts mean a snapshot of one model
    loads into the other."""
    return [[int(dim) for dim in variable.shape] for variable in model.weights]


def state_is_view(model: keras.Model) -> bool:
    """Never: reading a TF variable yields a new array (see :func:`get_state`)."""
    return False


def set_state(model: keras.Model, state: dict[str, Any], copy: bool = True) -> None:
    """Restore a :func:`get_state` snapshot exactly (weights, and optimizer variables if both sides have them: each
    scheduled optimizer's into its own, whichever is current).

    ``copy`` is accepted for the backend interface; TF variables always copy what they are assigned.

    Raises:
        ValueError: If the snapshot's variable counts do not match the model / optimizer.
    """
    weights = model.weights
    if not weights and state["model"] and state.get(BUILD_CONFIG_KEY):
        # A copy never run has no weights yet: create them from the input shapes the snapshot's model was built for.
        model.build_from_config(state[BUILD_CONFIG_KEY])
        weights = model.weights
    if len(weights) != len(state["model"]):
        raise ValueError(f"Snapshot has {len(state['model'])} weights but model {model.model_name!r} has "
                         f"{len(weights)}; it belongs to a different architecture.")
    for variable, value in zip(weights, state["model"]):
        variable.assign(value)
    built_for = state.get(BUILT_FOR_KEY)
    if restore_scheduled(model, state, lambda optimizer, arrays: _assign_optimizer(model, arrays, optimizer,
                                                                                   built_for)):
        decays = state.get(SCHEDULED_DECAY_KEY) or []
        for optimizer, decay in zip(scheduled_optimizers(model), decays):
            _restore_weight_decay(optimizer, decay)
        return
    if getattr(model, "current_optimizer", None) is not None and state.get("optimizer") is not None:
        _assign_optimizer(model, state["optimizer"], built_for=built_for)
    _restore_weight_decay(getattr(model, "current_optimizer", None), state.get(WEIGHT_DECAY_KEY))


def _restore_weight_decay(optimizer: Any, decay: float | None) -> None:
    """Give ``optimizer`` a snapshot's weight decay, if both have one."""
    optimizers = tf_optim()
    if decay is not None and optimizers.get_weight_decay(optimizer) is not None:
        optimizers.set_weight_decay(optimizer, decay)


def tf_optim() -> Any:
    """:mod:`fe_ray.backend.tf_optim`, imported on use (it imports this module)."""
    from fe_ray.backend import tf_optim as module

    return module


# ------------------------------------------------------------------------------------------------ random state
def seed_generator_states(model: keras.Model) -> list[np.ndarray]:
    """The states of the model's Keras seed generators (e.g. each Dropout layer's), in a fixed order.

    They are random-number state rather than weights: ``model.weights`` leaves them out, and a pickled model gets
    new ones drawn from the unpickling process's Python generator. :mod:`fe_ray.backend.determinism` keeps them with
    the generators' states (checkpoints, replica seeding).
    """
    return [np.array(keras.ops.convert_to_numpy(v)) for v in _seed_variables(model)]


def set_seed_generator_states(model: keras.Model, states: Sequence[np.ndarray]) -> None:
    """Restore :func:`seed_generator_states` (a list for a different architecture is ignored, as fresh seeds)."""
    variables = _seed_variables(model)
    if len(variables) == len(states):
        for variable, value in zip(variables, states):
            variable.assign(np.asarray(value, dtype=variable.dtype))


def reseed_generators(model: keras.Model, seed: int) -> None:
    """Give the model's seed generators fresh states derived from ``seed`` (and the model's name)."""
    variables = _seed_variables(model)
    name = str(getattr(model, "model_name", ""))
    draws = np.random.default_rng([seed % 2**63, zlib.crc32(name.encode())]).integers(1, 2**31, len(variables))
    for variable, draw in zip(variables, draws):
        variable.assign(np.array([draw, 0], dtype=variable.dtype))


def _seed_variables(model: keras.Model) -> list[Any]:
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights and v.name == "seed_generator_state"]
