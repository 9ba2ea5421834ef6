"""TensorBoard: write a run's scalars, weight histograms, images and Keras graphs as TensorBoard event files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import get_framework
from fe_ray.trace.freq import Freq
from fe_ray.trace.freq import parse_freq as parse_frequency
from fe_ray.trace.io.tensorboard_writer import (
    EventWriters,
    check_tensorflow,
    has_keras_config,
    named_weights,
    to_image_batch,
    weight_to_image,
)
from fe_ray.trace.trace import Data, Trace, to_loggable
from fe_ray.util import to_list

PREFIX = "FastEstimator-Tensorboard: "


def parse_freq(freq: None | str | int, name: str = "update_freq") -> Freq:
    """:func:`fe_ray.trace.freq.parse_freq` for a TensorBoard argument (its errors name the trace and ``name``)."""
    return parse_frequency(freq, f"TensorBoard {name}")


def scalar_value(value: Any) -> float | None:
    """``value`` as a float when it is one number (a Python/numpy number, a one-element array or tensor; bools
    count, as FastEstimator's ``is_number`` takes them), else None."""
    if isinstance(value, (str, bytes)) or value is None:
        return None
    shape = getattr(value, "shape", None)
    if shape is not None and int(np.prod(tuple(shape))) != 1:
        return None  # checked before converting, so a batch of images is never copied just to be skipped
    try:
        array = np.asarray(to_loggable(value))
    except Exception:  # noqa: BLE001 - an object numpy cannot hold is not a scalar
        return None
    if array.size != 1 or array.dtype.kind not in "biuf":
        return None
    return float(array.reshape(-1)[0])


class TensorBoard(Trace):
    """Write TensorBoard event files under ``<log_dir>/<experiment time>/<mode>`` (``train``, ``eval``, ``test``).

    What is written, at which global step (the number of training steps so far, in evaluation and testing too):

    * scalars: every value of ``data`` that is one number (logged values first, then batch values such as the loss),
      in training every ``update_freq`` steps, and at the end of every epoch of every mode (with an epoch frequency,
      only at every N-th epoch end, and nothing per step);
    * images: the keys of ``write_images``, at the same moments as the scalars, when ``data`` holds them (in
      training the batch's values; at epoch ends, what a trace logged). Accepted layouts: a batch NCHW for torch
      tensors and NHWC for anything else (numpy, TensorFlow), or the other of the two when only its channel axis has
      1, 3 or 4 channels; one image CHW (torch) or HWC (others); one grey HW image. Float (and bool) values are in
      [0, 1], uint8 in [0, 255], other integers are pixel values clipped to [0, 255];
    * weight histograms of every model (30 buckets), every ``weight_histogram_freq`` training steps or epochs, with
      ``paint_weights`` also pictures of the weights (tag ``<weight>/image``). They are read from the driver's
      models after ``system.sync_models()`` (with replicas the latest weights are pulled first, as ModelSaver does);
    * with ``write_graph``, once per run for each Sequential or functional Keras model, in the folder of the first
      mode using it at the epoch as step: its config (TensorBoard's "conceptual graph") and the op graph of its
      inference pass.

    As in FastEstimator, an int frequency counts steps (its docstring says samples, its code counts steps), and
    ``write_images`` keys are inputs of the trace, so the warm-up checks that they exist.

    Deliberate differences from FastEstimator 1.7:

    * Files are written with TensorFlow alone (``tf.summary.write`` in the ``tensorboard`` package's formats): no
      ``tensorboard``, ``torch.utils.tensorboard`` or matplotlib. TensorFlow is needed for torch runs too.
    * ``write_graph`` covers Sequential and functional Keras models only. Graphs of torch models need
      ``torch.utils.tensorboard`` and the ``tensorboard`` package, and subclassed Keras models have no config, so
      neither is drawn (a run with such models says so once); FastEstimator's graph of the whole training step is
      replaced by each model's inference graph.
    * Embeddings (``write_embeddings``, ``embedding_labels``, ``embedding_images``) need TensorBoard's projector
      files and are not supported: passing any of them raises a ValueError instead of being ignored.
    * The images of a batch are written as N images of one summary (TensorFlow's format), not tiled into one grid
      image (``torch.utils.tensorboard``'s); painted weights are scaled per image from their minimum to maximum
      (FastEstimator clips them to [0, 1]); non-finite weights are left out of histograms.
    * The run folder is named after the experiment time of the run when its first summary is written, so a run
      resumed by a :class:`~fe_ray.trace.io.RestoreWizard` (which restores that time) appends to the interrupted
      run's folders; the summaries between its last checkpoint and the interruption are written again (TensorBoard
      shows both). ``Estimator.test()`` writes into the folder of the ``fit()`` before it. The trace keeps no
      state and is not part of checkpoints.

    Args:
        log_dir: The folder holding one folder per run.
        update_freq: How often to write scalars and images: an int N or '<N>s' (every N training steps), '<N>e'
            (every N epochs), 'step' / 's', 'epoch' / 'e', or None (never: the trace then writes little).
        write_graph: Write the Keras models' graphs (see above).
        write_images: Key(s) of images to write.
        weight_histogram_freq: How often to write weight histograms, as ``update_freq``; None: never (every epoch
            if ``paint_weights``).
        paint_weights: Also write the weights as pictures when writing histograms.
        embedding_freq: How often FastEstimator writes embeddings; only checked, as embeddings are not supported.
        write_embeddings: Not supported: must be None.
        embedding_labels: Not supported: must be None.
        embedding_images: Not supported: must be None.

    Raises:
        ValueError: If a frequency is invalid or an embedding argument is given.
        TypeError: If a frequency has a wrong type.
        ImportError: If TensorFlow is not installed (``pip install tensorflow-cpu``).
    """

    checkpointed = False  # no state: the run folder comes from the System's restored experiment time

    def __init__(self, log_dir: str = "logs", update_freq: None | int | str = 100, write_graph: bool = True,
                 write_images: None | str | Iterable[str] = None, weight_histogram_freq: None | int | str = None,
                 paint_weights: bool = False, embedding_freq: None | int | str = "epoch",
                 write_embeddings: None | str | Iterable[str] = None,
                 embedding_labels: None | str | Iterable[str] = None,
                 embedding_images: None | str | Iterable[str] = None) -> None:
        embeddings = {"write_embeddings": write_embeddings, "embedding_labels": embedding_labels,
                      "embedding_images": embedding_images}
        given = sorted(name for name, value in embeddings.items() if value is not None)
        if given:
            raise ValueError(f"TensorBoard {', '.join(given)} (embeddings) are not supported by fe_ray: writing them "
                             "needs TensorBoard's projector plugin files. Remove the argument(s); to inspect "
                             "embeddings, save them with a trace of your own (e.g. numpy files per epoch).")
        check_tensorflow("TensorBoard")
        self.image_keys = [str(key) for key in to_list(write_images)]
        # The image keys are inputs (besides "*") so the network returns them when they are its outputs.
        super().__init__(inputs=["*", *self.image_keys])
        self.root_log_dir = log_dir
        self.update_freq = parse_freq(update_freq, "update_freq")
        self.write_graph = write_graph
        self.histogram_freq = parse_freq(weight_histogram_freq, "weight_histogram_freq")
        if paint_weights and not self.histogram_freq.freq:
            self.histogram_freq = Freq(False, 1)  # painting needs weights to paint: every epoch
        self.paint_weights = paint_weights
        self.embedding_freq = parse_freq(embedding_freq, "embedding_freq")
        self.writers = EventWriters()
        self.painted_models: set[int] = set()
        self._graph_note = False

    # ---------------------------------------------------------------------------------------------------- events
    def on_begin(self, data: Data) -> None:
        # Folders are opened at the first summary: a RestoreWizard runs after this trace and may still restore the
        # experiment time of the run it resumes.
        self.writers.close()
        self.painted_models = set()
        self._graph_note = False

    def on_batch_end(self, data: Data) -> None:
        system = self.system
        if self.write_graph:
            self._write_graphs()
        if system.mode != "train":
            return
        step = system.global_step or 0
        if self.histogram_freq.at_step(step):
            self._write_weights(step)
        if self.update_freq.at_step(step):
            self._write_scalars_and_images(data, step)

    def on_epoch_end(self, data: Data) -> None:
        system = self.system
        step = system.global_step or 0
        if system.mode == "train" and self.histogram_freq.at_epoch(system.epoch_idx):
            self._write_weights(step)
        if self.update_freq.freq and (self.update_freq.is_step or self.update_freq.at_epoch(system.epoch_idx)):
            self._write_scalars_and_images(data, step)
        self.writers.flush()  # a TensorBoard watching the run sees every finished epoch

    def on_end(self, data: Data) -> None:
        self.writers.close()

    def on_abort(self, error: BaseException) -> None:
        self.writers.close()  # keep what the failed run wrote readable

    # --------------------------------------------------------------------------------------------------- writing
    def _folder(self) -> str:
        run = os.path.join(self.root_log_dir, self.system.experiment_time)
        folder = os.path.join(run, self.system.mode or "train")
        if not any(os.path.dirname(known) == run for known in self.writers.folders):
            print(f"{PREFIX}writing logs to {os.path.abspath(run)}", flush=True)
        return folder

    def _write_scalars_and_images(self, data: Mapping[str, Any], step: int) -> None:
        scalars = list(self._scalars(data))
        images = [(key, data[key]) for key in self.image_keys if data.get(key) is not None]
        if not scalars and not images:
            return
        folder = self._folder()
        if scalars:
            self.writers.scalars(folder, scalars, step)
        for key, value in images:
            channels_first = get_framework(value) == "torch"
            batch = to_image_batch(to_loggable(value), channels_first=channels_first, key=key)
            self.writers.images(folder, key, batch, step)

    @staticmethod
    def _scalars(data: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
        for key in data:  # a ChainMap: logged values first, then the batch, each key once
            value = scalar_value(data[key])
            if value is not None:
                yield key, value

    def _write_weights(self, step: int) -> None:
        self.system.sync_models()  # with replicas, the driver's models hold the latest weights only after this
        folder = self._folder()
        for model in self.system.network.models:
            for tag, values, channels_last in named_weights(model):
                self.writers.histogram(folder, tag, values, step)
                if self.paint_weights:
                    picture = weight_to_image(values, channels_last=channels_last)
                    if picture is not None:
                        self.writers.images(folder, f"{tag}/image", picture, step)

    def _write_graphs(self) -> None:
        """Draw the models of the current epoch that were not drawn yet in this run (as FastEstimator: once each,
        into the folder of the mode that first uses them, at the epoch as step)."""
        network = self.system.network
        models = getattr(network, "ctx_models", None) or network.models
        new = [model for model in models if id(model) not in self.painted_models]
        if not new:
            return
        self.painted_models.update(id(model) for model in new)
        skipped = []
        for model in new:
            name = getattr(model, "model_name", None) or type(model).__name__
            if get_framework(model) != "tf" or not has_keras_config(model):
                skipped.append(name)
                continue
            try:
                self.writers.keras_model(self._folder(), model, self.system.epoch_idx)
            except Exception as err:  # noqa: BLE001 - as FastEstimator (Keras): a graph is not worth a failed run
                print(f"{PREFIX}could not draw the graph of {name!r} ({type(err).__name__}: {err}); training goes "
                      "on without it.", flush=True)
        if skipped and not self._graph_note:
            self._graph_note = True
            print(f"{PREFIX}no graph written for {skipped}: fe_ray draws the graphs of Sequential and functional "
                  "Keras models only (torch graphs need the tensorboard package). Pass write_graph=False to silence "
                  "this.", flush=True)
