"""Step pipelining for the Estimator's loop: the batch after the current one, made while the current one runs.

A distributed network asks for the following batch once it has sent the current step, so the Pipeline prepares it
(and the network puts its slices into the object store) while the replicas compute. The Loader's positions stay those
of a plain loop, so checkpoints taken between the two batches resume exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

_END = object()


def with_lookahead(loader: Any, set_lookahead: Any, convert: Callable[[Any], Any] = lambda batch: batch
                    ) -> Iterator[Any]:
    """Iterate ``loader``, offering a distributed network the following batch while the current one runs.

    The network gets a ``peek`` callable for the batch after the current one and calls it once the step was sent:
    the Pipeline then prepares that batch, and the network puts its slices into the object store, while the replicas
    compute (step pipelining). A network that does not call it leaves the fetch to this loop, after the step. The
    Pipeline records its position when a batch is handed out, so a checkpoint taken in between would count the
    fetched batch as consumed and a resume would skip it. The Loader's ``on_batch`` report is therefore intercepted
    and replayed only when each batch actually starts: positions stay exactly what they are without lookahead.
    Loaders without ``on_batch`` and networks without ``set_lookahead`` are iterated plainly, as are loaders whose
    batches are not a pure function of their position (``loader.pure`` False: an op or the dataset keeps state).
    Making such a batch early would change state a checkpoint of the current step saves, and would miss what a trace
    changes in that state between the two batches. Every batch goes through ``convert`` once, when it is fetched, so
    the network's look-ahead and the step see the same object.
    """
    record = getattr(loader, "on_batch", None)
    if set_lookahead is None or record is None or not getattr(loader, "pure", True):
        yield from map(convert, loader)
        return
    handed_out: list[int] = []
    loader.on_batch = handed_out.append
    try:
        batches = map(convert, loader)
        current = next(batches, _END)
        while current is not _END:
            if handed_out:  # the current batch's report (a following one's arrives only once it is fetched)
                record(handed_out.pop(0))
            following = _Following(batches)
            set_lookahead(following.peek)
            yield current
            current = following.take()
    finally:
        loader.on_batch = record
        set_lookahead(None)


class _Following:
    """The batch after the current one, fetched at most once: by the network during the step, else after it.

    An error fetching it is kept and raised by :meth:`take`, where the loop would have met it without lookahead: a
    Pipeline error must not surface inside the replicas' step (the coordinator would tear the replicas down).
    """

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches
        self._fetched = False
        self._batch: Any = _END
        self._error: Exception | None = None

    def peek(self) -> Any:
        """The following batch, or None at the end of the loader (also when fetching it failed)."""
        self._fetch()
        return None if self._batch is _END else self._batch

    def take(self) -> Any:
        """The following batch, or ``_END``; raises the error fetching it met."""
        self._fetch()
        if self._error is not None:
            raise self._error
        return self._batch

    def _fetch(self) -> None:
        if self._fetched:
            return
        self._fetched = True
        try:
            self._batch = next(self._batches, _END)
        except Exception as err:  # noqa: BLE001 - re-raised by take()
            self._error = err


__all__ = ["with_lookahead"]
