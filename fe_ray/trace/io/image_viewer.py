"""ImageViewer: show images and displays found in a run's data at the end of each epoch."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

from fe_ray.trace.io.image_saver import image_items, is_figure
from fe_ray.trace.trace import Data, Trace
from fe_ray.util.environment import in_notebook
from fe_ray.util.img_data import Display, ImageDisplay, check_matplotlib, present_figure

PREFIX = "FastEstimator-ImageViewer"


class ImageViewer(Trace):
    """Show the values of ``inputs`` at the end of each epoch (and at the end of the run) of its modes.

    A value that is an ``fe.util`` display (:class:`~fe_ray.util.img_data.ImageDisplay`, ``BatchDisplay``,
    ``GridDisplay``) is shown as one figure; a batch of images (a tensor or list with the batch first) as one
    ImageDisplay per element titled ``<key>_<i>``. Keys missing from the event's data are skipped.

    In a Jupyter notebook the figures appear inline as PNG images. Elsewhere fe_ray draws on matplotlib's Agg
    canvas, which has no window: each figure is written as ``<key>_<mode>_epoch_<epoch>[_elem_<i>].png`` into a
    temporary folder made for this trace (``viewer_dir``), and its title and path are printed
    (``FastEstimator-ImageViewer: ...``), so the run never blocks on a window.

    Differences from FastEstimator 1.7: matplotlib instead of plotly (see :mod:`fe_ray.util.img_data`), hence no
    interactive figures: ``interactive`` is accepted (True, False or 'auto') and only checked; the files outside a
    notebook replace plotly's browser window; Summaries are drawn with :func:`~fe_ray.summary.logs.plot_logs`.

    Args:
        inputs: Key(s) of the displays or image batches to show.
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        interactive: FastEstimator's plotly interactivity; accepted for compatibility (figures are static).
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude (an fe_ray extra, after FastEstimator's
            arguments).

    Raises:
        ValueError: If ``interactive`` is not True, False or 'auto', or ``inputs`` is empty.
        ImportError: If matplotlib is not installed (``pip install matplotlib``).
    """

    checkpointed = False  # no state

    def __init__(self, inputs: str | Iterable[str], mode: None | str | Iterable[str] = ("eval", "test"),
                 interactive: bool | str = "auto", ds_id: None | str | Iterable[str] = None) -> None:
        check_matplotlib("ImageViewer")
        if interactive not in (True, False, "auto") or not isinstance(interactive, (bool, str)):
            raise ValueError(f"ImageViewer interactive must be True, False or 'auto', got {interactive!r}.")
        super().__init__(inputs=inputs, mode=mode, ds_id=ds_id)
        if not self.inputs:
            raise ValueError("ImageViewer needs the key(s) of the images to show as inputs, got none.")
        self.interactive = interactive
        self.viewer_dir: str | None = None  # made when the first figure needs a file

    def on_epoch_end(self, data: Data) -> None:
        self._display_images(data)

    def on_end(self, data: Data) -> None:
        self._display_images(data)

    def _display_images(self, data: Data) -> list[str | None]:
        """Show every input found in ``data``; return the files written (None for a figure shown inline)."""
        shown = []
        for key in self.inputs:
            value = data.get(key)
            if value is None:
                continue
            stem = f"{key}_{self.system.mode}_epoch_{self.system.epoch_idx}"
            for suffix, item in image_items(key, value, "ImageViewer"):
                if is_figure(item):  # Summaries, drawn by plot_logs
                    figure, title = item, key
                elif isinstance(item, Display):
                    figure, title = item.prepare(), item.title or key
                else:
                    title = f"{key}_{suffix.rsplit('_', 1)[-1]}"
                    figure = ImageDisplay(image=item, title=title).prepare()
                folder = None if in_notebook() else self._folder()  # inline figures need no folder
                shown.append(present_figure(figure, title, folder=folder, file_name=f"{stem}{suffix}.png",
                                            prefix=PREFIX))
        return shown

    def _folder(self) -> str:
        if self.viewer_dir is None or not os.path.isdir(self.viewer_dir):
            self.viewer_dir = tempfile.mkdtemp(prefix="fe_ray_image_viewer_")
        return self.viewer_dir

    def __repr__(self) -> str:
        return f"ImageViewer(inputs={self.inputs}, mode={self.mode}, interactive={self.interactive!r})"
