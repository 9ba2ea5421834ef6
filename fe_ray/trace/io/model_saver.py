"""ModelSaver: save a model's weights every few training epochs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fe_ray.backend import save_model
from fe_ray.trace.trace import Data, Trace


class ModelSaver(Trace):
    """Save ``model`` as ``<save_dir>/<model_name>_epoch_<N>`` at the end of every ``frequency``-th training epoch.

    The file format is the framework's (torch: ``.pt`` state dict; TensorFlow: Keras ``.weights.h5``) and loads
    with :func:`fe_ray.backend.load_model` or ``fe_ray.build(..., weights_path=...)``.

    Args:
        model: A model built with :func:`fe_ray.build`.
        save_dir: Folder for the weight files (created if missing).
        frequency: Save every this many epochs.
        max_to_keep: Keep only the newest N files (older ones are deleted); None keeps all.

    Raises:
        ValueError: If ``frequency`` or ``max_to_keep`` is not a positive int.
    """

    def __init__(self, model: Any, save_dir: str, frequency: int = 1, max_to_keep: int | None = None) -> None:
        if not isinstance(frequency, int) or isinstance(frequency, bool) or frequency < 1:
            raise ValueError(f"ModelSaver frequency must be a positive int (epochs), got {frequency!r}.")
        if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 1):
            raise ValueError(f"ModelSaver max_to_keep must be a positive int or None (keep all), got {max_to_keep!r}.")
        super().__init__(mode="train")
        self.model = model
        self.save_dir = save_dir
        self.frequency = frequency
        self.max_to_keep = max_to_keep
        self.saved_paths: list[str] = []

    def on_epoch_end(self, data: Data) -> None:
        if self.system.epoch_idx % self.frequency != 0:
            return
        self.system.sync_models()
        name = f"{self.model.model_name}_epoch_{self.system.epoch_idx}"
        path = save_model(self.model, self.save_dir, model_name=name)
        print(f"FastEstimator-ModelSaver: Saved model to {path}", flush=True)
        self.saved_paths.append(path)
        if self.max_to_keep is not None:
            while len(self.saved_paths) > self.max_to_keep:
                old = self.saved_paths.pop(0)
                if os.path.exists(old) and old != path:
                    os.remove(old)

    def state_dict(self) -> dict[str, Any]:
        return {"saved_paths": list(self.saved_paths)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.saved_paths = list(state.get("saved_paths", []))
