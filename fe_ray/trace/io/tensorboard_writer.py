"""TensorBoard event files written with TensorFlow alone: the summaries of :class:`~fe_ray.trace.io.TensorBoard`.

TensorFlow's ``tf.summary.scalar`` / ``histogram`` / ``image`` are implemented by the ``tensorboard`` package and
raise without it, while ``tf.summary.create_file_writer``, ``tf.summary.write`` and ``tf.summary.graph`` are
TensorFlow's own. So every summary here goes through ``tf.summary.write`` in the layout the ``tensorboard`` package's
v2 summaries use (a tensor plus plugin metadata); TensorBoard reads it as if ``tf.summary.scalar`` etc. wrote it:

* scalars: a float32 0-d tensor, plugin "scalars";
* histograms: a float64 ``[buckets, 3]`` tensor of (left edge, right edge, count) rows, plugin "histograms";
* images: a string vector ``[width, height, png, png, ...]``, plugin "images";
* a Keras model's config (TensorBoard's "conceptual graph"): its JSON, plugin "graph_keras_model".

The array helpers (:func:`histogram_buckets`, :func:`to_image_batch`, :func:`weight_to_image`,
:func:`named_weights`) are plain numpy and import no framework.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from fe_ray.backend import get_framework

#: How TensorBoard reads an image's channels: grey, RGB, RGBA.
IMAGE_CHANNELS = (1, 3, 4)
#: Buckets per weight histogram (the ``tensorboard`` package's default).
HISTOGRAM_BUCKETS = 30


def _missing_tensorflow(what: str) -> str:
    return (f"{what} writes TensorBoard event files with TensorFlow, which is not installed. Install it with "
            "`pip install tensorflow-cpu` (or `tensorflow`); the `tensorboard` package is only needed to view the "
            "files.")


def check_tensorflow(what: str) -> None:
    """Raise early, without importing it, when TensorFlow cannot be imported.

    Raises:
        ImportError: Naming ``what`` needs it and ``pip install tensorflow-cpu``.
    """
    if sys.modules.get("tensorflow") is not None:
        return
    try:
        found = "tensorflow" not in sys.modules and importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(_missing_tensorflow(what))


def import_tensorflow(what: str) -> ModuleType:
    """Import TensorFlow, or raise the ImportError of :func:`check_tensorflow`."""
    try:
        import tensorflow as tf
    except ImportError as err:
        raise ImportError(_missing_tensorflow(what)) from err
    return tf


# ---------------------------------------------------------------------------------------------------- array helpers
def histogram_buckets(values: Any, bucket_count: int = HISTOGRAM_BUCKETS) -> np.ndarray:
    """``values`` (any shape) as ``[bucket_count, 3]`` rows of (left edge, right edge, count), float64.

    The buckets split [min, max] evenly (a constant array gets the range value +- 0.5, as numpy's histogram does).
    Non-finite values cannot be placed in a bucket and are left out; an array without finite values gives 0 rows.
    """
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return np.zeros((0, 3), dtype=np.float64)
    counts, edges = np.histogram(flat, bins=bucket_count)
    return np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)


def to_image_batch(value: Any, channels_first: bool, key: str = "image") -> np.ndarray:
    """A batch of images (or one image) as ``[N, H, W, C]`` uint8 for TensorBoard.

    Layouts: 4-D is a batch, channels first (NCHW) when ``channels_first`` (torch tensors), else channels last
    (NHWC); when that layout's channel axis is not 1, 3 or 4 but the other layout's is, the other layout is used.
    3-D is one image in that layout (CHW or HWC, no fallback: a 3-D array could also be a grey batch). 2-D is one
    grey image (HW). Values: uint8 as they are; floats (and bools) are in [0, 1], scaled by 255 and clipped (as
    TensorFlow and FastEstimator treat them; NaN becomes 0); other integers are pixel values clipped to [0, 255].

    Raises:
        ValueError: If the array has another rank or no channel axis of 1, 3 or 4 in an accepted layout.
        TypeError: If the values are not numbers.
    """
    array = np.asarray(value)
    layout = "CHW" if channels_first else "HWC"
    if array.ndim == 2:
        array = array[None, :, :, None]
    elif array.ndim in (3, 4):
        batch = array[None] if array.ndim == 3 else array
        first, last = batch.shape[1] in IMAGE_CHANNELS, batch.shape[-1] in IMAGE_CHANNELS
        if array.ndim == 4 and not (first if channels_first else last):
            channels_first = first  # the other layout, when its channel axis fits
        if not (first if channels_first else last):
            raise ValueError(f"TensorBoard cannot write {key!r} of shape {array.shape} as images: expected a batch "
                             f"N{layout} (or N{'HWC' if layout == 'CHW' else 'CHW'}), one {layout} image or one HW "
                             f"grey image, with {IMAGE_CHANNELS} channels. Reshape or transpose it, e.g. add a "
                             "channel axis to grey images.")
        array = np.transpose(batch, (0, 2, 3, 1)) if channels_first else batch
    else:
        raise ValueError(f"TensorBoard cannot write {key!r} of shape {array.shape} as images: expected 2 (HW), 3 "
                         f"({layout}) or 4 (N{layout}) dimensions.")
    return _to_uint8(array, key)


def _to_uint8(array: np.ndarray, key: str) -> np.ndarray:
    kind = array.dtype.kind
    if array.dtype == np.uint8:
        return array
    if kind == "b":
        return array.astype(np.uint8) * 255
    if kind == "f":
        scaled = np.nan_to_num(array.astype(np.float64), nan=0.0) * 255.0
        return np.clip(np.round(scaled), 0, 255).astype(np.uint8)
    if kind in "iu":
        return np.clip(array, 0, 255).astype(np.uint8)
    raise TypeError(f"TensorBoard cannot write {key!r} as images: its values are {array.dtype}, not numbers.")


def weight_to_image(weight: np.ndarray, channels_last: bool) -> np.ndarray | None:
    """A picture of a weight array as ``[N, H, W, 1]`` uint8, or None when it has no picture (3-D kernels...).

    As FastEstimator paints weights: a bias (1-D) is one column image, a dense kernel (2-D) one image, a 1-D conv
    kernel one image per output channel, a 2-D conv kernel one image per output channel summing the absolute values
    over the input channels. ``channels_last`` is TensorFlow's kernel layout ([H, W, in, out]); torch's is
    [out, in, H, W]. Unlike FastEstimator (whose weights are clipped to [0, 1]), each image is scaled from its own
    minimum to maximum, so negative and large weights stay visible.
    """
    w_img = np.squeeze(np.asarray(weight, dtype=np.float64))
    if w_img.ndim == 1:
        w_img = w_img.reshape(1, -1, 1)
    elif w_img.ndim == 2:
        w_img = w_img[None]
    elif w_img.ndim == 3:
        w_img = np.transpose(w_img, (2, 0, 1)) if channels_last else w_img
    elif w_img.ndim == 4:
        w_img = np.transpose(w_img, (3, 2, 0, 1)) if channels_last else w_img
        w_img = np.abs(w_img).sum(axis=1)
    else:
        return None
    low = w_img.min(axis=(1, 2), keepdims=True)
    span = w_img.max(axis=(1, 2), keepdims=True) - low
    scaled = (w_img - low) / np.where(span > 0, span, 1.0)
    return np.round(scaled * 255.0).astype(np.uint8)[..., None]


def named_weights(model: Any) -> list[tuple[str, np.ndarray, bool]]:
    """``(tag, values, channels_last)`` for every weight of a torch or Keras model, as numpy.

    Tags are ``<model_name>_<weight path>``: torch parameter names with '/' for '.' (``mlp_1/weight``), Keras
    weight paths below the model (``mlp_dense/kernel``; Keras 3 has no ``:0`` suffix to replace, as FastEstimator's
    ``dense/kernel_0``). torch lists its parameters (not buffers), Keras all its weights, as FastEstimator does.
    """
    name = getattr(model, "model_name", None) or type(model).__name__
    if get_framework(model) == "torch":
        return [(f"{name}_{key.replace('.', '/')}", param.detach().float().cpu().numpy(), False)
                for key, param in model.named_parameters()]
    weights = []
    prefix = f"{getattr(model, 'name', '')}/"
    for weight in getattr(model, "weights", []):
        path = getattr(weight, "path", None) or weight.name.replace(":", "_")
        path = path[len(prefix):] if path.startswith(prefix) else path
        weights.append((f"{name}_{path}", np.asarray(weight.numpy()), True))
    return weights


def has_keras_config(model: Any) -> bool:
    """Whether a Keras model is a Sequential or functional model, whose config describes its layer graph (a
    subclassed model's config does not)."""
    return any(cls.__name__ in ("Sequential", "Functional") for cls in type(model).__mro__)


# ------------------------------------------------------------------------------------------------------ the writer
class EventWriters:
    """``tf.summary`` file writers, one per folder, opened on first use (TensorFlow is imported then)."""

    def __init__(self) -> None:
        self._writers: dict[str, Any] = {}
        self._tf: ModuleType | None = None

    @property
    def tf(self) -> ModuleType:
        if self._tf is None:
            self._tf = import_tensorflow("fe_ray's TensorBoard trace")
        return self._tf

    @property
    def folders(self) -> list[str]:
        """The folders written so far (until :meth:`close`)."""
        return list(self._writers)

    def _writer(self, folder: str) -> Any:
        writer = self._writers.get(folder)
        if writer is None:
            os.makedirs(folder, exist_ok=True)
            writer = self._writers[folder] = self.tf.summary.create_file_writer(folder)
        return writer

    def _metadata(self, plugin: str, data_class: str, content: bytes = b"") -> Any:
        from tensorflow.core.framework import summary_pb2

        metadata = summary_pb2.SummaryMetadata()
        metadata.plugin_data.plugin_name = plugin
        metadata.plugin_data.content = content
        metadata.data_class = getattr(summary_pb2, data_class)
        return metadata

    def scalars(self, folder: str, values: Iterable[tuple[str, float]], step: int) -> None:
        tf = self.tf
        metadata = self._metadata("scalars", "DATA_CLASS_SCALAR")
        with self._writer(folder).as_default():
            for tag, value in values:
                tf.summary.write(tag, tf.constant(value, dtype=tf.float32), step=step, metadata=metadata)

    def histogram(self, folder: str, tag: str, values: np.ndarray, step: int) -> None:
        tf = self.tf
        with self._writer(folder).as_default():
            tf.summary.write(tag, tf.constant(histogram_buckets(values), dtype=tf.float64), step=step,
                             metadata=self._metadata("histograms", "DATA_CLASS_TENSOR"))

    def images(self, folder: str, tag: str, batch: np.ndarray, step: int) -> None:
        """Write a ``[N, H, W, C]`` uint8 batch as one image summary of N images."""
        tf = self.tf
        encoded = [tf.io.encode_png(image) for image in batch]
        dims = [tf.constant(str(batch.shape[2]).encode()), tf.constant(str(batch.shape[1]).encode())]
        with self._writer(folder).as_default():
            tf.summary.write(tag, tf.stack(dims + encoded), step=step,
                             metadata=self._metadata("images", "DATA_CLASS_BLOB_SEQUENCE"))

    def keras_model(self, folder: str, model: Any, step: int) -> None:
        """Write a Sequential / functional Keras model's JSON config (TensorBoard's conceptual graph) and its
        inference graph (the op graph of ``model(inputs, training=False)``)."""
        tf = self.tf
        tag = getattr(model, "model_name", None) or model.name
        specs = [tf.TensorSpec(tensor.shape, tensor.dtype) for tensor in model.inputs]
        forward = tf.function(lambda *inputs: model(inputs[0] if len(inputs) == 1 else list(inputs),
                                                    training=False))
        graph = forward.get_concrete_function(*specs).graph
        with self._writer(folder).as_default():
            tf.summary.write(tag, tf.constant(model.to_json()), step=step,
                             metadata=self._metadata("graph_keras_model", "DATA_CLASS_UNKNOWN", b"1"))
            tf.summary.graph(graph)

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            writer.close()
