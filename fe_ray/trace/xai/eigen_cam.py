"""EigenCAM: the principal components of a convolution layer's output, drawn as heat maps over the images at the
end of each epoch."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.trace.xai._cam import CamTrace
from fe_ray.trace.xai._common import colour, fit_map, resize_area
from fe_ray.util import check_count
from fe_ray.util.img_data import BatchDisplay


def principal_maps(activation: np.ndarray, n_components: int | float, downsize: int | None = None
                   ) -> list[np.ndarray]:
    """The EigenCAM maps of one sample's activations (h, w, C), as FastEstimator 1.7 computes them.

    Each pixel is a point of C values; the points are centred on their mean and projected onto the first principal
    directions (right singular vectors), negatives cut to 0.

    Args:
        activation: One sample's layer output, channel-last.
        n_components: How many components (an int; at most the number of directions there are), or a float in
            (0, 1]: as many as it takes to explain that fraction of the variance.
        downsize: If set and the map's longer side is longer, shrink it (area averaging) so that side has this
            length before the decomposition.

    Returns:
        The (h', w') component maps, the strongest first.
    """
    maps = np.moveaxis(np.asarray(activation, dtype=np.float64), -1, 0)  # (C, h, w)
    height, width = maps.shape[1:]
    if downsize and max(height, width) > downsize:
        scale = downsize / max(height, width)
        maps = resize_area(maps, max(1, int(height * scale)), max(1, int(width * scale)))
    flat = maps.reshape(maps.shape[0], -1).T
    flat = flat - flat.mean(axis=0)
    _, singular, right = np.linalg.svd(flat, full_matrices=False)
    if isinstance(n_components, float):
        variance = np.cumsum(np.square(singular))
        count = 1 + int(np.searchsorted(variance / variance[-1], n_components)) if variance[-1] > 0 else 1
    else:
        count = n_components
    count = min(count, len(right))
    return [np.maximum(flat @ right[idx], 0).reshape(maps.shape[1:]) for idx in range(count)]


class EigenCAM(CamTrace):
    """Draw EigenCAM heat maps (https://arxiv.org/abs/2008.00299) over images at the end of each epoch: the principal
    components of a convolution layer's output, showing what the model's feature extractor responds to (whatever
    the class). They say little about adversarial attacks, to which they are insensitive.

    The activations come from the Network: give the ModelOp the layer in ``intermediate_layers`` and an extra output
    key for it, e.g. for a torch model whose last convolution is the module ``'conv2'``::

        ModelOp(model=model, inputs="x", outputs=["y_pred", "conv"], intermediate_layers="conv2")
        EigenCAM(images="x", activations="conv", labels="y", preds="y_pred")

    At the end of each epoch the first ``n_samples`` samples of the epoch are drawn as a
    :class:`~fe_ray.util.img_data.GridDisplay` written (without logging) under ``outputs``, for an ImageSaver or
    ImageViewer listing that key: a column of true labels and one of predicted classes (argmax; named through
    ``label_mapping``) when their keys are given, the images, then one column per component ('Component 0', ...).
    Each component map (see :func:`principal_maps`) is resized to the image, scaled to [0, 1], coloured with the
    'jet' colour map, added to the image and the sum divided by its maximum; a sample with fewer components than
    the column (``n_components`` a fraction) gets a white panel. Images and activations are channel-first for
    torch, channel-last for TensorFlow and numpy.

    Differences from FastEstimator 1.7: resizing and colouring are done in numpy / matplotlib (bilinear as
    ``cv2.resize``; ``downsize`` averages areas as ``cv2.INTER_AREA``, keeping the map's height and width in
    their order, where FastEstimator swaps them for non-square maps; matplotlib's 'jet' instead of OpenCV's); an
    int ``n_components`` larger than the number of principal directions draws them all (FastEstimator fails); an
    epoch without batches writes nothing; a label missing from ``label_mapping`` is shown as its value; bad
    arguments raise ValueError. The collected samples are part of checkpoints.

    Args:
        images: The key of the images to draw on.
        activations: The key of a convolution layer's output (see above).
        n_components: How many principal components to draw (an int >= 1), or a float in (0, 1]: per sample as
            many as explain that fraction of the variance.
        n_samples: How many samples to draw each epoch (the epoch's first ones), or None for all of the epoch's.
        downsize: If set (an int >= 1), shrink each layer output whose longer side exceeds it to that length
            before the decomposition (faster; 64 is a reasonable value).
        labels: The key of the true labels (class indices or one-hot rows), or None.
        preds: The key of the model's predictions (class scores, drawn as their argmax), or None.
        label_mapping: ``{class_string: model_output_value}`` naming the classes in the label columns.
        outputs: The key to write the display to.
        mode: Mode(s) to run in ('train', 'eval', 'test'); None for all; '!mode' to exclude.
        ds_id: Dataset id(s) to run for; None for all; '!id' to exclude.

    Raises:
        ValueError: If a key is not a str, ``n_components``, ``n_samples`` or ``downsize`` is invalid, or
            ``label_mapping`` is not a dict of hashable values; at an epoch's end, if the images or activations do
            not have the shapes above.
    """

    map_name = "activations"

    def __init__(self, images: str, activations: str, n_components: int | float = 3, n_samples: int | None = 5,
                 downsize: int | None = None, labels: str | None = None, preds: str | None = None,
                 label_mapping: Mapping[str, Any] | None = None, outputs: str = "eigencam",
                 mode: None | str | Iterable[str] = "!train", ds_id: None | str | Iterable[str] = None) -> None:
        fraction = isinstance(n_components, numbers.Real) and not isinstance(n_components, numbers.Integral)
        if fraction:
            if not 0 < n_components <= 1:
                raise ValueError(f"EigenCAM n_components must be an int >= 1 or a fraction of the variance in (0, 1], "
                                 f"got {n_components!r}.")
        elif isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral) or n_components < 1:
            raise ValueError(f"EigenCAM n_components must be an int >= 1 or a fraction of the variance in (0, 1], got "
                             f"{n_components!r}.")
        self.n_components = float(n_components) if fraction else int(n_components)
        self.downsize = None if downsize is None else check_count(downsize, "EigenCAM downsize", minimum=1)
        super().__init__(images=images, maps=activations, n_samples=n_samples, labels=labels, preds=preds,
                         label_mapping=label_mapping, outputs=outputs, mode=mode, ds_id=ds_id)

    @property
    def activation_key(self) -> str:
        """The key of the layer output (FastEstimator's attribute name)."""
        return self.map_key

    def cam_columns(self, images: np.ndarray, maps: np.ndarray) -> list[BatchDisplay]:
        height, width = images.shape[1:3]
        per_sample = [principal_maps(activation, self.n_components, self.downsize) for activation in maps]
        columns = []
        for idx in range(max(len(components) for components in per_sample)):
            panels = []
            for image, components in zip(images, per_sample):
                if idx < len(components):
                    panel = image + colour(fit_map(components[idx], height, width))
                    peak = panel.max()
                    panels.append(panel / peak if peak > 0 else panel)
                else:
                    panels.append(np.ones((height, width, 3)))  # this sample has no such component
            columns.append(BatchDisplay(image=np.array(panels, dtype=np.float32), title=f"Component {idx}"))
        return columns
