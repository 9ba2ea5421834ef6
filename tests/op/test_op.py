"""The Op base class's user errors: bad key names, a missing input, a wrong number of outputs, a state for a
stateless op; the same messages from TensorOps (run_ops) and NumpyOps (forward_numpyop)."""

from __future__ import annotations

import numpy as np
import pytest

from fe_ray.op.numpyop import NumpyOp
from fe_ray.op.numpyop.numpyop import forward_numpyop
from fe_ray.op.op import Op
from fe_ray.op.tensorop import TensorOp
from fe_ray.op.tensorop.tensorop import run_ops


class Pair(TensorOp):
    def forward(self, data, state):
        return data  # one value for two declared outputs


class NumpyPair(NumpyOp):
    def forward(self, data, state):
        return data


@pytest.mark.parametrize("inputs, outputs, bad", [(1, "y", "1"), ("x", ["y", None], "None"),
                                                  (["x", b"z"], "y", "b'z'")])
def test_key_names_must_be_strings(inputs, outputs, bad) -> None:
    with pytest.raises(TypeError, match=rf"Op (inputs|outputs) must be strings, got {bad}"):
        Op(inputs=inputs, outputs=outputs)


def test_a_missing_input_names_the_key_the_op_and_the_keys_available() -> None:
    batch = {"x": np.zeros(2), "y": np.ones(2)}
    with pytest.raises(KeyError, match=r"'z' needed by Pair \(inputs \['x', 'z'\]\).*available keys: \['x', 'y'\]"):
        run_ops([Pair(inputs=["x", "z"], outputs=["a", "b"])], batch, {"mode": "train"})
    with pytest.raises(KeyError, match=r"'z' needed by NumpyPair .*available keys: \['x', 'y'\]"):
        forward_numpyop([NumpyPair(inputs="z", outputs="a")], dict(batch), {"mode": "train"})


def test_a_one_key_op_reads_its_value_and_names_a_missing_key_as_a_several_key_op_does() -> None:
    # One key (a str) is read without building a list; the value and the error are those of the general path.
    batch = {"x": np.zeros(2), "y": np.ones(2)}
    store: dict = dict(batch)
    run_ops([Pair(inputs="y", outputs="a"), Pair(inputs=["y"], outputs="b")], store, {"mode": "train"})
    assert store["a"] is batch["y"] and store["b"] == [batch["y"]]
    with pytest.raises(KeyError, match=r"'z' needed by Pair \(inputs \['z'\]\) is not available; available keys: "
                                       r"\['x', 'y'\]"):
        run_ops([Pair(inputs="z", outputs="a")], dict(batch), {"mode": "train"})


def test_an_op_returning_the_wrong_number_of_outputs_says_what_it_declared() -> None:
    batch = {"x": np.zeros(2)}
    message = r"Pair declares outputs \['a', 'b'\] but returned 1 value\(s\)"
    with pytest.raises(ValueError, match=message):
        run_ops([Pair(inputs="x", outputs=["a", "b"])], dict(batch), {"mode": "train"})
    with pytest.raises(ValueError, match="Numpy" + message):
        forward_numpyop([NumpyPair(inputs="x", outputs=["a", "b"])], dict(batch), {"mode": "train"})
    # A list of the right length is spread over the keys.
    store = {"x": [np.zeros(1), np.ones(1)]}
    run_ops([Pair(inputs="x", outputs=["a", "b"])], store, {"mode": "train"})
    assert (store["a"][0], store["b"][0]) == (0.0, 1.0)


def test_a_stateless_op_takes_only_an_empty_state() -> None:
    op = Op(inputs="x", outputs="y", mode="train")
    assert op.state_dict() == {}
    op.load_state_dict({})
    with pytest.raises(ValueError, match=r"Op has no state but was given keys \['count'\]; the checkpoint belongs"):
        op.load_state_dict({"count": 3})
    assert op.forward(5, {}) == 5  # identity by default
    assert repr(op) == "Op(inputs=['x'], outputs=['y'], mode={'train'})"
