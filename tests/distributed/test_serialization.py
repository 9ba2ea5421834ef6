"""Shipping ops to replicas: code travelling by value keeps its source (AutoGraph, tracebacks)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
