"""Shipping the user's ops (with their models and optimizers) from the driver to the replicas.

Ops are pickled with cloudpickle, so lambdas and classes defined in ``__main__`` or a notebook travel by value.
Code travelling by value keeps its file name (Ray's cloudpickle; the standalone one replaces it by
``<dynamic-code>``), and the source lines of those files travel with it and are put into the replica's
``linecache``: TensorFlow's AutoGraph reads an op's source to convert Python control flow on tensors inside the
replica's ``tf.function`` step, and remote tracebacks show the user's lines, also on nodes without the file.
Models need care:

* torch ``nn.Module`` objects pickle completely (weights, the optimizer attached by :func:`fe_ray.build`, and
  fe_ray's attributes), so they go through cloudpickle unchanged.
* Keras 3 models pickle through Keras' own saving format, which drops the attributes :func:`fe_ray.build` sets
  (``model_name``, ``optimizer``, ``current_optimizer``, ...) and cannot pickle optimizers. Each Keras model is
  therefore replaced by a reference to a spec holding the Keras-pickled model, its class (by value, so subclassed
  models defined in ``__main__`` load under ``keras.saving.custom_object_scope``), fe_ray's attributes and its
  optimizer(s) as Keras configs. Weights and optimizer slots are synchronised exactly afterwards anyway, by
  pushing the driver's ``get_state`` snapshot to every replica.

:func:`check_picklable` runs before any actor starts and names the op and attribute that cannot be pickled, and
revives each Keras model once on the driver to check that its layers of the user's own classes come back alike.
"""

from __future__ import annotations

import io
import linecache
import pickle
import sys
import types
from collections.abc import Sequence
from typing import Any

from ray import cloudpickle

from fe_ray.op.op import Op
from fe_ray.util.fe_state import rebuild, uses_getstate

#: Attributes fe_ray.build / UpdateOp attach to models (besides any ``fe_*`` attribute), restored on Keras models.
_FE_MODEL_ATTRS = ("model_name", "mixed_precision", "loss_name")


def _is_keras_model(obj: Any) -> bool:
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(obj, keras.Model)


def _is_keras_optimizer(obj: Any) -> bool:
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(obj, keras.optimizers.Optimizer)


class _KerasAwarePickler(cloudpickle.Pickler):
    """A cloudpickle Pickler that replaces Keras models / optimizers by persistent ids."""

    def __init__(self, file: io.BytesIO, models: dict[int, int], optimizers: bool,
                 source_files: set[str] | None = None) -> None:
        super().__init__(file)
        self._models = models
        self._optimizers = optimizers
        self._source_files = source_files

    def reducer_override(self, obj: Any) -> Any:  # noqa: D102 - pickle protocol hook
        if self._source_files is not None and isinstance(obj, types.CodeType):
            self._source_files.add(obj.co_filename)  # only code travelling by value is pickled as a code object
        if isinstance(obj, Op) and uses_getstate(obj):
            # A FastEstimator-style __getstate__ gives the checkpoint state only: the replica needs the whole op.
            return rebuild, (type(obj), obj.__dict__)
        return super().reducer_override(obj)

    def persistent_id(self, obj: Any) -> Any:  # noqa: D102 - pickle protocol hook
        if id(obj) in self._models and _is_keras_model(obj):
            return ("fe_ray.keras_model", self._models[id(obj)])
        if self._optimizers and _is_keras_optimizer(obj):
            import keras

            from fe_ray.backend import get_backend

            with get_backend("tf").float_weight_decay(obj):  # a Keras config holds numbers, not variables
                return ("fe_ray.keras_optimizer", id(obj), keras.optimizers.serialize(obj))
        return None


class _KerasAwareUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, models: Sequence[Any]) -> None:
        super().__init__(file)
        self._models = models
        self._optimizers: dict[int, Any] = {}

    def persistent_load(self, pid: Any) -> Any:  # noqa: D102 - pickle protocol hook
        if pid[0] == "fe_ray.keras_model":
            return self._models[pid[1]]
        if pid[0] == "fe_ray.keras_optimizer":
            if pid[1] not in self._optimizers:
                import keras

                from fe_ray.backend import get_backend

                optimizer = keras.optimizers.deserialize(pid[2])
                get_backend("tf").live_weight_decay(optimizer)
                self._optimizers[pid[1]] = optimizer
            return self._optimizers[pid[1]]
        raise pickle.UnpicklingError(f"Unknown persistent id {pid[0]!r}.")


def _dumps(obj: Any, models: dict[int, int], optimizers: bool, source_files: set[str] | None = None) -> bytes:
    buffer = io.BytesIO()
    _KerasAwarePickler(buffer, models, optimizers, source_files).dump(obj)
    return buffer.getvalue()


def _sources(files: set[str]) -> dict[str, list[str]]:
    """The driver's lines of ``files`` (from disk, or from the linecache for notebook cells); unknown ones left out."""
    found = {}
    for name in sorted(files):
        lines = linecache.getlines(name)
        if lines:
            found[name] = lines
    return found


def _install_sources(sources: dict[str, list[str]]) -> None:
    """Put the driver's source lines into this process's linecache (no modification time: never re-read from a
    file of the same name here, which may be another version or not exist)."""
    for name, lines in sources.items():
        linecache.cache[name] = (sum(len(line) for line in lines), None, list(lines), name)


def _custom_classes(model: Any) -> dict[str, type]:
    """The classes of ``model`` and its layers that are not Keras' own, by the name Keras' configs give them."""
    import keras

    return {keras.saving.get_registered_name(type(layer)): type(layer)
            for layer in model._flatten_layers(include_self=True, recursive=True)
            if not type(layer).__module__.startswith("keras.")}


def _keras_spec(model: Any, source_files: set[str]) -> dict[str, Any]:
    attrs = {name: _untracked(value) for name, value in vars(model).items()
             if name in _FE_MODEL_ATTRS or (name.startswith("fe_") and not callable(value))}
    optimizers = (getattr(model, "optimizer", None), getattr(model, "current_optimizer", None))
    return {"classes": _dumps(_custom_classes(model), {}, False, source_files),
            "model": cloudpickle.dumps(model), "attrs": cloudpickle.dumps(attrs),
            "optimizers": _dumps(optimizers, {}, optimizers=True),
            # Keras revives a subclassed model from its config, which does not keep its layers' trainable flags:
            # a layer frozen in model_fn would train on the replicas.
            "trainable": [layer.trainable for layer in model._flatten_layers(include_self=True, recursive=True)]}


def _untracked(value: Any) -> Any:
    """A plain set / list / dict for Keras' tracked one: a Keras model wraps the containers set on it (UpdateOp's
    ``loss_name`` set), and a tracked container pickles with its model, which then had to be revived twice."""
    for plain in (set, list, dict):
        if isinstance(value, plain) and type(value) is not plain:
            return plain(value)
    return value


def _load_keras_model(spec: dict[str, Any]) -> Any:
    import keras

    from fe_ray.backend import get_backend

    attrs = cloudpickle.loads(spec["attrs"])
    # Subclassed models and custom layers (in __main__ too) by the names in the model's Keras config.
    classes = cloudpickle.loads(spec["classes"])
    # Keras reads the policy when layers are created; set for this model only (see fe_ray.build).
    policy = get_backend("tf").mixed_precision_policy(bool(attrs.get("mixed_precision")))
    with policy, keras.saving.custom_object_scope(classes):
        model = cloudpickle.loads(spec["model"])
    for name, value in attrs.items():
        setattr(model, name, value)
    layers = list(model._flatten_layers(include_self=True, recursive=True))
    flags = spec.get("trainable")
    if flags is not None and len(flags) == len(layers):  # (check_keras_model_travels compares the counts)
        for layer, trainable in zip(layers, flags):
            if layer.trainable != trainable:
                layer.trainable = trainable
    optimizer, current = _KerasAwareUnpickler(io.BytesIO(spec["optimizers"]), []).load()
    model.optimizer = optimizer
    model.current_optimizer = current
    return model


def dumps_ops(ops: Sequence[Any], models: Sequence[Any]) -> bytes:
    """Serialise ``ops`` (and the ``models`` they use) for :func:`loads_ops` in another process."""
    index = {id(model): pos for pos, model in enumerate(models) if _is_keras_model(model)}
    source_files: set[str] = set()
    specs = {pos: _keras_spec(model, source_files) for pos, model in enumerate(models) if id(model) in index}
    ops_payload = _dumps(list(ops), index, False, source_files)
    return cloudpickle.dumps({"keras_models": specs, "n_models": len(models), "ops": ops_payload,
                              "sources": _sources(source_files)})


def loads_ops(payload: bytes) -> list[Any]:
    """Rebuild the ops serialised by :func:`dumps_ops` (models shared between ops stay shared)."""
    data = cloudpickle.loads(payload)
    _install_sources(data.get("sources", {}))
    models: list[Any] = [None] * data["n_models"]
    for pos, spec in data["keras_models"].items():
        models[pos] = _load_keras_model(spec)
    return _KerasAwareUnpickler(io.BytesIO(data["ops"]), models).load()


def check_picklable(ops: Sequence[Any], models: Sequence[Any]) -> bytes:
    """Serialise ``ops``, and on failure name the op and attribute that cannot be pickled.

    Returns:
        The payload of :func:`dumps_ops`.

    Raises:
        TypeError: Naming the op (position and class), the offending attribute and the pickling error, with how to
            fix it.
        ValueError: If a Keras model would not reach the replicas as it is (see :func:`check_keras_model_travels`).
    """
    try:
        payload = dumps_ops(ops, models)
    except Exception as err:  # noqa: BLE001 - any pickling failure is reported as the TypeError below
        index = {id(model): pos for pos, model in enumerate(models) if _is_keras_model(model)}
        for pos, op in enumerate(ops):
            culprit = _find_unpicklable(op, index)
            if culprit is not None:
                attr, detail = culprit
                raise TypeError(
                    f"Network op #{pos} ({type(op).__name__}) cannot be sent to the Ray replicas: its attribute "
                    f"{attr!r} is not picklable ({detail}). Ops run in other processes, so they must be picklable "
                    "by cloudpickle: create locks, open files, sockets or clients lazily inside forward() (or drop "
                    "them in __getstate__), or run in-process with num_replicas=None.") from err
        raise TypeError(f"The Network's ops cannot be pickled for the Ray replicas: {type(err).__name__}: {err}. "
                        "Make the ops picklable by cloudpickle, or run in-process with num_replicas=None.") from err
    for pos, spec in cloudpickle.loads(payload)["keras_models"].items():
        check_keras_model_travels(models[pos], spec)
    return payload


def check_keras_model_travels(model: Any, spec: dict[str, Any]) -> None:
    """Revive ``model`` from its spec here, as a replica will, and check that its layers of the user's own classes
    kept their plain attributes (numbers, strings, flags).

    A Keras model travels through Keras' serialization, which rebuilds each layer of a class of the user's own as
    ``cls.from_config(layer.get_config())``: a constructor argument ``get_config`` leaves out comes back as its
    default, and the replicas would train another model than the driver's without a word.

    Raises:
        ValueError: Naming the class, the attribute and both values (or the error reviving it), and the fix.
    """
    fix = ("Keras rebuilds layers and models of your own classes from get_config(): have __init__ take **kwargs and "
           "pass them to super().__init__(**kwargs), and return every constructor argument from get_config() (Keras' "
           "rule for saving such models too), or run in-process with num_replicas=None.")
    name = getattr(model, "model_name", model.name)
    try:
        revived = _load_keras_model(spec)
    except Exception as err:  # noqa: BLE001 - reported with the fix
        raise ValueError(f"Model {name!r} cannot be sent to the Ray replicas: reviving it failed with "
                         f"{type(err).__name__}: {err}. {fix}") from err
    originals = list(model._flatten_layers(include_self=True, recursive=True))
    copies = list(revived._flatten_layers(include_self=True, recursive=True))
    if len(originals) != len(copies):
        raise ValueError(f"Model {name!r} cannot be sent to the Ray replicas: it has {len(originals)} layers here and "
                         f"{len(copies)} when revived from its Keras config. {fix}")
    for original, twin in zip(originals, copies):
        if type(original).__module__.startswith("keras."):
            continue
        for attr, value in vars(original).items():
            # The name does not matter to training (weights go by position, the model by model_name), and Keras'
            # automatic config leaves it out unless __init__'s catch-all is called **kwargs.
            if attr.startswith("_") or attr == "name" or not _plain(value):
                continue
            other = vars(twin).get(attr, "<missing>")
            if other != value:
                raise ValueError(f"Model {name!r} cannot be sent to the Ray replicas: its {type(original).__name__} "
                                 f"layer {original.name!r} has {attr}={value!r} here but {attr}={other!r} when revived "
                                 f"from its Keras config, so the replicas would train another model. {fix}")


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _find_unpicklable(op: Any, index: dict[int, int]) -> tuple[str, str] | None:
    """(attribute path, error) of the first attribute of ``op`` that fails to pickle, or None if it pickles."""
    try:
        _dumps(op, index, optimizers=False)
        return None
    except Exception as err:  # noqa: BLE001
        whole_error = f"{type(err).__name__}: {err}"
    attributes = vars(op) if hasattr(op, "__dict__") else {}
    for name, value in attributes.items():
        try:
            _dumps(value, index, optimizers=False)
        except Exception as err:  # noqa: BLE001
            if hasattr(value, "__dict__") and not isinstance(value, type):
                inner = _find_unpicklable(value, index)
                if inner is not None and not inner[0].startswith("<"):
                    return f"{name}.{inner[0]}", inner[1]
            return name, f"{type(err).__name__}: {err}"
    return "<the op itself>", whole_error


__all__ = ["check_keras_model_travels", "check_picklable", "dumps_ops", "loads_ops"]
