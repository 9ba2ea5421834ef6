"""Shipping ops to replicas: code travelling by value keeps its source (AutoGraph, tracebacks)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPLICA = """
import inspect, sys
import numpy as np
import tensorflow as tf
from fe_ray.distributed.serialization import loads_ops

(op,) = loads_ops(sys.stdin.buffer.read())
if "tf.reduce_max(data) > 2.0" in inspect.getsource(type(op).forward):
    print("source-found")
step = tf.function(op.forward)  # AutoGraph converts it, as it converts the ops a replica's step calls
for values in ([1.0, 4.0], [1.0, 2.0]):
    print(str(step(tf.constant(values), {}).numpy().tolist()).replace(" ", ""))
"""

OP_MODULE = '''
from fe_ray.op.tensorop import TensorOp


class HalveIfLarge(TensorOp):
    """Python control flow on a tensor: inside a tf.function only AutoGraph, which reads the source, can run it."""

    def forward(self, data, state):
        import tensorflow as tf

        if tf.reduce_max(data) > 2.0:
            data = data / 2.0
        return data
'''


def test_ops_defined_in_the_users_script_keep_their_source_on_replicas(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica unpickles a script's op classes by value; without their source (a node without the file, or a
    file name cloudpickle replaced), AutoGraph cannot convert ``if tensor:`` and the replica's TF step failed."""
    pytest.importorskip("tensorflow")
    from fe_ray.distributed.serialization import dumps_ops

    path = tmp_path / "user_script_ops.py"
    path.write_text(textwrap.dedent(OP_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("user_script_ops")
    picklers = [importlib.import_module(name) for name in ("cloudpickle", "ray.cloudpickle")]
    for pickler in picklers:  # by value, as classes of __main__ or of a notebook travel
        pickler.register_pickle_by_value(module)
    try:
        payload = dumps_ops([module.HalveIfLarge(inputs="x", outputs="x")], [])
    finally:
        for pickler in picklers:
            pickler.unregister_pickle_by_value(module)
        sys.modules.pop("user_script_ops", None)
    os.remove(path)  # the replica's node has no such file
    # A fresh process, as a replica is (in this one cloudpickle would hand back the class it already knows).
    child = subprocess.run([sys.executable, "-c", REPLICA], input=payload, capture_output=True, timeout=120,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert child.returncode == 0, child.stderr.decode()[-3000:]
    assert child.stdout.decode().split() == ["source-found", "[0.5,2.0]", "[1.0,2.0]"]


DRIVER_WITH_CUSTOM_LAYER = """
import sys
import keras
import numpy as np
import fe_ray as fe
from fe_ray.distributed.serialization import check_picklable
from fe_ray.op.tensorop.model import ModelOp, UpdateOp


class Scale(keras.layers.Layer):
    def __init__(self, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor


def model_fn():
    inputs = keras.Input((3,))
    return keras.Model(inputs, Scale(3.0)(keras.layers.Dense(2)(inputs)))


model = fe.build(model_fn, optimizer_fn="adam", model_name="scaled")
ops = [ModelOp(model=model, inputs="x", outputs="y"), UpdateOp(model=model, loss_name="ce")]
sys.stdout.buffer.write(check_picklable(ops, [model]))
"""

REPLICA_WITH_CUSTOM_LAYER = """
import sys
from fe_ray.distributed.serialization import loads_ops

op, update = loads_ops(sys.stdin.buffer.read())
assert update.model is op.model
print(type(op.model.layers[-1]).__name__, op.model.layers[-1].factor, op.model.model_name, sorted(op.model.loss_name))
"""


def test_a_custom_layer_of_the_users_script_reaches_a_replica() -> None:
    """Only the model's own class was put in scope for Keras: a custom layer class of the script (a fresh replica
    process cannot import it) failed with "Could not locate class 'Scale'" (reviving the model a second time, out of
    that scope, through the Keras-tracked set UpdateOp keeps on it)."""
    pytest.importorskip("tensorflow")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    driver = subprocess.run([sys.executable, "-c", DRIVER_WITH_CUSTOM_LAYER], capture_output=True, timeout=180,
                            env=env)
    assert driver.returncode == 0, driver.stderr.decode()[-3000:]
    replica = subprocess.run([sys.executable, "-c", REPLICA_WITH_CUSTOM_LAYER], input=driver.stdout,
                             capture_output=True, timeout=180, env=env)
    assert replica.returncode == 0, replica.stderr.decode()[-3000:]
    assert replica.stdout.decode().split() == ["Scale", "3.0", "scaled", "['ce']"]


def test_a_keras_model_that_would_not_reach_the_replicas_alike_is_refused_on_the_driver() -> None:
    """Keras rebuilds a subclassed model from get_config(): an argument left out came back as its default and the
    replicas trained another model without a word; a class whose __init__ takes no **kwargs failed on the replica."""
    keras = pytest.importorskip("keras")
    import fe_ray as fe
    from fe_ray.distributed.serialization import check_picklable
    from fe_ray.op.tensorop.model import ModelOp

    class Net(keras.Model):
        def __init__(self, scale: float = 1.0, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.scale = scale
            self.dense = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            return self.dense(x) * self.scale

    class Fixed(Net):
        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "scale": self.scale}

    class NoKwargs(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            return self.dense(x)

    def built(cls: type, **kwargs: Any) -> Any:
        def make() -> Any:
            model = cls(**kwargs)
            model(np.zeros((1, 3), np.float32))
            return model

        model = fe.build(make, optimizer_fn="adam", model_name=f"m{cls.__name__}")
        return [ModelOp(model=model, inputs="x", outputs="y")], [model]

    with pytest.raises(ValueError, match=r"Model 'mNet' cannot be sent to the Ray replicas: its Net layer '\w+' has "
                                         r"scale=3.0 here but scale=1.0 when revived from its Keras config.*"
                                         r"return every constructor argument from get_config\(\)"):
        check_picklable(*built(Net, scale=3.0))
    with pytest.raises(ValueError, match=r"(?s)Model 'mNoKwargs' cannot be sent to the Ray replicas: reviving it "
                                         r"failed with TypeError.*have __init__ take \*\*kwargs"):
        check_picklable(*built(NoKwargs))
    check_picklable(*built(Net))  # the default survives
    check_picklable(*built(Fixed, scale=3.0))


def _frozen_backbone_net() -> Any:
    keras = pytest.importorskip("keras")

    class Backboned(keras.Model):
        def __init__(self, **kw: Any) -> None:  # a catch-all not called **kwargs: Keras' config drops the name
            super().__init__(**kw)
            self.backbone = keras.layers.Dense(4)
            self.head = keras.layers.Dense(1)

        def call(self, x: Any) -> Any:
            return self.head(self.backbone(x))

    model = Backboned()
    model(np.zeros((1, 3), np.float32))
    model.backbone.trainable = False
    return model


def test_a_frozen_layer_of_a_subclassed_model_stays_frozen_on_the_replicas() -> None:
    """Keras revives a subclassed model from its config, which keeps no layer's trainable flag: the replicas trained
    a layer frozen in model_fn, then failed on the buffers' count. The model's name, which Keras' automatic config
    leaves out for a catch-all not called **kwargs, does not stop the model from travelling."""
    import fe_ray as fe
    from fe_ray.distributed.serialization import _keras_spec, _load_keras_model, check_keras_model_travels

    model = fe.build(_frozen_backbone_net, optimizer_fn="sgd", model_name="net")
    spec = _keras_spec(model, set())
    check_keras_model_travels(model, spec)  # refused the name before
    revived = _load_keras_model(spec)
    assert [layer.trainable for layer in revived._flatten_layers(include_self=True, recursive=True)] == \
        [layer.trainable for layer in model._flatten_layers(include_self=True, recursive=True)]
    assert revived.backbone.trainable is False
    assert len(revived.trainable_weights) == len(model.trainable_weights) == 2
