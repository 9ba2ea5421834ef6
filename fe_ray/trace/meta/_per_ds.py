"""``per_ds``: a class decorator that makes a user's Trace also log its values per dataset (``<key>|<ds_id>``).

The decorated class is a :class:`~fe_ray.trace.trace.PerDSTrace`: the Estimator's ``on_ds_begin`` / ``on_ds_end``
events drive a second instance of the user's class (made with the same arguments) through one "epoch" per dataset,
writing through :class:`~fe_ray.trace.trace.DSData`, while the instance itself computes the overall values as it
would undecorated. So a trace that resets in ``on_epoch_begin``, accumulates in ``on_batch_end`` and writes in
``on_epoch_end`` logs ``auc`` over all datasets plus ``auc|ds1``, ``auc|ds2``, ... with no change to its code.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from fe_ray.pipeline.checkpoint import holds_state
from fe_ray.trace.trace import Data, DSData, PerDSTrace, Trace, per_ds_keys
from fe_ray.util.fe_state import setstate_from_checkpoint, uses_getstate

_TraceT = TypeVar("_TraceT", bound=type)


def per_ds(cls: _TraceT) -> _TraceT:
    """Make a Trace class dataset-aware: with several datasets in a mode, it also logs ``<key>|<ds_id>`` values.

    Use it as a class decorator on a :class:`~fe_ray.trace.trace.Trace` subclass whose ``on_epoch_begin`` /
    ``on_batch_end`` / ``on_epoch_end`` compute a value over an epoch. Each instance then keeps a per-dataset copy
    (``fe_per_ds_trace``, built with the same arguments) that runs one epoch per dataset: every key it writes with
    ``write_with_log`` gets the suffix ``|<ds_id>``. A mode with a single, unnamed dataset logs the overall values
    only. As in FastEstimator, constructing the class returns a plain (not dataset-aware) instance of the undecorated
    class when an output key already contains '|' or the constructor sets ``self.per_ds = False``.

    Args:
        cls: The Trace subclass to decorate.

    Returns:
        The dataset-aware class, named as ``cls`` (the undecorated class is its ``__wrapped__``).

    Raises:
        TypeError: If ``cls`` is not a Trace subclass.
    """
    if not (isinstance(cls, type) and issubclass(cls, Trace)):
        raise TypeError(f"per_ds decorates Trace subclasses, got {cls!r}. Apply it to a class deriving from "
                        "fe.trace.Trace: '@per_ds' above 'class MyTrace(Trace): ...'.")
    if getattr(cls, "_fe_per_ds_base", None) is not None:
        return cls  # already dataset-aware: a second decoration changes nothing

    base_changes_batch = (cls.changes_batch if cls.changes_batch is not None
                          else cls.on_batch_begin is not Trace.on_batch_begin)

    @functools.wraps(cls, updated=())
    class PerDS(cls, PerDSTrace):  # type: ignore[valid-type, misc]
        _fe_per_ds_base = cls
        # Forwarding on_batch_begin to the copy changes a batch only if the user's class does (a distributed
        # network prefetches a batch's slices only when no trace may change it).
        changes_batch = base_changes_batch

        def __new__(klass, *args: Any, **kwargs: Any) -> Any:
            if klass is not PerDS:
                # The per-dataset copy would be of the decorated base, silently missing the subclass's overrides.
                raise TypeError(f"{klass.__name__} subclasses the per_ds-decorated {cls.__name__}, so its per-dataset "
                                f"values would come from {cls.__name__}'s code. Subclass the undecorated class "
                                f"({cls.__name__}.__wrapped__) and decorate the subclass with @per_ds instead.")
            plain = cls(*args, **kwargs)
            if any("|" in output for output in plain.outputs) or getattr(plain, "per_ds", True) is False:
                return plain  # not a PerDS instance, so Python does not call PerDS.__init__ on it
            obj = super().__new__(klass)
            obj.__dict__["_fe_plain"] = plain  # reused as the per-dataset copy rather than built a third time
            return obj

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            plain = self.__dict__.pop("_fe_plain", None)
            super().__init__(*args, **kwargs)
            self.fe_per_ds_trace = plain if plain is not None else cls(*args, **kwargs)
            # The dataset whose "epoch" the copy is in: a run resumed inside a dataset without checkpointed state
            # never calls on_ds_begin for it, so the copy's epoch is begun at its first batch instead.
            self._fe_open_ds: str | None = None

        def __reduce_ex__(self, protocol: Any) -> Any:
            # copy/deepcopy must not run __new__ (it would construct the user's class without its arguments).
            return _bare_instance, (type(self),), dict(self.__dict__)

        def _ds_copy(self) -> Trace:
            copy_ = self.fe_per_ds_trace
            system = self.__dict__.get("system")
            if system is not None:  # the copy's code may read self.system, as the user's trace does
                copy_.system = system
            return copy_

        def _ds_id(self) -> str:
            system = self.__dict__.get("system")
            return getattr(system, "ds_id", "") or ""

        def _begin_ds(self, ds_id: str) -> None:
            self._fe_open_ds = ds_id
            self._ds_copy().on_epoch_begin(DSData(ds_id, Data()))

        def get_outputs(self, ds_ids: None | str | Iterable[str] = None) -> list[str]:
            outputs = list(super().get_outputs(ds_ids))
            return outputs + [key for key in per_ds_keys(self.outputs, ds_ids) if key not in outputs]

        def on_begin(self, data: Data) -> None:
            super().on_begin(data)
            self._ds_copy().on_begin(data)

        def on_ds_begin(self, data: Data) -> None:
            super().on_ds_begin(data)
            ds_id = self._ds_id()
            if ds_id:
                self._fe_open_ds = ds_id
                self._ds_copy().on_epoch_begin(DSData(ds_id, data))

        def on_batch_begin(self, data: Data) -> None:
            super().on_batch_begin(data)
            ds_id = self._ds_id()
            if ds_id:
                if self._fe_open_ds != ds_id:
                    self._begin_ds(ds_id)
                self._ds_copy().on_batch_begin(DSData(ds_id, data))

        def on_batch_end(self, data: Data) -> None:
            ds_id = self._ds_id()
            if ds_id:
                if self._fe_open_ds != ds_id:
                    self._begin_ds(ds_id)
                self._ds_copy().on_batch_end(DSData(ds_id, data))
                # The copy wrote '<key>|<ds_id>' per-instance values; the plain key would repeat them.
                enabled, data.per_instance_enabled = data.per_instance_enabled, False
                try:
                    super().on_batch_end(data)
                finally:
                    data.per_instance_enabled = enabled
            else:
                super().on_batch_end(data)

        def on_ds_end(self, data: Data) -> None:
            super().on_ds_end(data)
            ds_id = self._ds_id()
            if ds_id:
                if self._fe_open_ds != ds_id:  # a dataset without batches: its epoch still begins and ends
                    self._begin_ds(ds_id)
                self._fe_open_ds = None
                self._ds_copy().on_epoch_end(DSData(ds_id, data))

        def on_end(self, data: Data) -> None:
            super().on_end(data)
            self._ds_copy().on_end(data)

        def on_abort(self, error: BaseException) -> None:
            super().on_abort(error)
            self._ds_copy().on_abort(error)

        def state_dict(self) -> dict[str, Any]:
            state: dict[str, Any] = {"trace": _own_state(self, cls), "per_ds": self.fe_per_ds_trace.state_dict()}
            if holds_state(state):  # only then: a trace keeping no state must still read as stateless
                state["open_ds"] = self._fe_open_ds
            return state

        def load_state_dict(self, state: Mapping[str, Any]) -> None:
            _load_own_state(self, cls, state.get("trace", {}))
            self.fe_per_ds_trace.load_state_dict(state.get("per_ds", {}))
            self._fe_open_ds = state.get("open_ds")

    return PerDS  # type: ignore[return-value]


def _bare_instance(cls: type) -> Any:
    """An instance of ``cls`` without ``__new__``'s or ``__init__``'s work (its attributes come from a copy)."""
    return object.__new__(cls)


def _own_state(trace: Trace, cls: type) -> dict[str, Any]:
    """The checkpoint state ``trace`` would have as a plain instance of ``cls`` (its class's own ``state_dict``, or
    FastEstimator's ``__getstate__`` protocol, or nothing)."""
    if cls.state_dict is not Trace.state_dict:
        return cls.state_dict(trace)
    if uses_getstate(trace.fe_per_ds_trace):  # decided by cls, which the copy is a plain instance of
        state = trace.__getstate__()
        if isinstance(state, dict):
            return copy.deepcopy({key: value for key, value in state.items()
                                  if key not in ("fe_per_ds_trace", "_fe_open_ds", "system")})
    return {}


def _load_own_state(trace: Trace, cls: type, state: Mapping[str, Any]) -> None:
    """Restore :func:`_own_state`'s state."""
    if cls.load_state_dict is not Trace.load_state_dict:
        cls.load_state_dict(trace, state)
    elif uses_getstate(trace.fe_per_ds_trace):
        setstate_from_checkpoint(trace, dict(state))
    elif state:
        raise ValueError(f"{cls.__name__} has no state but the checkpoint holds keys {sorted(state)}; the checkpoint "
                         "belongs to a different configuration.")
