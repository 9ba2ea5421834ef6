"""The Op base class: a named transformation from input keys to output keys, filtered by mode and ds_id."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

from fe_ray.util import parse_ds_ids, parse_modes, to_list, to_set
from fe_ray.util.fe_state import checkpoint_getstate, setstate_from_checkpoint, uses_getstate


class Op:
    """A unit of computation reading ``inputs`` keys from a data dict and writing ``outputs`` keys back.

    Args:
        inputs: Key(s) read from the data dictionary.
        outputs: Key(s) written to the data dictionary.
        mode: Mode(s) in which the op runs ("train", "eval", "test", "infer"); None for all; "!mode" to exclude.
        ds_id: Dataset id(s) in which the op runs; None for all; "!id" to exclude.

    Ops that carry state across steps (counters, running statistics, RNGs) override :meth:`state_dict` and
    :meth:`load_state_dict` so that checkpoints restore them (or, as in FastEstimator, define ``__getstate__`` and
    optionally ``__setstate__``).
    """

    def __init__(self, inputs: None | str | Iterable[str] = None, outputs: None | str | Iterable[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        self.in_list = not isinstance(inputs, str)
        self.out_list = not isinstance(outputs, str)
        self.inputs: list[str] = _check_keys(to_list(inputs), "inputs", type(self).__name__)
        self.outputs: list[str] = _check_keys(to_list(outputs), "outputs", type(self).__name__)
        # Empty sets mean every mode / every dataset, as FastEstimator's ops (and fe_ray's traces) hold them.
        self.mode: set[str] = parse_modes(to_set(mode)) if mode is not None else set()
        self.ds_id: set[str] = parse_ds_ids(ds_id) or set()

    def forward(self, data: Any, state: dict[str, Any]) -> Any:
        """Transform ``data`` (one value, or a list when the op has several inputs). Identity by default."""
        return data

    def state_dict(self) -> dict[str, Any]:
        """Return the op's mutable training state (empty for stateless ops; a FastEstimator-style ``__getstate__`` of
        the op's own class gives it, see :mod:`fe_ray.util.fe_state`)."""
        state = checkpoint_getstate(self)
        return {} if state is None else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore state produced by :meth:`state_dict`.

        Raises:
            ValueError: If a stateless op is given a non-empty state (the configuration changed).
        """
        if uses_getstate(self):
            setstate_from_checkpoint(self, state)
        elif state:
            raise ValueError(f"{type(self).__name__} has no state but was given keys {sorted(state)}; "
                             "the checkpoint belongs to a different configuration.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(inputs={self.inputs}, outputs={self.outputs}, mode={self.mode})"


def _check_keys(keys: list[Any], what: str, op_name: str) -> list[str]:
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"{op_name} {what} must be strings, got {key!r} ({type(key).__name__}).")
    return keys


def get_inputs_by_op(op: Op, store: MutableMapping[str, Any]) -> Any:
    """Read ``op``'s inputs from ``store`` (a single value, or a list if the op takes several).

    Raises:
        KeyError: Naming the missing key, the op and the keys that are available.
    """
    keys = op.inputs
    try:
        if not op.in_list and len(keys) == 1:
            return store[keys[0]]  # the usual one-key op: no list to build (a third of the call's cost)
        data = [store[key] for key in keys]
    except KeyError as err:
        missing = err.args[0]
        raise KeyError(f"Key {missing!r} needed by {type(op).__name__} (inputs {op.inputs}) is not available; "
                       f"available keys: {sorted(store)}. Produce it in the pipeline or an earlier op.") from None
    if not op.in_list:
        return data[0]
    return data


def write_outputs_by_op(op: Op, store: MutableMapping[str, Any], outputs: Any) -> None:
    """Write ``outputs`` (one value, or a sequence matching ``op.outputs``) into ``store``.

    Raises:
        ValueError: If an op with several outputs returns the wrong number of values.
    """
    if not op.out_list:
        store[op.outputs[0]] = outputs
        return
    outputs = to_list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if len(outputs) != len(op.outputs):
        raise ValueError(f"{type(op).__name__} declares outputs {op.outputs} but returned {len(outputs)} value(s).")
    for key, value in zip(op.outputs, outputs):
        store[key] = value
