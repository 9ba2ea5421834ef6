"""SlidingSlicer: cut a batch into (possibly overlapping) windows and fuse the per-window results back."""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.backend import cast, concat, flip, get_shape, squeeze, to_number
from fe_ray.slicer.slicer import Slicer
from fe_ray.util import to_list

PAD_MODES = ("drop", "partial", "constant", "nopad", "mirror")
UNSLICE_MODES = ("sum", "avg")

Window = tuple[int, int]  # (start, stop) along one axis; stop may pass the data's end where padding fills it


class SlidingSlicer(Slicer):
    """Cut each ``slice`` key into windows of ``window_size`` moved by ``strides``; overlap-add them back.

    The window has one entry per axis of the data; -1 keeps an axis whole. E.g. ``window_size=[-1, -1, 64, 64]``
    feeds a batch of large channel-first images ``[B, C, W, H]`` to a model as 64 x 64 tiles. Windows start at 0,
    ``stride``, ``2 * stride``, ... along each axis until one reaches the end; the minibatches are every combination
    of the per-axis windows, the first axis varying slowest. The window that runs past the end is handled by
    ``pad_mode``:

    * ``'drop'``: it is dropped (the tail of the axis is not seen by the ops).
    * ``'partial'``: it is cut short at the end (that minibatch is smaller).
    * ``'constant'``: the data is padded at the end with ``pad_val`` so that it fits.
    * ``'nopad'``: it is moved back to end exactly at the data's end (so it overlaps its neighbour more).
    * ``'mirror'``: the data is padded at the end with its own reflection (numpy's ``'reflect'``: the edge element
      is not repeated).

    Un-slicing places each piece where its window was cut and fuses overlaps by ``unslice_mode`` (``'sum'`` or
    ``'avg'``); cells no window covered (gaps when ``strides > window_size``, or a dropped tail) get ``pad_val``,
    and padding is cut away again. The result has the framework and dtype of the pieces (``'avg'`` of integer pieces
    gives float32), on the first piece's device; it is a new tensor, detached from any autograd graph.

    Differences from FastEstimator 1.7 (deliberate):

    * A window shorter than its axis is honoured even when the stride is at least the axis length (FastEstimator
      then keeps the whole axis instead); ``'drop'`` with a window longer than its axis raises a ValueError instead
      of keeping the whole axis as one partial window.
    * ``strides`` must be 0 exactly where ``window_size`` is -1 (FastEstimator silently keeps an axis whole for a
      positive window with stride 0, and mis-slices a -1 window with a positive stride).
    * ``'mirror'`` pads every sliding axis, at any rank (FastEstimator's torch path needs rank > 2 and never pads the
      first two axes), and pads longer than the axis reflect repeatedly, as ``numpy.pad`` does.
    * Axes with window -1 take their un-sliced size from the pieces, so a model may change them (e.g. image
      channels in, class channels out); FastEstimator takes every size from the sliced input (or
      ``unslice_shape``). Several ``slice`` keys must agree on the sizes of the sliding axes only.
    * ``'avg'`` keeps floating-point pieces' dtype (FastEstimator always returns float32), and numpy pieces fuse to
      a numpy array (FastEstimator returns a TF tensor).
    * There is no TF multi-replica bookkeeping: fe_ray's replicas each run their own in-process Network.

    The shape recorded while slicing is only used to un-slice the same step, so there is no state to checkpoint:
    :meth:`state_dict` is empty, as for the other slicers.

    Args:
        window_size: The window's length along each axis of the data, or -1 to keep that axis whole.
        strides: How far the window moves along each axis: an int for every sliding axis, or one entry per axis
            (0 where ``window_size`` is -1). The default ``()`` uses ``window_size``: windows tile without overlap.
            Smaller strides overlap windows; larger ones skip data.
        pad_mode: How to treat the window running past the end of an axis: one of :data:`PAD_MODES` (see above).
        pad_val: The padding value for ``'constant'``, and the value of un-sliced cells no window covered.
        slice: Key(s) to cut into windows; keys not cut are shared by every minibatch. Several keys must have the
            same sizes along the sliding axes.
        unslice: Key(s) to fuse back; the default ``()`` means the ``slice`` keys, None means none.
        unslice_mode: How to fuse overlapping windows: ``'avg'`` (mean of the pieces covering a cell) or ``'sum'``.
        unslice_shape: The fused shape, required when this slicer un-slices without slicing; otherwise the shape
            of the sliced input is used at every step.
        squeeze_window: Remove the axes whose window is 1 from each minibatch (and restore them when un-slicing),
            e.g. to feed a 3D volume to a 2D model one plane at a time.
        mode: Mode(s) in which to slice ("!mode" to exclude).
        ds_id: Dataset id(s) in which to slice ("!id" to exclude).

    Raises:
        ValueError: If an argument is invalid, naming the value and the valid choices.
    """

    def __init__(self, window_size: int | Sequence[int], strides: int | Sequence[int] = (), pad_mode: str = "drop",
                 pad_val: int | float = 0.0, slice: None | str | Sequence[str] = None,
                 unslice: None | str | Sequence[str] = (), unslice_mode: str = "avg",
                 unslice_shape: Sequence[int] | None = None, squeeze_window: bool = False,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        if isinstance(unslice, tuple) and not unslice:
            unslice = slice  # FastEstimator's default: fuse back the keys that were cut
        super().__init__(slice=slice, unslice=unslice, mode=mode, ds_id=ds_id)
        self.window_size: list[int] = _int_list(window_size, "window_size", minimum=-1)
        if not self.window_size or 0 in self.window_size:
            raise ValueError(f"SlidingSlicer window_size must hold one positive int (or -1 for a whole axis) per axis "
                             f"of the data, e.g. window_size=[-1, 64, 64]; got {window_size!r}.")
        self.strides: list[int] = self._check_strides(strides)
        if pad_mode not in PAD_MODES:
            raise ValueError(f"SlidingSlicer pad_mode must be one of {list(PAD_MODES)}, got {pad_mode!r}.")
        self.pad_mode = pad_mode
        if not isinstance(pad_val, numbers.Real) or isinstance(pad_val, bool):
            raise ValueError(f"SlidingSlicer pad_val must be a number, got {pad_val!r}.")
        self.pad_val = pad_val
        if unslice_mode not in UNSLICE_MODES:
            raise ValueError(f"SlidingSlicer unslice_mode must be one of {list(UNSLICE_MODES)}, got {unslice_mode!r}.")
        self.unslice_mode = unslice_mode
        self.static_unslice_shape = unslice_shape is not None
        self.unslice_shape: list[int] | None = None
        if unslice_shape is not None:
            shape = _int_list(unslice_shape, "unslice_shape", minimum=1)
            if len(shape) != len(self.window_size):
                raise ValueError(f"SlidingSlicer unslice_shape {unslice_shape!r} needs one positive int per entry "
                                 f"of window_size {self.window_size}.")
            self.unslice_shape = shape
        if self.unslice_inputs and not self.slice_inputs and not self.static_unslice_shape:
            raise ValueError(f"SlidingSlicer un-slices {self.unslice_inputs} without slicing anything, so it needs "
                             "the fused shape: pass unslice_shape=[...], or let this slicer do the slicing too.")
        if not isinstance(squeeze_window, bool):
            raise ValueError(f"SlidingSlicer squeeze_window must be True or False, got {squeeze_window!r}.")
        self.squeeze_window = squeeze_window
        self.auto_squeeze: list[int] = [ax for ax, size in enumerate(self.window_size) if squeeze_window and size == 1]

    def _check_strides(self, strides: int | Sequence[int]) -> list[int]:
        if isinstance(strides, int) and not isinstance(strides, bool):
            if strides < 1:
                raise ValueError(f"SlidingSlicer strides must be a positive int (or one int per axis), got "
                                 f"{strides!r}.")
            return [strides if size > 0 else 0 for size in self.window_size]
        result = _int_list(strides, "strides", minimum=0)
        if not result:
            return [size if size > 0 else 0 for size in self.window_size]
        wrong = [ax for ax, (size, step) in enumerate(zip(self.window_size, result)) if (size == -1) != (step == 0)]
        if len(result) != len(self.window_size) or wrong:
            raise ValueError(f"SlidingSlicer strides {strides!r} need one entry per window_size entry "
                             f"{self.window_size}: a positive step for each sliding axis and 0 where the window is -1 "
                             f"(axes {wrong} break this); or pass a single int.")
        return result

    # ------------------------------------------------------------------ geometry
    def _axis_windows(self, axis: int, length: int) -> list[Window]:
        """The (start, stop) of each window along ``axis`` for data of ``length`` there."""
        size, step = self.window_size[axis], self.strides[axis]
        if size == -1:
            return [(0, length)]
        if self.pad_mode == "nopad" and length < size:
            raise ValueError(f"SlidingSlicer pad_mode 'nopad' needs the data to be at least as long as the window: "
                             f"axis {axis} has length {length} but window_size is {size}. Use pad_mode 'partial' or "
                             "'constant', or a smaller window.")
        windows: list[Window] = []
        for start in range(0, length, step):
            stop = start + size
            if stop > length:
                if self.pad_mode == "drop":
                    break  # every later window would run past the end too
                if self.pad_mode == "partial":
                    stop = length
                elif self.pad_mode == "nopad":
                    start, stop = length - size, length
            windows.append((start, stop))
            if stop >= length:
                break
        if not windows:
            raise ValueError(f"SlidingSlicer found no window along axis {axis}: the data has length {length} there "
                             f"but window_size is {size} with pad_mode {self.pad_mode!r}. Use pad_mode 'partial' or "
                             "'constant', or a smaller window.")
        return windows

    def _layout(self, shape: Sequence[int]) -> tuple[list[tuple[Any, ...]], list[int]]:
        """The index of every window (first axis slowest) and the padding each axis needs at its end."""
        per_axis = [self._axis_windows(axis, length) for axis, length in enumerate(shape)]
        pads = [max(0, axis_windows[-1][1] - length) for axis_windows, length in zip(per_axis, shape)]
        cuts = [tuple(slice(start, stop) for start, stop in combo) for combo in itertools.product(*per_axis)]
        return cuts, pads

    def _shape_of(self, batch: Any) -> list[int]:
        shape = list(get_shape(batch))
        if len(shape) != len(self.window_size):
            raise ValueError(f"SlidingSlicer window_size {self.window_size} does not fit data of shape {shape}: they "
                             "must have the same rank (use -1 for axes to keep whole).")
        if any(size is None for size in shape):
            raise ValueError(f"SlidingSlicer needs data of known shape, got {shape}; slice concrete (eager) tensors.")
        return [int(size) for size in shape]

    # ------------------------------------------------------------------ slicing
    def slice_batches(self, batches: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Cut each of ``batches`` (one per slice key) into the same windows.

        Raises:
            ValueError: If the keys differ in length along a sliding axis.
        """
        sliding = [ax for ax, size in enumerate(self.window_size) if size != -1]
        shapes = [self._shape_of(batch) for batch in batches]
        sizes = {key: [shape[ax] for ax in sliding] for key, shape in zip(self.slice_inputs, shapes)}
        if len({tuple(v) for v in sizes.values()}) > 1:
            raise ValueError(f"SlidingSlicer keys must share their lengths along the sliding axes {sliding}, got "
                             f"{sizes}; slice keys of different sizes with separate slicers.")
        return super().slice_batches(batches)

    def _slice_batch(self, batch: Any) -> list[Any]:
        shape = self._shape_of(batch)
        if not self.static_unslice_shape:
            self.unslice_shape = shape  # needed to un-slice this step's results
        cuts, pads = self._layout(shape)
        padded = self._pad(batch, shape, pads)
        pieces = [padded[cut] for cut in cuts]  # basic indexing works on numpy, torch and tf alike
        for ax in reversed(self.auto_squeeze):
            pieces = [squeeze(piece, axis=ax) for piece in pieces]
        return pieces

    def _pad(self, batch: Any, shape: list[int], pads: list[int]) -> Any:
        """Extend ``batch`` at the end of each axis by ``pads`` cells, per ``pad_mode`` (in its own framework)."""
        if self.pad_mode not in ("constant", "mirror"):
            return batch
        for axis, pad in enumerate(pads):
            if pad == 0:
                continue
            if self.pad_mode == "constant":
                filler_shape = list(shape)
                filler_shape[axis] = pad
                # cast() to the batch gives its framework, dtype and device; ints truncate pad_val as TF's pad does
                batch = concat([batch, cast(np.full(filler_shape, self.pad_val), batch)], axis=axis)
            else:
                batch = _reflect_end(batch, axis, pad)
            shape = list(shape)
            shape[axis] += pad
        return batch

    # ------------------------------------------------------------------ un-slicing
    def _unslice_batch(self, slices: tuple[Any, ...], key: str) -> Any:
        if self.unslice_shape is None:
            raise ValueError(f"SlidingSlicer cannot un-slice {key!r}: it has sliced nothing yet and has no "
                             "unslice_shape; give unslice_shape=[...] or slice with this slicer first.")
        pieces = [np.asarray(to_number(piece)) for piece in slices]
        for ax in self.auto_squeeze:
            pieces = [np.expand_dims(piece, ax) for piece in pieces]
        if any(piece.ndim != len(self.window_size) for piece in pieces):
            raise ValueError(f"SlidingSlicer cannot un-slice {key!r}: its pieces have shapes "
                             f"{sorted({piece.shape for piece in pieces})} but window_size {self.window_size} needs "
                             f"rank {len(self.window_size) - len(self.auto_squeeze)}.")
        # Whole axes (-1) take the pieces' size: the ops may have changed them (e.g. the number of channels).
        target = [int(pieces[0].shape[ax]) if size == -1 else self.unslice_shape[ax]
                  for ax, size in enumerate(self.window_size)]
        cuts, pads = self._layout(target)
        if len(cuts) != len(pieces):
            raise ValueError(f"SlidingSlicer cannot un-slice {key!r}: it got {len(pieces)} pieces, but a shape of "
                             f"{target} with window_size {self.window_size}, strides {self.strides} and pad_mode "
                             f"{self.pad_mode!r} makes {len(cuts)} windows.")
        kind = pieces[0].dtype.kind
        padded_shape = [length + pad for length, pad in zip(target, pads)]
        total = np.zeros(padded_shape, dtype=np.complex128 if kind == "c" else np.float64 if
                         kind == "f" or self.unslice_mode == "avg" else np.int64)
        counts = np.zeros(padded_shape, dtype=np.int64)
        for pos, (cut, piece) in enumerate(zip(cuts, pieces)):
            if total[cut].shape != piece.shape:
                raise ValueError(f"SlidingSlicer cannot un-slice {key!r}: piece {pos} has shape {list(piece.shape)} "
                                 f"but its window {cut} of the shape {target} has shape {list(total[cut].shape)}; "
                                 "the ops must keep each window's size along the sliding axes.")
            total[cut] += piece
            counts[cut] += 1
        if self.unslice_mode == "avg":
            total = total / np.maximum(counts, 1)
        total[counts == 0] = self.pad_val
        fused = np.ascontiguousarray(total[tuple(slice(0, length) for length in target)])
        reference = slices[0]
        if self.unslice_mode == "avg" and kind not in "fc":
            reference = cast(reference, "float32")
        return cast(fused, reference)  # the pieces' framework, dtype (float32 for 'avg' of ints) and device


def _int_list(value: int | Sequence[int] | None, name: str, minimum: int) -> list[int]:
    """``value`` as a list of ints, each at least ``minimum``; ValueError naming ``name`` otherwise."""
    items = to_list(value)
    if any(not isinstance(item, (int, np.integer)) or isinstance(item, bool) or item < minimum for item in items):
        raise ValueError(f"SlidingSlicer {name} must be an int or a sequence of ints, each at least {minimum}; "
                         f"got {value!r}.")
    return [int(item) for item in items]


def _reflect_end(batch: Any, axis: int, pad: int) -> Any:
    """Append ``pad`` cells to ``axis`` mirroring the data about its last cell, like ``numpy.pad(mode='reflect')``."""
    index: list[Any] = [slice(None)] * len(get_shape(batch))
    while pad > 0:
        length = int(get_shape(batch)[axis])
        if length == 1:
            # A single cell has nothing to reflect: numpy repeats it
            index[axis] = slice(0, 1)
            piece, chunk = batch[tuple(index)], 1
        else:
            # Reflect at most length - 1 cells at a time; longer pads reflect the already padded data again
            chunk = min(pad, length - 1)
            index[axis] = slice(length - 1 - chunk, length - 1)
            piece = flip(batch[tuple(index)], axis)
        batch = concat([batch, piece], axis=axis)
        pad -= chunk
    return batch


__all__ = ["PAD_MODES", "UNSLICE_MODES", "SlidingSlicer"]
