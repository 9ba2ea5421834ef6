"""What the NumpyOp meta ops (Sometimes, OneOf, Fuse, Repeat) share: checking and running the ops they wrap, and
passing RUA's strength on (their state and Sometimes' keys are handled as for TensorOps, in
:mod:`fe_ray.op.meta_common`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fe_ray.op.meta_common import load_wrapped_state, wrapped_state
from fe_ray.op.numpyop.numpyop import Batch, Delete, NumpyOp, forward_numpyop
from fe_ray.types import FilteredData


def check_wrapped(op: Any, meta: str, allow_delete: bool = False) -> NumpyOp:
    """Return ``op`` if a meta op can run it, else raise TypeError (or ValueError for a Batch op, as FastEstimator's
    Sometimes does) saying what it accepts. ``allow_delete``: the meta op runs a Delete (Fuse: it drops an
    intermediate key of the chain)."""
    if isinstance(op, Batch):
        raise ValueError(f"{meta} cannot wrap a Batch op: batching is not an augmentation to run sometimes or by "
                         "choice, and the Pipeline only finds Batch ops in its own ops list. Put Batch(...) in "
                         "Pipeline(ops=[...]) directly (a Scheduler of Batch ops changes it by epoch).")
    if not isinstance(op, NumpyOp):
        raise TypeError(f"{meta} wraps NumpyOps, got {type(op).__name__}; TensorOps belong in Network(ops=...).")
    if isinstance(op, Delete) and not allow_delete:
        raise TypeError(f"{meta} cannot wrap Delete (the Pipeline removes its keys itself, never calling forward); "
                        "delete the keys with an unconditional Delete op (or one inside a Fuse) instead.")
    return op



#: The attributes saying whether an op takes its inputs / outputs as a list of keys or as one key string.
_KEY_FORMS = ("in_list", "out_list")


def check_shared(ops: Sequence[NumpyOp], attrs: Sequence[str], meta: str) -> None:
    """Raise ValueError unless all ``ops`` agree with the first on each of ``attrs`` (e.g. mode and ds_id)."""
    first = ops[0]
    for pos, op in enumerate(ops[1:], start=1):
        for attr in attrs:
            if getattr(op, attr) != getattr(first, attr):
                raise ValueError(_mismatch(meta, attr, (0, first), (pos, op)))


def _mismatch(meta: str, attr: str, *ops: tuple[int, NumpyOp]) -> str:
    """What differs between two of a meta op's ops, and how to make them agree."""
    names = [f"op #{pos} ({type(op).__name__})" for pos, op in ops]
    if attr not in _KEY_FORMS:
        values = [repr(getattr(op, attr)) for _, op in ops]
        return (f"All ops of a {meta} must share {attr}: {names[0]} has {values[0]} but {names[1]} has {values[1]}; "
                f"give them the same {attr}.")
    keys = "inputs" if attr == "in_list" else "outputs"
    forms = ["a list of keys" if getattr(op, attr) else "one key string" for _, op in ops]
    fix = f"a list ({keys}=[...])" if getattr(ops[0][1], attr) else "one string"
    returns = " (a LambdaOp's function then returns a list)" if attr == "out_list" else ""
    return (f"All ops of a {meta} must name their {keys} in the same form: {names[0]} has {forms[0]} but {names[1]} "
            f"has {forms[1]}; give every op its {keys} as {fix}{returns}.")


def set_rua_levels(ops: Sequence[Any], magnitude_coef: float, meta: str) -> None:
    """Pass RUA's strength ``magnitude_coef`` on to each of a meta op's ``ops``.

    Raises:
        TypeError: If an op has no ``set_rua_level`` method, so RUA cannot scale it.
    """
    for op in ops:
        if not callable(getattr(op, "set_rua_level", None)):
            raise TypeError(f"RUA scales every augmentation it runs, but {type(op).__name__} inside {meta} has no "
                            "set_rua_level(magnitude_coef) method; add one (it may do nothing) or leave the op out.")
    for op in ops:
        op.set_rua_level(magnitude_coef=magnitude_coef)


def run_ops(ops: Sequence[NumpyOp], store: dict[str, Any], state: dict[str, Any],
            batched: bool) -> FilteredData | None:
    """Run ``ops`` in order on ``store`` in place, all drawing from the meta op's own ``state`` (and generator);
    the :class:`~fe_ray.types.FilteredData` an op returned to drop the sample (the rest then do not run), or None."""
    return forward_numpyop(list(ops), store, state, batched=batched)


class OpChain(NumpyOp):
    """A NumpyOp that runs its :attr:`ops` one after another over its keys (Fuse, RUA): each op reads the keys the
    ones before it wrote; the chain returns its output keys. Its state is its ops' states."""

    ops: list[NumpyOp]

    def _selected(self, state: dict[str, Any]) -> list[NumpyOp]:
        """The ops to run this time: all of them (a chain choosing among its ops overrides this)."""
        return self.ops

    def _run(self, data: list[Any], state: dict[str, Any], batched: bool) -> list[Any] | FilteredData:
        store = dict(zip(self.inputs, data))
        filtered = run_ops(self._selected(state), store, state, batched)
        if filtered is not None:
            return filtered  # an op of the chain dropped the sample: so does the chain, as in FastEstimator
        return [store[key] for key in self.outputs]

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return self._run(data, state, batched=False)

    def forward_batch(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        return self._run(data, state, batched=True)

    def state_dict(self) -> dict[str, Any]:
        """The chained ops' states (under 'ops'), or empty when none has state."""
        return wrapped_state(self.ops)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If the state holds unknown keys or another number of ops.
        """
        load_wrapped_state(self.ops, state, type(self).__name__)
