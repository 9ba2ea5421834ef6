"""ImageSaver: write images and displays found in a run's data as PNG files at the end of each epoch."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fe_ray.summary.summary import Summary
from fe_ray.trace.trace import Data, Trace
from fe_ray.util.img_data import Display, ImageDisplay, check_matplotlib, save_figure

PREFIX = "FastEstimator-ImageSaver"


def is_figure(item: Any) -> bool:
    """Whether ``item`` is a matplotlib Figure (checked by name: matplotlib is imported only to draw)."""
    return type(item).__name__ == "Figure" and type(item).__module__.startswith("matplotlib")


def image_items(key: str, value: Any, what: str) -> Iterator[tuple[str, Any]]:
    """The figures to draw for ``value`` found under ``key``: ('', the display) for a display, ('', the matplotlib
    Figure of :func:`~fe_ray.summary.logs.plot_logs`) for a Summary or a list of them (what LabelTracker and
    InstanceTracker write), else one ('_elem_<i>', image) per element of an image batch (torch tensors keep their
    type for the channel-first rule).

    Raises:
        TypeError: If ``value`` is neither a display, Summaries nor a batch of images.
    """
    if isinstance(value, Display):
        yield "", value
        return
    summaries = [value] if isinstance(value, Summary) else value if isinstance(value, (list, tuple)) else []
    if summaries and all(isinstance(item, Summary) for item in summaries):
        from fe_ray.summary.logs import plot_logs

        yield "", plot_logs(list(summaries))
        return
    from fe_ray.backend import get_framework, to_number

    if get_framework(value) == "tf":
        value = to_number(value)
    shape = getattr(value, "shape", None)
    if isinstance(value, (str, bytes, Mapping)) or (shape is not None and len(shape) == 0) or (
            shape is None and not isinstance(value, (list, tuple))):
        raise TypeError(f"{what} found {type(value).__name__} under {key!r}: it draws fe.util displays "
                        "(ImageDisplay, BatchDisplay, GridDisplay) and batches of images (a tensor / array with the "
                        "batch first, or a list of images).")
    for idx, image in enumerate(value):
        yield f"_elem_{idx}", image


class ImageSaver(Trace):
    """Save the values of ``inputs`` as PNG files at the end of each epoch (and at the end of the run) of its modes.

    A value that is an ``fe.util`` display (:class:`~fe_ray.util.img_data.ImageDisplay`, ``BatchDisplay``,
    ``GridDisplay``) becomes ``<save_dir>/<key>_<mode>_epoch_<epoch>.png``; a batch of images (a tensor or list with
    the batch first) becomes one file per element, ``<key>_<mode>_epoch_<epoch>_elem_<i>.png``, each an
    ImageDisplay titled with the key. Keys missing from the event's data are skipped. Values are read from the
    epoch-end data, so another trace writes them there (``data.write_without_log(key, display)``) and must run
    before: it does when it lists the key in its ``outputs``.

    Differences from FastEstimator 1.7: the figures are drawn with matplotlib (see :mod:`fe_ray.util.img_data`),
    and ``dpi`` sets the files' resolution: a figure laid out W x H pixels is written W * dpi / 100 x H * dpi / 100
    pixels. A Summary or a list of them (LabelTracker, InstanceTracker) is drawn with
    :func:`~fe_ray.summary.logs.plot_logs`, as FastEstimator draws them with ``visualize_logs``; any other value
    that is neither a display nor an image batch raises TypeError. ``save_dir`` is created when the first file is
    written.

    Args:
        inputs: Key(s) of the displays or image batches to save.
        save_dir: Folder of the files.
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        dpi: Resolution (dots per inch of a 100-pixels-per-inch layout); an fe_ray extra, after FastEstimator's
            arguments.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.

    Raises:
        ValueError: If ``dpi`` is not positive or ``inputs`` is empty.
        ImportError: If matplotlib is not installed (``pip install matplotlib``).
    """

    checkpointed = False  # no state

    def __init__(self, inputs: str | Iterable[str], save_dir: str = os.getcwd(),
                 mode: None | str | Iterable[str] = ("eval", "test"), dpi: int = 300,
                 ds_id: None | str | Iterable[str] = None) -> None:
        check_matplotlib("ImageSaver")
        if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not dpi > 0:
            raise ValueError(f"ImageSaver dpi must be a positive number, got {dpi!r}.")
        super().__init__(inputs=inputs, mode=mode, ds_id=ds_id)
        if not self.inputs:
            raise ValueError("ImageSaver needs the key(s) of the images to save as inputs, got none.")
        self.save_dir = save_dir
        self.dpi = dpi

    def on_epoch_end(self, data: Data) -> None:
        self._save_images(data)

    def on_end(self, data: Data) -> None:
        self._save_images(data)

    def _save_images(self, data: Data) -> list[str]:
        written = []
        for key in self.inputs:
            value = data.get(key)
            if value is None:
                continue
            stem = f"{key}_{self.system.mode}_epoch_{self.system.epoch_idx}"
            for suffix, item in image_items(key, value, "ImageSaver"):
                path = os.path.join(self.save_dir, f"{stem}{suffix}.png")
                if is_figure(item):  # Summaries, drawn by plot_logs
                    path = save_figure(item, path, dpi=self.dpi, verbose=False)
                else:
                    display = item if isinstance(item, Display) else ImageDisplay(image=item, title=key)
                    path = display.save(path, dpi=self.dpi)
                print(f"{PREFIX}: saved image to {path}", flush=True)
                written.append(path)
        return written
