"""CutMixBatch: CutMix augmentation (https://arxiv.org/abs/1905.04899) of an image batch in a Network."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fe_ray.backend import cast, get_framework, maximum, random_mix_patch, roll, where
from fe_ray.op.tensorop.augmentation.mix_stream import (
    MixStream,
    RandomMixOp,
    check_alpha,
    check_outputs,
    float_weight,
    on_device_of,
    writes_lambda,
)


class CutMixBatch(RandomMixOp):
    """Paste into every image a rectangle cut from its neighbour in the batch (image i gets the patch of image
    i - 1, the first that of the last), then write ``lam``, the share of each image left uncovered.

    Per step one ``lam`` is drawn from Beta(alpha, alpha) and folded to ``max(lam, 1 - lam)``, and the patch
    centre from two uniform draws; :func:`fe_ray.backend.random_mix_patch` turns them into a box with the image's
    aspect ratio covering about ``1 - lam`` of it, clipped at the borders. The written ``lam`` is recomputed from the
    clipped box: ``1 - box area / image area`` (float32), the weight of the image's own label (e.g. in a mixed
    loss).

    Images follow each framework's layout: torch ``(N, C, H, W)``, TF ``(N, H, W, C)``. Random draws come from the
    op's own checkpointable stream (see :class:`~fe_ray.op.tensorop.augmentation.mix_stream.MixStream`):
    reproducible under ``fe.enable_deterministic``, resumed exactly from checkpoints, the same on every Ray
    replica. In TF the draws are part of the traced step.

    Differences from FastEstimator: with Ray replicas each replica mixes within its own slice of the batch (image i
    with i - 1 of the slice), as FastEstimator's TF multi-GPU training does, every replica using the same box.
    torch writes a new tensor (FastEstimator overwrites the input tensor in place).

    Two forms:

    * FastEstimator 1.7's, ``inputs=("x", "y"), outputs=("x", "y")`` (as many outputs as inputs): the first input
      is the images; every other input is labels (e.g. one-hot), mixed as ``lam * y + (1 - lam) * roll(y, 1)``.
    * With ``lam`` written last (one output more than inputs), for :class:`~fe_ray.op.tensorop.loss.MixLoss`:
      every input is an image batch of the same height and width (images and their segmentation masks), all
      pasted with the same box.

    Args:
        inputs: Key(s) of the batches: images first.
        outputs: One key per input for the mixed batches, then optionally one for ``lam``.
        mode: Mode(s) in which to run; None for all.
        ds_id: Dataset id(s) in which to run; None for all.
        alpha: The Beta distribution's parameter (1.0: ``lam`` uniform in [0.5, 1] before clipping).

    Raises:
        ValueError: If ``alpha`` is not > 0, or there are not as many outputs as inputs (or one more).
    """

    def __init__(self, inputs: str | Iterable[str], outputs: Iterable[str], mode: None | str | Iterable[str] = "train",
                 ds_id: None | str | Iterable[str] = None, alpha: float = 1.0) -> None:
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self.alpha = check_alpha(alpha, "CutMixBatch")
        check_outputs(self, "CutMixBatch")
        self.in_list, self.out_list = True, True
        self.mix = MixStream()

    def forward(self, data: list[Any], state: dict[str, Any]) -> list[Any]:
        first = data[0]
        rank = len(first.shape) if first.shape is not None else None
        if rank != 4:
            layout = "(N, C, H, W)" if get_framework(first) == "torch" else "(N, H, W, C)"
            raise ValueError(f"CutMixBatch needs batches of images {layout}, but key {self.inputs[0]!r} has shape "
                             f"{list(first.shape) if rank is not None else 'of unknown rank'}.")
        # FastEstimator's order of draws: lambda, then the patch centre's x and y.
        lam = self.mix.beta(self.alpha)
        lam = maximum(lam, 1.0 - lam)
        centre_x, centre_y = self.mix.uniform(), self.mix.uniform()
        x1, x2, y1, y2, width, height = random_mix_patch(first, centre_x, centre_y, lam)
        inside = _box_mask(first, x1, x2, y1, y2, width, height)
        image_area = cast(width * height, "float32") if get_framework(width) == "tf" else float(width * height)
        kept = on_device_of(1.0 - cast((x2 - x1) * (y2 - y1), "float32") / image_area, first)
        if writes_lambda(self):
            return [where(inside, roll(tensor, shift=1, axis=0), tensor) for tensor in data] + [kept]
        # FastEstimator 1.7's form: images, then labels weighted by the share of each image left uncovered.
        labels = [_mixed_labels(tensor, kept, key) for key, tensor in zip(self.inputs[1:], data[1:])]
        return [where(inside, roll(first, shift=1, axis=0), first), *labels]


def _mixed_labels(labels: Any, kept: Any, key: str) -> Any:
    """``kept * labels + (1 - kept) * roll(labels, 1)`` in the labels' floating dtype."""
    weight = float_weight(kept, labels, key)
    return weight * labels + (1.0 - weight) * roll(labels, shift=1, axis=0)


def _box_mask(images: Any, x1: Any, x2: Any, y1: Any, y2: Any, width: Any, height: Any) -> Any:
    """A boolean mask, true inside the box, that broadcasts over ``images``: ``(H, W)`` for torch's channels-first
    layout, ``(H, W, 1)`` for TF's channels-last one."""
    if get_framework(images) == "torch":
        import torch

        rows = torch.arange(height, device=images.device).unsqueeze(1)
        cols = torch.arange(width, device=images.device).unsqueeze(0)
        box = [bound.to(images.device) for bound in (x1, x2, y1, y2)]
        return (rows >= box[2]) & (rows < box[3]) & (cols >= box[0]) & (cols < box[1])
    import tensorflow as tf

    rows = tf.range(height)[:, tf.newaxis]
    cols = tf.range(width)[tf.newaxis, :]
    inside = (rows >= y1) & (rows < y2) & (cols >= x1) & (cols < x2)
    return inside[:, :, tf.newaxis]
