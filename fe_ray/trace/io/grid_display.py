"""GridDisplay (trace): draw several BatchDisplay columns of a batch side by side, as FastEstimator 1.7's
``fe.trace.io.GridDisplay``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fe_ray.trace.freq import parse_freq
from fe_ray.trace.io.batch_display import BatchDisplay, DisplayTrace, positive_limit, save_folder
from fe_ray.trace.trace import Data
from fe_ray.util.base import to_list
from fe_ray.util.img_data import GridDisplay as GridFigure


class GridDisplay(DisplayTrace):
    """Draw the columns of several :class:`BatchDisplay` traces side by side (``fe.util.GridDisplay``) every
    ``frequency`` steps or epochs: the image, its mask, the prediction, ... of each element in one row.

    Only the columns' keys and drawing arguments are used: their ``batch_limit``, ``frequency``, ``save_dir``,
    ``mode`` and ``ds_id`` give way to this trace's (give the columns to this trace only, not to the Estimator).
    Each drawn batch is shown (in a notebook, inline; elsewhere written to a temporary PNG whose path is printed),
    or written into ``save_dir`` as ``<title>_<mode>_<epoch>_<batch_idx>.png``.

    Differences from FastEstimator 1.7: as :class:`BatchDisplay`'s (PNG files, not plotly HTML).

    Args:
        columns: The BatchDisplay traces whose columns to draw, left to right.
        batch_limit: Draw at most this many elements of a batch; None: all.
        frequency: When to draw: an int N or '<N>s' (every N steps: training steps in training, batches in
            evaluation / test), '<N>e' (every N epochs), 'step', 'epoch'; None: the Estimator's ``log_steps``.
        save_dir: A folder to write the figures into (created now) instead of showing them.
        title: The start of the file names written into ``save_dir``.
        mode: Mode(s) to run in ('train', 'eval', 'test', 'infer'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.

    Raises:
        ValueError: If there are no columns, or ``batch_limit`` or ``frequency`` is invalid.
        TypeError: If a column is not a BatchDisplay trace.
    """

    def __init__(self, columns: Sequence[BatchDisplay], batch_limit: int | None = None,
                 frequency: None | int | str = None, save_dir: str | None = None, title: str = "grid",
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        columns = to_list(columns)
        if not columns:
            raise ValueError("GridDisplay needs at least one column: a list of fe.trace.io.BatchDisplay traces.")
        wrong = [type(column).__name__ for column in columns if not isinstance(column, BatchDisplay)]
        if wrong:
            raise TypeError(f"GridDisplay columns must be fe.trace.io.BatchDisplay traces, got {wrong}; the "
                            "fe.util.BatchDisplay figures are drawn from them.")
        super().__init__(inputs=sorted({key for column in columns for key in column.inputs}), mode=mode,
                         ds_id=ds_id)
        self._columns = columns
        self.batch_limit = positive_limit(batch_limit, "GridDisplay")
        self.frequency = None if frequency is None else parse_freq(frequency, "GridDisplay frequency")
        self.save_dir = save_folder(save_dir)
        self.title = title

    def on_begin(self, data: Data) -> None:
        super().on_begin(data)
        for column in self._columns:  # they read the run's mode and epoch (their errors name them)
            column.system = self.system

    @property
    def file_title(self) -> str:
        return self.title

    def make_display(self, data: Data) -> GridFigure:
        return GridFigure(columns=[column.make_image(data, batch_limit=self.batch_limit) for column in self._columns])


__all__ = ["GridDisplay"]
