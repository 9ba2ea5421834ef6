"""Slicers cut a batch into minibatches before the Network's ops and fuse the results back afterwards."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fe_ray.backend import concat, get_backend, stack
from fe_ray.util import parse_modes, to_list, to_set
from fe_ray.util.fe_state import checkpoint_getstate, setstate_from_checkpoint, uses_getstate


class Slicer:
    """Base class: how to split ``slice`` keys into minibatches and merge ``unslice`` keys back.

    Args:
        slice: Key(s) to cut apart before the ops run.
        unslice: Key(s) to fuse back together after the ops ran; the default ``()`` means the ``slice`` keys (as in
            FastEstimator), None means none. A key to fuse that the ops did not produce in this mode is skipped.
        mode: Mode(s) in which the slicer is active ("!mode" to exclude).
        ds_id: Dataset id(s) in which the slicer is active ("!id" to exclude).
    """

    def __init__(self, slice: None | str | Sequence[str] = None, unslice: None | str | Sequence[str] = (),
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        if isinstance(unslice, tuple) and not unslice:
            unslice = slice  # FastEstimator's default: fuse back the keys that were cut
        self.slice_inputs: list[str] = to_list(slice)
        self.unslice_inputs: list[str] = to_list(unslice)
        # Empty sets mean every mode / every dataset, as FastEstimator's slicers hold them.
        self.mode: set[str] = parse_modes(to_set(mode)) if mode is not None else set()
        self.ds_id: set[str] = to_set(ds_id) if ds_id is not None else set()
        if not self.slice_inputs and not self.unslice_inputs:
            raise ValueError(f"{type(self).__name__} needs at least one 'slice' or 'unslice' key.")

    def slice_batches(self, batches: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Cut each of ``batches`` (one per slice key) into minibatches; return one tuple per minibatch."""
        pieces = [self._slice_batch(batch) for batch in batches]
        counts = {len(p) for p in pieces}
        if len(counts) > 1:
            raise ValueError(f"{type(self).__name__} produced different numbers of slices {sorted(counts)} for keys "
                             f"{self.slice_inputs}; the sliced keys must share the sliced axis length.")
        return list(zip(*pieces))

    def unslice_batches(self, slices: tuple[Any, ...], key: str) -> Any:
        """Fuse the per-minibatch values of ``key`` into one value."""
        return self._unslice_batch(slices, key)

    def _slice_batch(self, batch: Any) -> list[Any]:
        raise NotImplementedError

    def _unslice_batch(self, slices: tuple[Any, ...], key: str) -> Any:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Slicers are stateless by default; stateful subclasses override this and :meth:`load_state_dict` (or, as in
        FastEstimator, define ``__getstate__``: see :mod:`fe_ray.util.fe_state`)."""
        state = checkpoint_getstate(self)
        return {} if state is None else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: If a stateless slicer is given state (the checkpoint is from another configuration).
        """
        if uses_getstate(self):
            setstate_from_checkpoint(self, state)
        elif state:
            raise ValueError(f"{type(self).__name__} has no state but was given keys {sorted(state)}.")


class ChunkSlicer(Slicer):
    """Cut along the batch axis into contiguous chunks and concatenate them back in order.

    Exactly one of ``n_chunks`` (the chunks get sizes differing by at most one, larger ones first, like
    ``numpy.array_split``) or ``chunk_size`` (the last chunk may be smaller) must be given. This is the slicer
    the distributed coordinator uses by default, one chunk per replica.

    Args:
        n_chunks: Number of chunks (a batch smaller than this gives fewer, non-empty, chunks).
        chunk_size: Samples per chunk.
        slice: Key(s) to cut.
        unslice: Key(s) to concatenate back (defaults to the ``slice`` keys).
        mode: Mode(s) in which to slice.
        ds_id: Dataset id(s) in which to slice.
    """

    def __init__(self, n_chunks: int | None = None, chunk_size: int | None = None,
                 slice: None | str | Sequence[str] = None, unslice: None | str | Sequence[str] = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        if (n_chunks is None) == (chunk_size is None):
            raise ValueError("ChunkSlicer needs exactly one of n_chunks or chunk_size, e.g. ChunkSlicer(n_chunks=2, "
                             f"slice='x'); got n_chunks={n_chunks!r}, chunk_size={chunk_size!r}.")
        for name, value in (("n_chunks", n_chunks), ("chunk_size", chunk_size)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"ChunkSlicer {name} must be a positive int, got {value!r}.")
        super().__init__(slice=slice, unslice=unslice if unslice is not None else slice, mode=mode, ds_id=ds_id)
        self.n_chunks = n_chunks
        self.chunk_size = chunk_size

    def chunk_bounds(self, batch_size: int) -> list[tuple[int, int]]:
        """Return the (start, stop) of each chunk for a batch of ``batch_size`` samples."""
        if self.n_chunks is not None:
            return split_bounds(batch_size, self.n_chunks)
        size = self.chunk_size
        assert size is not None
        return [(start, min(start + size, batch_size)) for start in range(0, batch_size, size)]

    def _slice_batch(self, batch: Any) -> list[Any]:
        return [batch[start:stop] for start, stop in self.chunk_bounds(int(batch.shape[0]))]

    def _unslice_batch(self, slices: tuple[Any, ...], key: str) -> Any:
        return concat(slices, axis=0)


def split_bounds(total: int, parts: int) -> list[tuple[int, int]]:
    """Contiguous, near-equal (start, stop) ranges covering ``range(total)``; empty ranges are dropped."""
    base, extra = divmod(total, parts)
    bounds, start = [], 0
    for idx in range(parts):
        stop = start + base + (1 if idx < extra else 0)
        if stop > start:
            bounds.append((start, stop))
        start = stop
    return bounds


class AxisSlicer(Slicer):
    """Cut along ``axis`` into single elements (the axis is removed) and stack them back along it.

    E.g. ``axis=-1`` feeds a batch of volumes ``[B, C, W, H, D]`` to a 2D model as ``D`` minibatches ``[B, C, W, H]``.

    Args:
        axis: The axis to cut along (required, first, as in FastEstimator).
        slice: Key(s) to cut.
        unslice: Key(s) to stack back; the default ``()`` means the ``slice`` keys, None means none.
        mode: Mode(s) in which to slice.
        ds_id: Dataset id(s) in which to slice.

    Raises:
        TypeError: If ``axis`` is not an int.
        ValueError: If neither a slice nor an unslice key is given.
    """

    def __init__(self, axis: int, slice: None | str | Sequence[str] = None,
                 unslice: None | str | Sequence[str] = (), mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"AxisSlicer axis must be an int (the axis to cut along, e.g. AxisSlicer(axis=-1, "
                            f"slice='x')), got {axis!r}; axis is FastEstimator's first argument.")
        super().__init__(slice=slice, unslice=unslice, mode=mode, ds_id=ds_id)  # () -> the slice keys
        self.axis = axis

    def _slice_batch(self, batch: Any) -> list[Any]:
        n = int(batch.shape[self.axis])
        index: list[Any] = [slice(None)] * len(batch.shape)
        pieces = []
        for i in range(n):
            index[self.axis] = i
            pieces.append(batch[tuple(index)])  # basic indexing works on numpy, torch and tf alike
        return pieces

    def _unslice_batch(self, slices: tuple[Any, ...], key: str) -> Any:
        return stack(slices, axis=self.axis)


class MeanUnslicer(Slicer):
    """Fuse per-slice values (e.g. scalar losses) by their mean; slices nothing itself."""

    def __init__(self, unslice: str | Sequence[str], mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None) -> None:
        super().__init__(unslice=unslice, mode=mode, ds_id=ds_id)

    def _unslice_batch(self, slices: tuple[Any, ...], key: str) -> Any:
        return get_backend(slices[0]).reduce_mean(stack(slices, axis=0))


def sanity_assert_slicers(slicers: Sequence[Slicer]) -> None:
    """Check that no key is sliced, or unsliced, by two slicers at once.

    Raises:
        ValueError: Naming the key and the slicers that claim it.
    """
    for attr, verb in (("slice_inputs", "sliced"), ("unslice_inputs", "un-sliced")):
        owner: dict[str, str] = {}
        for slicer in slicers:
            for key in getattr(slicer, attr):
                if key in owner:
                    raise ValueError(f"Key {key!r} is {verb} by both {owner[key]} and {type(slicer).__name__}; "
                                     "each key may be handled by one slicer only.")
                owner[key] = type(slicer).__name__


def forward_slicers(slicers: Sequence[Slicer], data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Cut ``data`` into minibatches with ``slicers``; keys no slicer touches are shared by all minibatches.

    Raises:
        ValueError: If slicers disagree on the number of minibatches, or a slice key is missing.
    """
    n_slices: int | None = None
    sliced: dict[str, list[Any]] = {}
    for slicer in slicers:
        if not slicer.slice_inputs:
            continue
        missing = [key for key in slicer.slice_inputs if key not in data]
        if missing:
            raise ValueError(f"{type(slicer).__name__} slices keys {missing} that are not in the batch "
                             f"(available: {sorted(data)}).")
        minibatches = slicer.slice_batches(tuple(data[key] for key in slicer.slice_inputs))
        if n_slices is not None and len(minibatches) != n_slices:
            raise ValueError(f"Slicers disagree on the number of slices: {type(slicer).__name__} made "
                             f"{len(minibatches)}, an earlier slicer made {n_slices}. Give them matching settings.")
        n_slices = len(minibatches)
        for pos, key in enumerate(slicer.slice_inputs):
            sliced[key] = [mb[pos] for mb in minibatches]
    if n_slices is None:
        return [dict(data)]
    shared = {key: value for key, value in data.items() if key not in sliced}
    return [{**shared, **{key: values[i] for key, values in sliced.items()}} for i in range(n_slices)]


def reverse_slicers(slicers: Sequence[Slicer], data: Sequence[Mapping[str, Any]],
                    original_data: Mapping[str, Any]) -> dict[str, Any]:
    """Fuse minibatch results back into one batch: unsliced keys merged, all else taken from ``original_data``.

    A key to unslice that the minibatches do not hold (an op of another mode writes it) is skipped, as in
    FastEstimator: slicers are not promised all their keys.

    Raises:
        ValueError: If a key to unslice is held by some minibatch results but not by others.
    """
    result = dict(original_data)
    for slicer in slicers:
        for key in slicer.unslice_inputs:
            missing = [i for i, mb in enumerate(data) if key not in mb]
            if len(missing) == len(data):
                continue
            if missing:
                raise ValueError(f"{type(slicer).__name__} un-slices {key!r}, but minibatch(es) {missing} lack it.")
            result[key] = slicer.unslice_batches(tuple(mb[key] for mb in data), key)
    return result
