"""The part GradCAM and EigenCAM share: collecting an epoch's first images with a per-sample feature map (gradients
or activations of a convolution layer), labels and predictions, checkpointing them, and laying out the display."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.trace.trace import Data, Trace
from fe_ray.trace.xai._common import as_numpy, channel_last, invert_mapping, is_channel_first, label_texts
from fe_ray.util import check_count
from fe_ray.util.img_data import BatchDisplay, GridDisplay


def _check_key(value: Any, name: str, trace: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        kind = "a key (str) or None" if optional else "a key (a non-empty str)"
        raise ValueError(f"{trace} {name} must be {kind}, got {value!r}.")
    return value


class CamTrace(Trace):
    """Base of the class-activation-map traces (see :class:`~fe_ray.trace.xai.GradCAM`).

    Subclasses name their feature-map argument (``map_name``) and draw the CAM columns in :meth:`cam_columns`.
    Every batch until ``n_samples`` samples are found is kept as numpy (with whether each key was channel-first),
    so the state checkpoints as plain arrays and holds no device memory.
    """

    map_name: str = "maps"

    def __init__(self, images: str, maps: str, n_samples: int | None, labels: str | None, preds: str | None,
                 label_mapping: Mapping[str, Any] | None, outputs: str, mode: None | str | Iterable[str],
                 ds_id: None | str | Iterable[str]) -> None:
        name = type(self).__name__
        self.image_key = _check_key(images, "images", name)
        self.map_key = _check_key(maps, self.map_name, name)
        self.true_label_key = _check_key(labels, "labels", name, optional=True)
        self.pred_label_key = _check_key(preds, "preds", name, optional=True)
        _check_key(outputs, "outputs", name)
        self.n_samples = None if n_samples is None else check_count(n_samples, f"{name} n_samples", minimum=1)
        self.label_mapping = invert_mapping(label_mapping, name)
        inputs = [key for key in (images, maps, labels, preds) if key is not None]
        super().__init__(inputs=inputs, outputs=outputs, mode=mode, ds_id=ds_id)
        self._reset()

    def _reset(self) -> None:
        """Forget the collected samples (at each epoch's end)."""
        self.collected: dict[str, list[np.ndarray]] = {key: [] for key in self.inputs}
        self.channel_first: dict[str, bool] = {}
        self.n_found = 0

    def on_batch_end(self, data: Data) -> None:
        if self.n_samples is not None and self.n_found >= self.n_samples:
            return
        for key in self.inputs:
            self.channel_first[key] = is_channel_first(data[key])
            self.collected[key].append(as_numpy(data[key]))
        self.n_found += len(self.collected[self.image_key][-1])

    def on_epoch_end(self, data: Data) -> None:
        if not self.n_found:
            return  # no batch of this trace's modes / datasets ran this epoch: nothing to draw
        count = self.n_samples or self.n_found
        batch = {key: np.concatenate(parts)[:count] for key, parts in self.collected.items()}
        layout = dict(self.channel_first)
        self._reset()
        images = channel_last(batch[self.image_key], layout[self.image_key]).astype(np.float64)
        if images.ndim == 3:
            images = images[..., None]  # grey images without a channel axis
        maps = channel_last(batch[self.map_key], layout[self.map_key])
        name = type(self).__name__
        if images.ndim != 4 or maps.ndim != 4 or len(maps) != len(images):
            raise ValueError(f"{name} needs a batch of images under {self.image_key!r} ((N, H, W[, C]); torch "
                             f"(N, C, H, W)) and one 2-D feature map per channel and image under {self.map_key!r} "
                             f"((N, h, w, C); torch (N, C, h, w)), e.g. a convolution layer's output, got shapes "
                             f"{list(batch[self.image_key].shape)} and {list(batch[self.map_key].shape)}.")
        columns = []
        for key in (self.true_label_key, self.pred_label_key):
            if key is not None:
                columns.append(BatchDisplay(text=label_texts(batch[key], self.label_mapping), title=key))
        columns.append(BatchDisplay(image=images, title=self.image_key))
        columns.extend(self.cam_columns(images, maps))
        data.write_without_log(self.outputs[0], GridDisplay(columns=columns))

    @abstractmethod
    def cam_columns(self, images: np.ndarray, maps: np.ndarray) -> list[BatchDisplay]:
        """The display columns of the heat maps.

        Args:
            images: The samples' images, (N, H, W, C) float.
            maps: Their feature maps, (N, h, w, C).
        """

    def state_dict(self) -> dict[str, Any]:
        # Joined copies: the lists keep growing after a mid-epoch checkpoint.
        return {"collected": {key: np.concatenate(parts) for key, parts in self.collected.items() if parts},
                "channel_first": dict(self.channel_first), "n_found": self.n_found}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._reset()
        unknown = set(state.get("collected", {})) - set(self.inputs)
        if unknown:
            raise ValueError(f"{type(self).__name__} checkpoint holds keys {sorted(unknown)} that are not its inputs "
                             f"{self.inputs}; the checkpoint belongs to a different configuration.")
        for key, value in state.get("collected", {}).items():
            self.collected[key] = [np.array(value)]
        self.channel_first = {str(key): bool(value) for key, value in state.get("channel_first", {}).items()}
        self.n_found = int(state.get("n_found", 0))
