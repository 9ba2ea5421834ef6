"""GradCAM: heat maps of where a classifier's chosen class score is most sensitive to a convolution layer's output,
drawn over the images at the end of each epoch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.trace.xai._cam import CamTrace
from fe_ray.trace.xai._common import colour, fit_map
from fe_ray.util import check_count
from fe_ray.util.img_data import BatchDisplay


def gradcam_maps(grads: np.ndarray, height: int, width: int) -> np.ndarray:
    """The GradCAM heat maps of a batch, as FastEstimator 1.7 computes them: each sample's gradients (N, h, w, C)
    averaged over the channels, negatives set to 0, resized to ``height`` x ``width`` and scaled to [0, 1] (a map
    without a positive value stays 0).

    Returns:
        (N, height, width) float64 maps in [0, 1].
    """
    return np.stack([fit_map(component, height, width) for component in np.maximum(np.mean(grads, axis=-1), 0)])


class GradCAM(CamTrace):
    """Draw GradCAM heat maps (https://arxiv.org/abs/1610.02391) over images at the end of each epoch: which parts
    of an image a chosen class score depends on, through a convolution layer.

    The gradients come from the Network: give the ModelOp the layer in ``intermediate_layers`` (its output gets an
    extra output key), pick each sample's class score with a :class:`~fe_ray.op.tensorop.gather.Gather` (a single
    component of the prediction, not the whole vector), and differentiate it with respect to the layer's output
    with a :class:`~fe_ray.op.tensorop.gradient.GradientOp`, e.g. for a torch model whose last convolution is the
    module ``'conv2'``::

        ModelOp(model=model, inputs="x", outputs=["y_pred", "conv"], intermediate_layers="conv2")
        Gather(inputs="y_pred", indices="y", outputs="y_score", mode="!train")
        GradientOp(finals="y_score", inputs="conv", outputs="grads", mode="!train")
        GradCAM(images="x", grads="grads", labels="y", preds="y_pred")

    At the end of each epoch the first ``n_samples`` samples of the epoch are drawn as a
    :class:`~fe_ray.util.img_data.GridDisplay` written (without logging) under ``outputs``, for an ImageSaver or
    ImageViewer listing that key: a column of true labels and one of predicted classes (argmax; named through
    ``label_mapping``) when their keys are given, the images, and the images with the heat map added. As in
    FastEstimator 1.7, the heat map is each sample's gradient averaged over the layer's channels with negatives
    cut to 0 (the gradients are not multiplied with the layer's activations), resized to the image, scaled to
    [0, 1] and coloured with the 'jet' colour map; it is added to the image and the sum divided by its maximum over
    the batch. Images and gradients are channel-first for torch, channel-last for TensorFlow and numpy.

    Differences from FastEstimator 1.7: resizing and colouring are done in numpy / matplotlib (bilinear as
    ``cv2.resize``, matplotlib's 'jet' instead of OpenCV's); a map without a positive value stays 0 (FastEstimator
    divides by 0); an epoch without batches writes nothing; labels given as a value per sample in any shape are
    accepted; a label missing from ``label_mapping`` is shown as its value; bad arguments raise ValueError. The
    collected samples are part of checkpoints. ``n_components`` is accepted, checked and, as in FastEstimator,
    unused.

    Args:
        images: The key of the images to draw on.
        grads: The key of the gradients of the chosen class score with respect to a convolution layer's output.
        n_components: Unused (FastEstimator's argument); an int >= 1.
        n_samples: How many samples to draw each epoch (the epoch's first ones), or None for all of the epoch's.
        labels: The key of the true labels (class indices or one-hot rows), or None.
        preds: The key of the model's predictions (class scores, drawn as their argmax), or None.
        label_mapping: ``{class_string: model_output_value}`` naming the classes in the label columns.
        outputs: The key to write the display to.
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.

    Raises:
        ValueError: If a key is not a str, ``n_samples`` or ``n_components`` is not a positive int, or
            ``label_mapping`` is not a dict of hashable values; at an epoch's end, if the images or gradients do not
            have the shapes above.
    """

    map_name = "grads"

    def __init__(self, images: str, grads: str, n_components: int = 3, n_samples: int | None = 5,
                 labels: str | None = None, preds: str | None = None,
                 label_mapping: Mapping[str, Any] | None = None, outputs: str = "gradcam",
                 mode: None | str | Iterable[str] = "!train", ds_id: None | str | Iterable[str] = None) -> None:
        self.n_components = check_count(n_components, "GradCAM n_components", minimum=1)
        super().__init__(images=images, maps=grads, n_samples=n_samples, labels=labels, preds=preds,
                         label_mapping=label_mapping, outputs=outputs, mode=mode, ds_id=ds_id)

    @property
    def grad_key(self) -> str:
        """The key of the gradients (FastEstimator's attribute name)."""
        return self.map_key

    def cam_columns(self, images: np.ndarray, maps: np.ndarray) -> list[BatchDisplay]:
        height, width = images.shape[1:3]
        overlay = images + colour(gradcam_maps(maps, height, width))  # a grey image broadcasts to RGB
        peak = overlay.max()
        if peak > 0:
            overlay = overlay / peak
        return [BatchDisplay(image=overlay.astype(np.float32), title=self.grad_key)]
