"""BatchDisplay (trace): draw a batch's images, with their masks, boxes, keypoints and texts, every few steps or
epochs, as FastEstimator 1.7's ``fe.trace.io.BatchDisplay``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from fe_ray.trace.freq import Freq, parse_freq
from fe_ray.trace.trace import Data, Trace
from fe_ray.util.img_data import BatchDisplay as BatchFigure
from fe_ray.util.img_data import Display, check_matplotlib


def _key_and_labels(value: None | str | Sequence[Any], name: str) -> tuple[str | None, Sequence[str] | None]:
    """Split ``masks`` / ``keypoints`` into the key and its optional labels: ``"key"`` or ``("key", [labels])``.

    Raises:
        TypeError: If ``value`` is neither None, a key, nor a (key, labels) pair.
    """
    if value is None or isinstance(value, str):
        return value, None
    if isinstance(value, Sequence) and len(value) == 2 and isinstance(value[0], str):
        return value[0], value[1]
    raise TypeError(f"BatchDisplay {name} must be a key or a (key, [label, ...]) pair, got {value!r:.100}.")


def positive_limit(batch_limit: int | None, what: str) -> int | None:
    """``batch_limit`` checked: None (every element) or a positive int.

    Raises:
        ValueError: If it is an int below 1.
        TypeError: If it is neither None nor an int.
    """
    if batch_limit is None:
        return None
    if isinstance(batch_limit, bool) or not isinstance(batch_limit, int):
        raise TypeError(f"{what} batch_limit must be None or a positive int, got {type(batch_limit).__name__} "
                        f"{batch_limit!r:.100}.")
    if batch_limit < 1:
        raise ValueError(f"{what} batch_limit must be at least 1 (elements to draw), got {batch_limit}; pass None "
                         "to draw the whole batch.")
    return batch_limit


def save_folder(save_dir: str | None) -> str | None:
    """``save_dir`` as an absolute, normalised path, created now (as FastEstimator does), or None."""
    if save_dir is None:
        return None
    folder = os.path.normpath(os.path.abspath(save_dir))
    os.makedirs(folder, exist_ok=True)
    return folder


class DisplayTrace(Trace):
    """What BatchDisplay and GridDisplay share: when to draw (``frequency``), and where the figure goes."""

    checkpointed = False  # nothing to restore: a figure is drawn from the batch at hand
    frequency: Freq | None
    save_dir: str | None

    def on_begin(self, data: Data) -> None:
        # Checked when the run starts rather than when the trace is made, so that building (and testing) a program
        # needs no matplotlib, yet a missing one fails before any training is spent.
        check_matplotlib(type(self).__name__)
        if self.frequency is None:
            # FastEstimator's default: the logging frequency. log_steps 0 (epoch summaries only) or None (no
            # logging) draws nothing, where FastEstimator would fail on 0.
            log_steps = self.system.log_steps
            self.frequency = parse_freq(log_steps) if log_steps else Freq(False, 0)

    def on_batch_end(self, data: Data) -> None:
        # The global step during training, as the logs count; evaluation and test count their batches.
        step = self.system.global_step if self.system.mode == "train" else self.system.batch_idx
        if self.frequency is not None and step is not None and self.frequency.at_step(step):
            self._present(data)

    def on_epoch_end(self, data: Data) -> None:
        if self.frequency is not None and self.frequency.at_epoch(self.system.epoch_idx):
            self._present(data)

    def _present(self, data: Data) -> str | None:
        """Draw the figure of ``data`` and show it (no ``save_dir``) or write it into ``save_dir``.

        Returns:
            The file written, or None when it was shown inline in a notebook.
        """
        display = self.make_display(data)
        if self.save_dir is None:
            return display.show()
        system = self.system
        name = f"{self.file_title}_{system.mode}_{system.epoch_idx}_{system.batch_idx}.png"
        return display.show(save_path=os.path.join(self.save_dir, name))

    @property
    def file_title(self) -> str:
        """The start of the names of the files written into ``save_dir``."""
        raise NotImplementedError

    def make_display(self, data: Data) -> Display:
        """The display of ``data``'s batch."""
        raise NotImplementedError


class BatchDisplay(DisplayTrace):
    """Draw a batch as a column of images (``fe.util.BatchDisplay``) every ``frequency`` steps or epochs.

    Each drawn batch is shown (in a notebook, inline; elsewhere written to a temporary PNG whose path is printed, see
    :mod:`fe_ray.util.img_data`), or written into ``save_dir`` as ``<title>_<mode>_<epoch>_<batch_idx>.png``.

    Differences from FastEstimator 1.7: the figures are matplotlib's, so the files are PNG images where
    FastEstimator writes plotly HTML, and ``color_map`` names are matplotlib's (plotly's usual ones exist in both);
    a default frequency taken from ``log_steps=0`` draws nothing (FastEstimator fails on it); bad arguments raise
    ValueError / TypeError (FastEstimator asserts). As in FastEstimator, an epoch frequency draws from the data of
    the epoch's end, which holds only what traces write there, not a batch.

    Args:
        image: Key of a batch of images.
        text: Key of a batch of texts (one per element), written over each image.
        masks: Key of a batch of masks drawn over the images, or ``(key, [label per mask channel])``.
        bboxes: Key of a batch of bounding boxes drawn over the images.
        keypoints: Key of a batch of keypoints drawn over the images, or ``(key, [label per keypoint])``.
        mask_threshold: When given, masks become 1 where above it and 0 elsewhere.
        color_map: Colour map of grey images, or a pair (grey images, continuous masks).
        title: The column's title (and the start of file names); default: the first key given among image, text,
            masks, bboxes, keypoints.
        batch_limit: Draw at most this many elements of a batch; None: all.
        frequency: When to draw: an int N or '<N>s' (every N steps: training steps in training, batches in
            evaluation / test), '<N>e' (every N epochs), 'step', 'epoch'; None: the Estimator's ``log_steps``.
        save_dir: A folder to write the figures into (created now) instead of showing them.
        mode: Mode(s) to run in ('train', 'eval', 'test', 'infer'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.

    Raises:
        ValueError: If no key is given, or ``batch_limit`` or ``frequency`` is invalid.
        TypeError: If ``masks`` / ``keypoints`` is neither a key nor a (key, labels) pair.
    """

    def __init__(self, image: str | None = None, text: str | None = None,
                 masks: None | str | tuple[str, Sequence[str]] = None, bboxes: str | None = None,
                 keypoints: None | str | tuple[str, Sequence[str]] = None, mask_threshold: float | None = None,
                 color_map: str | tuple[str, str] = ("gray", "turbo"), title: str | None = None,
                 batch_limit: int | None = None, frequency: None | int | str = None, save_dir: str | None = None,
                 mode: None | str | Iterable[str] = None, ds_id: None | str | Iterable[str] = None) -> None:
        self._masks, self._mask_labels = _key_and_labels(masks, "masks")
        self._keypoints, self._keypoint_labels = _key_and_labels(keypoints, "keypoints")
        self._image, self._text, self._bboxes = image, text, bboxes
        keys = [key for key in (image, text, self._masks, bboxes, self._keypoints) if key is not None]
        if not keys:
            raise ValueError("BatchDisplay needs at least one key to draw: image, text, masks, bboxes or keypoints.")
        super().__init__(inputs=sorted(set(keys)), mode=mode, ds_id=ds_id)
        self._title = title or keys[0]
        self._color_map = color_map
        self._mask_threshold = mask_threshold
        self.batch_limit = positive_limit(batch_limit, "BatchDisplay")
        self.frequency = None if frequency is None else parse_freq(frequency, "BatchDisplay frequency")
        self.save_dir = save_folder(save_dir)

    @property
    def file_title(self) -> str:
        return self._title

    def make_image(self, data: Data, batch_limit: int | None = None) -> BatchFigure:
        """The ``fe.util.BatchDisplay`` of ``data``'s batch, cut to its first ``batch_limit`` elements when given
        (GridDisplay draws its columns with this).

        Raises:
            KeyError: If ``data`` lacks one of the keys (naming it and the keys there are).
        """
        def value(key: str | None) -> Any:
            if key is None:
                return None
            if key not in data:
                raise KeyError(f"BatchDisplay found no {key!r} in the data (keys: {sorted(data)}); an epoch "
                               "frequency sees only what traces write at the epoch's end, not a batch.")
            return data[key]

        masks, keypoints = value(self._masks), value(self._keypoints)
        display = BatchFigure(image=value(self._image), text=value(self._text),
                              masks=(masks, self._mask_labels) if self._mask_labels and masks is not None else masks,
                              bboxes=value(self._bboxes),
                              keypoints=(keypoints, self._keypoint_labels)
                              if self._keypoint_labels and keypoints is not None else keypoints,
                              title=self._title, mask_threshold=self._mask_threshold, color_map=self._color_map)
        if batch_limit and batch_limit < len(display.batch):
            display.batch = display.batch[:batch_limit]
            display.batch_size = batch_limit
        return display

    def make_display(self, data: Data) -> BatchFigure:
        return self.make_image(data, batch_limit=self.batch_limit)


__all__ = ["BatchDisplay"]
