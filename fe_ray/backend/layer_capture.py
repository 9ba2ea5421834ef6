"""Recording the outputs of chosen layers during a model's ordinary forward pass (ModelOp's
``intermediate_layers``), and deciding how a model takes several inputs: the framework-neutral halves; the torch
forward hook and the Keras ``call`` wrapper are in their backends."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any


class OutputRecorder:
    """Keeps a layer's latest output while at least one ModelOp that wants it is running.

    Recording only while active means other uses of the model (Keras' symbolic build, ops that do not ask for the
    layer) keep no tensors alive. Each backend feeds :meth:`record` from its own hook.
    """

    def __init__(self, layer_name: str) -> None:
        self.layer_name = layer_name
        self.active = 0
        self.output: Any = None
        self.seen = False

    def record(self, output: Any) -> None:
        if self.active:
            self.output, self.seen = output, True

    def start(self) -> None:
        """Record from now until every :meth:`start` has had its :meth:`stop`, forgetting any earlier output."""
        if not self.active:
            self.output, self.seen = None, False
        self.active += 1

    def stop(self) -> None:
        self.active -= 1

    def take(self, entry: str | int) -> Any:
        """Return and forget the recorded output.

        Raises:
            ValueError: If the layer did not run since :meth:`start`.
        """
        if not self.seen:
            raise ValueError(f"intermediate_layers entry {entry!r} ({self.layer_name}) did not run during the model's "
                             "forward pass (an input layer, or a layer the model's forward does not use).")
        output, self.output, self.seen = self.output, None, False
        return output

    def __getstate__(self) -> dict[str, Any]:
        # Models may travel pickled with their hooks; a recorded tensor must not travel (or pin memory) with them.
        return {**self.__dict__, "active": 0, "output": None, "seen": False}


def run_recording(recorders: list[OutputRecorder], layers: Iterable[str | int],
                  forward: Callable[[], Any]) -> list[Any]:
    """Run ``forward()`` with ``recorders`` recording; return ``[its output, *each recorder's output]``."""
    for recorder in recorders:
        recorder.start()
    try:
        final = forward()
    finally:
        for recorder in recorders:
            recorder.stop()
    return [final, *[recorder.take(entry) for recorder, entry in zip(recorders, layers)]]


def pick(entries: list[tuple[str, Any]], entry: str | int, owner: str, what: str) -> tuple[str, Any]:
    """The ``(name, object)`` pair ``entry`` selects: by name (which must be unique) or by index.

    Raises:
        ValueError: If no entry or several carry the name, or the index is out of range, listing the choices.
    """
    names = [name for name, _ in entries]
    if isinstance(entry, str):
        found = [pair for pair in entries if pair[0] == entry]
        if len(found) > 1:
            raise ValueError(f"intermediate_layers entry {entry!r} names {len(found)} layers of {owner} (in different "
                             f"sub-models): give its index into {names} instead.")
        if found:
            return found[0]
    elif -len(entries) <= entry < len(entries):
        return entries[entry]
    raise ValueError(f"intermediate_layers entry {entry!r} is not a layer of {owner}: use a name from "
                     f"{[name for name in names if name]} or an index in [{-len(entries)}, {len(entries) - 1}] into "
                     f"{what}.")


def takes_several_inputs(forward: Callable[..., Any], ignore: tuple[str, ...] = (), unknown: bool = False) -> bool:
    """Whether ``forward`` takes more than one positional input (``*args`` counts as several) besides ``ignore``;
    ``unknown`` when its signature cannot be read."""
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        return unknown
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ignore]
    return len(positional) > 1 or any(p.kind is p.VAR_POSITIONAL for p in params)
