"""FastEstimator 1.7's ``fe.util.BatchDisplay`` (a column of panels, one per batch element) and ``GridDisplay``
(columns side by side)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.util.base import to_list
from fe_ray.util.img_data.figure import Display, _axes_at, _finish, in_notebook, new_figure, set_column_title
from fe_ray.util.img_data.image import ImageDisplay
from fe_ray.util.img_data.values import _framework, _split_labels
from fe_ray.util.tensors import to_number

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _split_batch(value: Any, name: str) -> list[Any] | None:
    """The elements of a batched argument (torch tensors stay torch: their channel-first rule needs the type)."""
    if value is None:
        return None
    framework = _framework(value)
    if framework == "tf":
        value = to_number(value)
    if framework == "torch" or isinstance(value, np.ndarray):
        if len(value.shape) == 0:
            raise ValueError(f"BatchDisplay {name} must be a batch (its first axis the batch), got a 0-d value "
                             f"{value!r}.")
        return list(value)
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"BatchDisplay {name} must be a batch: a tensor / array with the batch first or a list, got "
                    f"{type(value).__name__}.")


class BatchDisplay(Display):
    """A column of :class:`ImageDisplay` panels, one per element of a batch.

    See the module docstring for the differences from FastEstimator 1.7 (matplotlib instead of plotly).

    Args:
        image: A batch of images (N, H, W[, C]); 4-D torch tensors are channel-first (see ImageDisplay).
        text: One text per element (a list or a tensor of N values); one string is written on every panel.
        masks: A batch of masks (N, H, W[, C]), optionally ``(masks, [label per mask channel])``.
        bboxes: Per element, its boxes (a tensor (N, B, 4|5), or a list of per-element box lists / tensors).
        keypoints: A batch of keypoints (N, 2) or (N, K, 2), optionally ``(keypoints, [label per keypoint])``.
        title: The column's title.
        mask_threshold: When given, masks become 1 where above it and 0 elsewhere.
        color_map: As ImageDisplay's.

    Raises:
        ValueError: If the batched arguments have different lengths, or an element is invalid (see ImageDisplay).
        TypeError: If a batched argument is not a batch.
    """

    def __init__(self, image: Any = None, text: Any = None, masks: Any = None, bboxes: Any = None,
                 keypoints: Any = None, title: str | None = None, mask_threshold: float | None = None,
                 color_map: str | tuple[str, str] = ("gray", "turbo")) -> None:
        masks, mask_labels = _split_labels(masks)
        keypoints, keypoint_labels = _split_labels(keypoints)
        shared_text = text if isinstance(text, (str, bytes)) else None
        columns = {"image": _split_batch(image, "image"),
                   "text": None if shared_text is not None else _split_batch(text, "text"),
                   "masks": _split_batch(masks, "masks"), "bboxes": _split_batch(bboxes, "bboxes"),
                   "keypoints": _split_batch(keypoints, "keypoints")}
        lengths = {name: len(values) for name, values in columns.items() if values is not None}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"BatchDisplay arguments must have the same batch size, got {lengths}.")
        size = next(iter(lengths.values()), 1 if shared_text is not None else 0)
        self.batch: list[ImageDisplay] = []
        for idx in range(size):
            item = {name: None if values is None else values[idx] for name, values in columns.items()}
            mask, keypoint = item["masks"], item["keypoints"]
            self.batch.append(ImageDisplay(
                image=item["image"], text=shared_text if shared_text is not None else item["text"],
                masks=(mask, mask_labels) if mask_labels and mask is not None else mask, bboxes=item["bboxes"],
                keypoints=(keypoint, keypoint_labels) if keypoint_labels and keypoint is not None else keypoint,
                title=None, mask_threshold=mask_threshold, color_map=color_map))
        self.batch_size = len(self.batch) or 1
        self.title = title or ""

    def prepare(self, fig: Figure | None = None, col: int | None = None, col_width: int = 400) -> Figure:
        """Draw the panels into column ``col`` (1-based, default 1) of ``fig``; without ``fig``, into a new figure
        ``col_width`` pixels wide and ``col_width * batch_size`` high (as FastEstimator's, margins included), with
        one panel per element and ``title`` above the first.

        Returns:
            The figure.
        """
        own = fig is None
        if own:
            fig = new_figure(col_width, col_width * self.batch_size, self.batch_size, 1)
            set_column_title(_axes_at(fig, (1, 1)), self.title, col_width)
        for row, element in enumerate(self.batch, start=1):
            element.prepare(fig=fig, axis=(row, col or 1), col_width=col_width)
        if own:
            _finish(fig)
        return fig


class GridDisplay(Display):
    """Displays side by side: each column an :class:`ImageDisplay` or a :class:`BatchDisplay` (all of one batch
    size), titled with its title.

    An fe_ray addition: ``title`` is the columns' titles joined with ' | ' (FastEstimator's GridDisplay has none),
    used to name the figure when it is shown without a path.

    Args:
        columns: The columns, left to right.

    Raises:
        ValueError: If there are no columns, BatchDisplays have different batch sizes, or ImageDisplays are mixed
            with BatchDisplays of more than one element.
        TypeError: If a column is neither an ImageDisplay nor a BatchDisplay.
    """

    def __init__(self, columns: Sequence[BatchDisplay | ImageDisplay]) -> None:
        columns = to_list(columns)
        if not columns:
            raise ValueError("GridDisplay needs at least one column (an ImageDisplay or a BatchDisplay).")
        wrong = [type(col).__name__ for col in columns if not isinstance(col, (ImageDisplay, BatchDisplay))]
        if wrong:
            raise TypeError(f"GridDisplay columns must be ImageDisplay or BatchDisplay objects, got {wrong}.")
        sizes = [1 if isinstance(col, ImageDisplay) else col.batch_size for col in columns]
        if len(set(sizes)) > 1:
            raise ValueError(f"GridDisplay columns must have one batch size (ImageDisplay: 1), got {sizes}; an "
                             "ImageDisplay cannot sit beside a BatchDisplay of several elements.")
        self.batch_size = sizes[0]
        self.columns = columns
        self.title = " | ".join(col.title for col in columns if col.title)

    def prepare(self) -> Figure:
        """A new figure ``min(max_width, 280 * columns)`` pixels wide (max_width 1000 in a notebook, else 1500)
        and ``int(width * max(batch_size / columns, 0.65))`` high, as FastEstimator's.

        Returns:
            The figure.
        """
        n_cols = len(self.columns)
        width = min(1000 if in_notebook() else 1500, 280 * n_cols)
        height = int(width * max(self.batch_size / n_cols, 0.65))
        col_width = width // n_cols
        fig = new_figure(width, height, self.batch_size, n_cols)
        for col_idx, column in enumerate(self.columns, start=1):
            set_column_title(_axes_at(fig, (1, col_idx)), column.title, col_width)
            if isinstance(column, BatchDisplay):
                column.prepare(fig=fig, col=col_idx, col_width=col_width)
            else:
                column.prepare(fig=fig, axis=(1, col_idx), col_width=col_width)
        _finish(fig)
        return fig
